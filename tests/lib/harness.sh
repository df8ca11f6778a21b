# Shared harness for the end-to-end and security suites (bash).
#
# A suite file defines functions named test_<name> and ends with `run_tests`.
# Each test runs in a subshell, in a fresh scratch directory under $TEST_ROOT,
# with a private HOME, no system or global git config but a test identity,
# and `git mullet` resolving to the binary under test ($MULLET_BIN).
# Output is TAP-like, and the last line is "N passed, N failed".
set -uo pipefail
# With pipefail, never end a pipeline in `grep -q`: grep leaves at the first
# match, the writer dies of SIGPIPE, and the pipeline "fails" exactly when
# the pattern was found. Send grep's output to /dev/null instead.

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
AS_USER_TESTS=()

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
  local code=0
  "$@" >"$out_file" 2>"$err_file" || code=$?
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
  # The JSON goes through stdin: a record can be larger than one argument
  # may be (128 KiB).
  # Scalars through jq (fast), printed as Python prints them; anything else
  # through Python itself.
  local scalar
  if command -v jq >/dev/null &&
    scalar="$(printf '%s' "$1" | jq -r --arg key "$2" '.[$key] |
      if . == null then "null" elif . == true then "True" elif . == false then "False"
      elif type == "string" or type == "number" then . else error("not a scalar") end' 2>/dev/null)"; then
    printf '%s\n' "$scalar"
  else
    printf '%s' "$1" | python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print("null" if v is None else v)' "$2"
  fi
}

# run_job ARGS...: `git mullet run --json -q ARGS` in the current repo;
# sets JOB (the id) and JOB_JSON.
run_job() {
  local out
  RUN_CODE=0
  # Bounded, so a limit that does not work fails the test instead of hanging it.
  out="$(timeout -k 5 "${RUN_JOB_BOUND:-600}" git mullet run --json -q "$@")" || RUN_CODE=$?
  [ "$RUN_CODE" != 124 ] && [ "$RUN_CODE" != 137 ] || fail "git mullet run did not end within ${RUN_JOB_BOUND:-600} s"
  JOB_JSON="$out"
  JOB="$(json_field "$out" id 2>/dev/null || true)"
}

# user_config LINE...: the user config file (GIT_MULLET_CONFIG) for this test.
user_config() {
  USER_CONFIG="${USER_CONFIG:-$(mktemp "$TEST_ROOT/config.XXXXXX")}"
  printf '%s\n' "$@" >"$USER_CONFIG"
  export GIT_MULLET_CONFIG="$USER_CONFIG"
}

# marker: a number no other process on the host has on its command line, for
# `sleep $(marker)` and pgrep.
marker() {
  echo "1000.$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
}

# is_running PATTERN: some process's command line matches (pgrep itself never).
is_running() {
  pgrep -f "[${1:0:1}]${1:1}" >/dev/null
}

# is_running_exactly COMMAND: a process whose whole command line is COMMAND
# runs. A shell or bwrap that holds COMMAND among its words does not count
# (is_running's match): once a worker's script `...; sleep N` runs its own
# `sleep N`, everything the script did before it is done.
is_running_exactly() {
  pgrep -f "^$(printf '%s' "$1" | sed 's/[][\\.*^$+?(){}|]/\\&/g')\$" >/dev/null
}

# no_process_left PATTERN: within 2 s, no process's command line matches.
no_process_left() {
  local pattern="[${1:0:1}]${1:1}" deadline=$((SECONDS + 2))
  while pgrep -f "$pattern" >/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "processes outlived their job: $(pgrep -af "$pattern" | cut -c1-200)"
    sleep 0.1
  done
}

