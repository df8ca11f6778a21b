# Shared harness for the end-to-end and security suites (bash).
#
# A suite file defines functions named test_<name> and ends with `run_tests`.
# Each test runs in a subshell, in a fresh scratch directory under $TEST_ROOT,
# with a private HOME, no system or global git config but a test identity,
# and `git mullet` resolving to the binary under test ($MULLET_BIN).
# Output is TAP-like, and the last line is "N passed, N failed".
set -uo pipefail

: "${MULLET_BIN:?set MULLET_BIN to the git-mullet binary under test}"
HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITE_NAME="$(basename "$0" .sh)"
TEST_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/mullet-${SUITE_NAME}.XXXXXX")"
chmod 755 "$TEST_ROOT"
export HOME="$TEST_ROOT/home"
export XDG_CONFIG_HOME="$HOME/.config"
mkdir -p "$HOME" "$TEST_ROOT/bin"
ln -s "$MULLET_BIN" "$TEST_ROOT/bin/git-mullet"
export PATH="$TEST_ROOT/bin:$PATH"
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.invalid
export GIT_COMMITTER_NAME=test GIT_COMMITTER_EMAIL=test@example.invalid
git config --global init.defaultBranch main
git config --global advice.detachedHead false
unset GIT_MULLET_CONFIG GIT_DIR GIT_WORK_TREE

fail() {
  echo "    FAIL: $*" >&2
  exit 1
}

# new_repo DIR: a repository with one commit of a few files.
new_repo() {
  local dir="$1"
  mkdir -p "$dir"
  git -C "$dir" init -q
  printf 'hello\n' >"$dir/README"
  mkdir -p "$dir/src"
  printf 'int main() { return 0; }\n' >"$dir/src/main.c"
  git -C "$dir" add -A
  git -C "$dir" commit -qm "initial commit"
}

# expect_exit CODE COMMAND...: runs it, keeps stdout in $OUT and stderr in $ERR.
expect_exit() {
  local expected="$1"
  shift
  local out_file err_file
  out_file="$(mktemp)"
  err_file="$(mktemp)"
  "$@" >"$out_file" 2>"$err_file"
  local code=$?
  OUT="$(cat "$out_file")"
  ERR="$(cat "$err_file")"
  rm -f "$out_file" "$err_file"
  if [ "$code" != "$expected" ]; then
    echo "    command: $*" >&2
    echo "    stdout: $OUT" >&2
    echo "    stderr: $ERR" >&2
    fail "exit code $code, expected $expected"
  fi
}

assert_eq() {
  [ "$1" = "$2" ] || fail "${3:-values differ}: got '$1', expected '$2'"
}

assert_contains() {
  case "$1" in
    *"$2"*) ;;
    *) fail "${3:-text} does not contain '$2': $1" ;;
  esac
}

assert_not_contains() {
  case "$1" in
    *"$2"*) fail "${3:-text} contains '$2': $1" ;;
    *) ;;
  esac
}

assert_absent() {
  [ ! -e "$1" ] && [ ! -L "$1" ] || fail "$1 exists but must not"
}

# json_field JSON KEY: one top-level field of a JSON object, as text.
json_field() {
  python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"
}

# run_job ARGS...: `git mullet run --json -q ARGS` in the current repo;
# sets JOB (the id) and JOB_JSON.
run_job() {
  local out
  out="$(git mullet run --json -q "$@")"
  RUN_CODE=$?
  JOB_JSON="$out"
  JOB="$(json_field "$out" id 2>/dev/null || true)"
}

run_tests() {
  local passed=0 failed=0 number=0 name
  for name in $(declare -F | awk '{print $3}' | grep '^test_' | sort); do
    if [ -n "${ONLY:-}" ] && [ "$name" != "$ONLY" ]; then continue; fi
    number=$((number + 1))
    local dir="$TEST_ROOT/$name"
    mkdir -p "$dir"
    if (cd "$dir" && set -e && "$name"); then
      echo "ok $number - $name"
      passed=$((passed + 1))
    else
      echo "not ok $number - $name (scratch kept in $dir)"
      failed=$((failed + 1))
    fi
  done
  echo "$passed passed, $failed failed"
  if [ "$failed" -eq 0 ]; then
    chmod -R u+rwX "$TEST_ROOT" 2>/dev/null
    rm -rf "$TEST_ROOT"
  fi
  [ "$passed" -gt 0 ] && [ "$failed" -eq 0 ]
}
