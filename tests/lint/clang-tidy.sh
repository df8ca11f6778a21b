#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy, with the build's
# compile_commands.json, two files at a time. Any finding fails.
#
# Every src/**/*.cpp is about 7 s of clang-tidy, 13 minutes of CI's two
# cores for all of them, so by default only what can have changed is
# checked: tests/lint/clean-at names a commit where every file was clean
# (scripts/lint records it after a full run without findings), and a file
# is checked when it, or any header it includes (from the build's ninja
# deps), differs from that commit. Everything is checked when that commit is
# not an ancestor of HEAD, when the checks or the compile flags changed, or
# with MULLET_TIDY_ALL=1.
# Usage: clang-tidy.sh <source dir> <build dir>
set -euo pipefail
source_dir="$(cd "$1" && pwd -P)"
build_dir="$(cd "$2" && pwd -P)"
tidy="${CLANG_TIDY:-clang-tidy}"
command -v "$tidy" >/dev/null || { echo "clang-tidy not found (scripts/install-deps installs it)" >&2; exit 1; }
[ -f "$build_dir/compile_commands.json" ] || { echo "no $build_dir/compile_commands.json" >&2; exit 1; }
cd "$source_dir"

all_sources() { find src -name '*.cpp' -print0 | sort -z; }

# changed_sources BASE: the sources to check, NUL-separated.
changed_sources() {
  local base="$1"
  {
    git diff --name-only -z "$base" --
    git ls-files -z --others --exclude-standard -- src
  } | python3 "$source_dir/tests/lint/select_sources.py" "$source_dir" "$build_dir"
}

list="$(mktemp)"
trap 'rm -f "$list"' EXIT
base="$(tr -d ' \n' <tests/lint/clean-at 2>/dev/null || true)"
if [ "${MULLET_TIDY_ALL:-0}" = 1 ]; then
  scope="every file (MULLET_TIDY_ALL=1)"
  all_sources >"$list"
elif ! [[ "$base" =~ ^[0-9a-f]{40}$ ]] || ! git merge-base --is-ancestor "$base" HEAD 2>/dev/null; then
  scope="every file (tests/lint/clean-at names no ancestor of HEAD)"
  all_sources >"$list"
elif [ -n "$(git diff --name-only "$base" -- .clang-tidy src/CMakeLists.txt CMakeLists.txt)" ]; then
  scope="every file (.clang-tidy or the CMake files changed since ${base:0:10})"
  all_sources >"$list"
else
  changed_sources "$base" >"$list"
  scope="the files changed since ${base:0:10} (clean there), or including a changed header"
fi
count="$(tr -cd '\0' <"$list" | wc -c)"
echo "clang-tidy: $count of $(all_sources | tr -cd '\0' | wc -c) files: $scope"
# Each file's findings are printed together, and only when there are some.
[ "$count" -eq 0 ] || xargs -0 -n 1 -P "${MULLET_TIDY_JOBS:-2}" sh -c '
    if ! out="$("$0" -p "$1" --quiet --warnings-as-errors="*" "$2" 2>&1)"; then
      printf "%s\n" "$out"
      exit 1
    fi' "$tidy" "$build_dir" <"$list"
echo "clang-tidy: no findings"
