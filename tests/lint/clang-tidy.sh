#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy over every src/**/*.cpp, with
# the build's compile_commands.json, two files at a time. Any finding fails.
# Usage: clang-tidy.sh <source dir> <build dir>
set -euo pipefail
source_dir="$1"
build_dir="$2"
tidy="${CLANG_TIDY:-clang-tidy}"
command -v "$tidy" >/dev/null || { echo "clang-tidy not found (scripts/install-deps installs it)" >&2; exit 1; }
[ -f "$build_dir/compile_commands.json" ] || { echo "no $build_dir/compile_commands.json" >&2; exit 1; }
cd "$source_dir"
# Each file's findings are printed together, and only when there are some.
find src -name '*.cpp' -print0 | sort -z |
  xargs -0 -n 1 -P "${MULLET_TIDY_JOBS:-2}" sh -c '
    if ! out="$("$0" -p "$1" --quiet --warnings-as-errors="*" "$2" 2>&1)"; then
      printf "%s\n" "$out"
      exit 1
    fi' "$tidy" "$build_dir"
echo "clang-tidy: no findings"