run_tests() {
  local passed=0 failed=0 number=0 name
  local -a names
  mapfile -t names < <(declare -F | awk '{print $3}' | grep '^test_' | sort)
  # A suite whose tests mostly exercise host-side logic that is the same for
  # every uid (argument and config parsing, an executor's event handling)
  # names in AS_USER_TESTS the ones that reach what differs as a user (the
  # sandbox's namespaces, ownership, the key's path): as-user.sh runs only
  # those. Every other suite, and every security suite, runs whole as both.
  if [ "${MULLET_AS_USER_RUN:-0}" = 1 ] && [ "${#AS_USER_TESTS[@]}" -gt 0 ] && [ -z "${ONLY:-}" ]; then
    for name in "${AS_USER_TESTS[@]}"; do
      if ! declare -F "$name" >/dev/null; then
        echo "Bail out! AS_USER_TESTS names $name, which this suite does not define"
        echo "0 passed, 1 failed"
        return 1
      fi
    done
    echo "# as the user: ${#AS_USER_TESTS[@]} of ${#names[@]} tests (AS_USER_TESTS); root runs them all"
    names=("${AS_USER_TESTS[@]}")
  fi
  for name in "${names[@]}"; do
    if [ -n "${ONLY:-}" ] && [ "$name" != "$ONLY" ]; then continue; fi
    number=$((number + 1))
    local dir="$TEST_ROOT/$name"
    mkdir -p "$dir"
    local started=$SECONDS
    if (cd "$dir" && set -e && "$name"); then
      echo "ok $number - $name ($((SECONDS - started)) s)"
      passed=$((passed + 1))
    else
      echo "not ok $number - $name ($((SECONDS - started)) s; scratch kept in $dir)"
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

# ---------------------------------------------------------------------------
# Helpers for the end-to-end suites (tests/e2e/test_*.sh).

assert_exists() {
  [ -e "$1" ] || [ -L "$1" ] || fail "$1 does not exist but must"
}

# assert_matches TEXT REGEX [WHAT]: TEXT matches the extended regex.
assert_matches() {
  [[ "$1" =~ $2 ]] || fail "${3:-text} does not match /$2/: $1"
}

# json_get JSON FILTER: a jq filter over JSON; strings print raw, null as
# null, everything else as compact JSON (e.g. json_get "$OUT" '.phases[0].name').
json_get() {
  printf '%s' "$1" | jq -r "$2"' | if type == "string" then . else tojson end'
}

# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds; fails the
# test when it never does.
wait_until() {
  local limit="$1"
  shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${limit}s waiting for: $*"
    sleep 0.1
  done
}

# job_dir ID: the job's scratch directory in the current repository.
job_dir() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  echo "$common/mullet/jobs/$1"
}

# job_work DIR: where the host finds what the worker of the job whose
# directory is DIR wrote: the overlay's upper dir when its work tree is an
# overlay of the base's pristine checkout (the job claimed one), else its own
# checkout. The host never sees an overlay's merged view.
job_work() {
  if [ -e "$1/fuse-layers" ]; then
    echo "$1/fuse-layers/upper"
  elif [ -e "$1/pristine" ]; then
    echo "$1/upper"
  else
    echo "$1/work"
  fi
}

# job_live_dir DIR WHERE: where the running phase of the job in DIR has its
# WHERE (upper or home) while it writes to a disk image: as root, with the
# kernel holding disk_mb, the phase writes to an ext4 image that only the
# staging namespace has mounted on DIR/disk (drained to DIR/upper and
# DIR/home when the phase ends), which the host reaches through a bwrap's
# /proc/PID/root (the outer bwrap stays in that namespace). Fails when no
# bwrap has it mounted.
job_live_dir() {
  local pid host_device
  host_device="$(stat -c %d "$1" 2>/dev/null)" || return 1
  for pid in $(pgrep -x bwrap 2>/dev/null); do
    if [ "$(stat -c %d "/proc/$pid/root$1/disk" 2>/dev/null)" != "$host_device" ] &&
      [ -d "/proc/$pid/root$1/disk/$2" ]; then
      echo "/proc/$pid/root$1/disk/$2"
      return 0
    fi
  done
  return 1
}

# job_live DIR WHERE NAME: the running phase of the job in DIR has written
# NAME below WHERE of its disk image (job_live_dir).
job_live() {
  local live
  live="$(job_live_dir "$1" "$2")" && [ -e "$live/$3" ]
}

# job_upper DIR: where the host sees what the job in DIR has written to its
# work tree now: the running phase's disk image (job_live_dir), else
# job_work.
job_upper() {
  job_live_dir "$1" upper || job_work "$1"
}

# job_home DIR: where the job in DIR has its home now: the running phase's
# disk image (job_live_dir), else DIR/home.
job_home() {
  job_live_dir "$1" home || echo "$1/home"
}

# job_has DIR NAME: the worker of the job in DIR has written NAME (for
# wait_until, before the job may have chosen its work tree).
job_has() {
  [ -e "$1/upper/$2" ] || [ -e "$1/work/$2" ] || [ -e "$1/fuse-layers/upper/$2" ] || job_live "$1" upper "$2"
}

# job_home_has DIR NAME: likewise for the job's home.
job_home_has() {
  [ -e "$1/home/$2" ] || job_live "$1" home "$2"
}

# rewrite_record JOB JQ SED: replaces the current repository's record of JOB
# by a commit whose job.json is the old one through the jq filter JQ, and
# whose message (the summary line is its last) is the old one through the
# sed expression SED: a record as one copied or fetched from elsewhere may
# say.
rewrite_record() {
  local ref="refs/mullet/jobs/$1" commit blob tree message parent parents=()
  commit="$(git rev-parse "$ref")"
  blob="$(git cat-file blob "$commit:job.json" | jq -c "$2" | git hash-object -w --stdin)"
  tree="$(git ls-tree "$commit" | awk -v blob="$blob" -F '\t' \
    '$2 == "job.json" { split($1, f, " "); print f[1] " " f[2] " " blob "\t" $2; next } { print }' | git mktree)"
  message="$(git log -1 --format=%B "$commit" | sed "$3")"
  for parent in $(git rev-list --parents -n 1 "$commit" | cut -d' ' -f2-); do parents+=(-p "$parent"); done
  git update-ref "$ref" "$(git commit-tree "$tree" "${parents[@]}" -m "$message")" "$commit" ||
    fail "the rewritten record did not replace $1's"
}

# mullet_traces: everything git-mullet keeps in the current repository (refs
# under refs/mullet, the discard log, scratch directories), for "nothing was
# changed" comparisons.
mullet_traces() {
  local common
  common="$(git rev-parse --git-common-dir)"
  git for-each-ref --format='%(refname) %(objectname)' refs/mullet
  git reflog show --format='%H %gs' refs/mullet/discarded 2>/dev/null || true
  if [ -d "$common/mullet" ]; then (cd "$common/mullet" && find . | LC_ALL=C sort); fi
}

# user_state: what the user sees of the current repository, refs/mullet
# excluded: HEAD, refs, index, work tree (with modes, link targets, bytes),
# status, stash, config and hooks.
user_state() {
  local common
  common="$(git rev-parse --git-common-dir)"
  echo "HEAD: $(git symbolic-ref -q HEAD || echo detached) $(git rev-parse -q --verify HEAD || echo unborn)"
  git for-each-ref --format='%(refname) %(objectname)' | grep -v '^refs/mullet/' || true
  echo "index:"
  git ls-files --stage
  echo "status:"
  git status --porcelain=v1 --untracked-files=all --ignored
  echo "stash:"
  git stash list --format='%H %gs'
  echo "work tree:"
  local top
  top="$(git rev-parse --show-toplevel)"
  (cd "$top" && find . -path ./.git -prune -o -printf '%p %y %m %l\n' | LC_ALL=C sort)
  (cd "$top" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
  echo "config and hooks:"
  sha256sum "$common/config" "$common/HEAD"
  (cd "$common" && find hooks info -printf '%p %y %m\n' 2>/dev/null | LC_ALL=C sort)
}

# everything: the user's repository and git-mullet's records, for before/after.
everything() {
  user_state
  echo "mullet:"
  mullet_traces
}

# refused_cleanly CODE COMMAND...: exits CODE and changes nothing (no job ref,
# no scratch directory, nothing in the user's repository).
refused_cleanly() {
  local code="$1"
  shift
  local before
  before="$(everything)"
  expect_exit "$code" "$@"
  assert_eq "$(everything)" "$before" "state after '$*'"
}

# assert_clear_error: $ERR is one "git mullet: ..." line (optionally followed
# by one "hint: ..." line), not a usage dump, not an internal error.
assert_clear_error() {
  local first lines
  first="$(printf '%s\n' "$ERR" | head -n 1)"
  lines="$(printf '%s\n' "$ERR" | wc -l)"
  case "$first" in
    "git mullet: "*) ;;
    *) fail "stderr does not start with 'git mullet: ': $ERR" ;;
  esac
  assert_not_contains "$ERR" "internal error" "stderr"
  if [ "$lines" -gt 2 ]; then fail "stderr has $lines lines, expected one (and a hint): $ERR"; fi
  if [ "$lines" -eq 2 ]; then
    case "$(printf '%s\n' "$ERR" | sed -n 2p)" in
      "hint: "*) ;;
      *) fail "the second stderr line is not a hint: $ERR" ;;
    esac
  fi
}

# blob_sha256 REV:PATH: sha256 of a blob's exact bytes.
blob_sha256() {
  git cat-file blob "$1" | sha256sum | cut -d' ' -f1
}

file_sha256() {
  sha256sum <"$1" | cut -d' ' -f1
}

# jobs_until_shared_first_char: runs no-change jobs in the current repository
# until two job ids share their first hex digit (by pigeonhole, at most 17
# jobs); sets SHARED to that digit.
jobs_until_shared_first_char() {
  local i
  for i in $(seq 1 17); do
    git mullet run -q -m "filler $i" --command true >/dev/null || fail "filler job $i failed"
    SHARED="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs | cut -c1 | sort | uniq -d | head -n 1)"
    [ -z "$SHARED" ] || return 0
  done
  fail "17 jobs and no two ids share a first digit"
}
