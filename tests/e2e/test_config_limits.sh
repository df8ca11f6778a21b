#!/usr/bin/env bash
# No configuration can switch off a limit or crash git-mullet: every key has a
# finite range (NaN and infinities refused), configuration files are regular
# files with a size and nesting cap, and all of it is refused with exit 2,
# naming the file, before any job exists.
source "$(dirname "$0")/../lib/harness.sh"
# As a user, the tests where the uid or a running sandbox matters; the rest
# is config parsing on the host, the same for every uid (root runs all).
AS_USER_TESTS=(
  test_a_repository_file_cannot_lift_a_limit
  test_gate_limits
  test_uid_out_of_range_creates_no_job
  test_user_config_must_be_a_small_regular_file
)

# Every key the repository's .mullet.toml may lower, with its largest value.
LIMITS=(
  limits.timeout=2592000 limits.job_timeout=2592000 limits.gate_timeout=2592000 limits.turns=1000000
  limits.inactivity=2592000 limits.memory_mb=1048576 limits.processes=1048576 limits.disk_mb=1048576
  limits.file_mb=1048576 run.attempts=100
)
MAX_INT64=9223372036854775807

commit_file() {
  printf '%s' "$2" >"$1"
  git add "$1"
  git commit -qm "add $1"
}

# toml_for KEY VALUE: a document setting one key, on line 2.
toml_for() {
  printf '[%s]\n%s = %s\n' "${1%%.*}" "${1#*.}" "$2"
}

# refused_config FILE_LABEL KEY COMMAND...: exit 2, no job, and one line
# naming the file, the line (2) and the key.
refused_config() {
  local label="$1" key="$2"
  shift 2
  refused_cleanly 2 "$@"
  assert_contains "$ERR" "git mullet: invalid configuration:"
  assert_contains "$ERR" "$label:2: $key: "
  assert_not_contains "$ERR" "internal error"
}

# deep_toml FORM N: a document nested N levels deep.
deep_toml() {
  local parts
  parts="$(printf 'a.%.0s' $(seq 2 "$2"))a"
  case "$1" in
    header) printf '[%s]\nx = 1\n' "$parts" ;;
    dotted) printf '%s = 1\n' "$parts" ;;
    inline) printf 'x = %s1%s\n' "$(printf '{a=%.0s' $(seq 1 "$2"))" "$(printf '}%.0s' $(seq 1 "$2"))" ;;
    array) printf 'x = %s1%s\n' "$(printf '[%.0s' $(seq 1 "$2"))" "$(printf ']%.0s' $(seq 1 "$2"))" ;;
  esac
}

test_a_repository_file_cannot_lift_a_limit() {
  new_repo repo
  cd repo
  local entry key max value short
  for entry in "${LIMITS[@]}"; do
    key="${entry%=*}"
    max="${entry#*=}"
    for value in nan inf "$MAX_INT64" "$((max + 1))" 0; do
      commit_file .mullet.toml "$(toml_for "$key" "$value")"
      short="$(git rev-parse --short=12 HEAD)"
      refused_config ".mullet.toml@$short" "$key" git mullet run -m task --command 'touch ran'
    done
  done
  # The cost cap: NaN compared false with "greater than yours" and removed it.
  for value in nan -nan inf -inf 1e308 1000000.5 0 -0.0 -1; do
    commit_file .mullet.toml "$(toml_for limits.cost_usd "$value")"
    short="$(git rev-parse --short=12 HEAD)"
    refused_config ".mullet.toml@$short" limits.cost_usd git mullet run -m task --command 'touch ran'
    assert_contains "$ERR" "must be a finite number more than 0 and at most 1000000"
  done
  assert_absent .git/mullet
  # The control: a lower, finite value is taken.
  commit_file .mullet.toml $'[limits]\ncost_usd = 0.5\ntimeout = 7\n'
  expect_exit 0 git mullet config
  assert_contains "$OUT" "cost_usd = 0.5  # .mullet.toml@"
  assert_contains "$OUT" "timeout = 7  # .mullet.toml@"
}

test_a_user_file_cannot_overflow_a_limit() {
  new_repo repo
  cd repo
  local entry key max value
  for entry in "${LIMITS[@]}" run.max_parallel=1024 sandbox.uid=4294967294; do
    key="${entry%=*}"
    max="${entry#*=}"
    for value in "$MAX_INT64" "$((max + 1))" -1 nan inf; do
      user_config "$(toml_for "$key" "$value")"
      refused_config "$USER_CONFIG" "$key" git mullet run -m task --command 'touch ran'
    done
    # The largest value is allowed.
    user_config "$(toml_for "$key" "$max")"
    expect_exit 0 git mullet config
    assert_contains "$OUT" "${key#*.} = $max  # $USER_CONFIG:2"
  done
  user_config "$(toml_for limits.cost_usd nan)"
  refused_config "$USER_CONFIG" limits.cost_usd git mullet run -m task --command 'touch ran'
  assert_absent .git/mullet
}

test_uid_out_of_range_creates_no_job() {
  new_repo repo
  cd repo
  local uid
  for uid in 4294967295 4294967296 0 -1; do
    user_config "$(toml_for sandbox.uid "$uid")"
    refused_config "$USER_CONFIG" sandbox.uid git mullet run -m task --command 'touch ran'
    assert_contains "$ERR" "from 1 to 4294967294"
  done
  assert_absent .git/mullet
}

test_huge_setup_creates_no_job() {
  new_repo repo
  cd repo
  # 100 KiB: over the 64 KiB cap, under what one argv string may be.
  local setup
  setup="$(head -c 102400 /dev/zero | tr '\0' ':')"
  refused_cleanly 2 git mullet run -m task --command 'touch ran' --setup "$setup"
  assert_contains "$ERR" "--setup: is 102400 bytes long; at most 65536 are allowed"
  refused_cleanly 2 git mullet run -m task --command 'touch ran' --gate "$setup"
  assert_contains "$ERR" "--gate: the command is 102400 bytes long"
  user_config "$(toml_for run.setup "\"$setup\"")"
  refused_config "$USER_CONFIG" run.setup git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "run.setup: is 102400 bytes long; at most 65536 are allowed"
  unset GIT_MULLET_CONFIG
  commit_file .mullet.toml "$(toml_for run.setup "\"$setup\"")"
  refused_config ".mullet.toml@$(git rev-parse --short=12 HEAD)" run.setup git mullet run -m task --command 'touch ran'
  git rm -q .mullet.toml
  git commit -qm "no repository config"
  # 10 MB: the file itself is over its cap, and is not read whole.
  user_config "[run]"
  {
    printf 'setup = "'
    head -c 10485760 /dev/zero | tr '\0' ':'
    printf '"\n'
  } >>"$USER_CONFIG"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "$USER_CONFIG is"
  assert_contains "$ERR" "at most 1048576"
  assert_clear_error
  assert_absent .git/mullet
  # The control: a setup under the cap runs.
  user_config "$(toml_for run.setup '"echo set >set.txt"')"
  run_job -m task --command true
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
}

test_gate_limits() {
  new_repo repo
  cd repo
  local value short
  for value in "$MAX_INT64" 2592001 0 -1 nan inf; do
    commit_file .mullet.toml $'[[gate]]\ncommand = "true"\ntimeout = '"$value"$'\n'
    short="$(git rev-parse --short=12 HEAD)"
    refused_cleanly 2 git mullet run -m task --command 'touch ran'
    assert_contains "$ERR" ".mullet.toml@$short:3: gate.timeout: must be"
  done
  commit_file .mullet.toml "$(for i in $(seq 1 257); do printf '[[gate]]\ncommand = "true"\n'; done)"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "at most 256 gates"
  commit_file .mullet.toml $'[[gate]]\ncommand = "true"\ntimeout = 2592000\n'
  expect_exit 0 git mullet config
  assert_contains "$OUT" "timeout = 2592000"
  for value in 101 0 "$MAX_INT64"; do
    refused_cleanly 2 git mullet run -m task --command 'touch ran' --attempts "$value"
    assert_contains "$ERR" "--attempts: must be from 1 to 100"
  done
}

# A worker writes a .mullet.toml 100,000 tables deep; once its result is
# merged, every later job from that base used to crash git-mullet (SIGSEGV).
test_deep_nesting_from_a_merged_result() {
  new_repo repo
  cd repo
  run_job -m "write a config" --command \
    'awk "BEGIN { printf \"[\"; for (i = 1; i < 100000; i++) printf \"a.\"; print \"a]\"; print \"x = 1\" }" >.mullet.toml'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  expect_exit 0 git mullet merge "$JOB"
  git merge -q --ff-only "mullet/$JOB"
  local short
  short="$(git rev-parse --short=12 HEAD)"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml@$short:1: nested more than 16 levels deep"
  refused_cleanly 2 git mullet config
  assert_contains "$ERR" "nested more than 16 levels deep"
}

test_deep_nesting_in_any_form() {
  new_repo repo
  cd repo
  local form depth short
  for form in header dotted inline array; do
    for depth in 17 100000; do
      deep_toml "$form" "$depth" >../deep.toml
      GIT_MULLET_CONFIG="$PWD/../deep.toml" refused_cleanly 2 git mullet run -m task --command 'touch ran'
      assert_contains "$ERR" "deep.toml:1: nested more than 16 levels deep"
      commit_file .mullet.toml "$(cat ../deep.toml)"
      short="$(git rev-parse --short=12 HEAD)"
      refused_cleanly 2 git mullet run -m task --command 'touch ran'
      assert_contains "$ERR" ".mullet.toml@$short:1: nested more than 16 levels deep"
    done
  done
  assert_absent .git/mullet
}

test_user_config_must_be_a_small_regular_file() {
  new_repo repo
  cd repo
  mkfifo ../fifo
  mkdir ../a-directory
  head -c 2097152 /dev/zero | tr '\0' '#' >../big.toml
  ln -s fifo ../link-to-fifo
  local path
  # Bounded: a FIFO that blocks fails the test instead of hanging it; and a
  # memory cap, so an unbounded read of /dev/zero cannot take the machine's.
  for path in ../fifo ../link-to-fifo /dev/zero /dev/urandom ../a-directory ../big.toml; do
    GIT_MULLET_CONFIG="$path" refused_cleanly 2 bash -c 'ulimit -v 4194304; exec timeout -k 5 20 git mullet run -m task --command "touch ran"'
    assert_contains "$ERR" "$path"
    assert_clear_error
    GIT_MULLET_CONFIG="$path" refused_cleanly 2 bash -c 'ulimit -v 4194304; exec timeout -k 5 20 git mullet config'
  done
  # The default location too.
  mkdir -p "$XDG_CONFIG_HOME/git-mullet"
  mkfifo "$XDG_CONFIG_HOME/git-mullet/config.toml"
  refused_cleanly 2 timeout -k 5 20 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "$XDG_CONFIG_HOME/git-mullet/config.toml is not a regular file"
  rm "$XDG_CONFIG_HOME/git-mullet/config.toml"
  assert_absent .git/mullet
  # The control: a symlink to a regular file (dotfile managers make those) is read.
  printf '[limits]\ntimeout = 9\n' >../real.toml
  ln -s real.toml ../link.toml
  GIT_MULLET_CONFIG="$PWD/../link.toml" expect_exit 0 git mullet config
  assert_contains "$OUT" "timeout = 9  # $PWD/../link.toml:2"
  # And /dev/null says "no user config", as GIT_CONFIG_GLOBAL=/dev/null does.
  GIT_MULLET_CONFIG=/dev/null expect_exit 0 git mullet config
  assert_contains "$OUT" "timeout = 3600  # built-in"
}

test_repository_config_must_be_a_small_regular_blob() {
  new_repo repo
  cd repo
  printf '[limits]\ntimeout = 9\n' >real.toml
  ln -s real.toml .mullet.toml
  git add real.toml .mullet.toml
  git commit -qm "a symlink"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml in commit $(git rev-parse HEAD) is a symbolic link"
  assert_clear_error
  git rm -q .mullet.toml
  mkdir .mullet.toml
  printf '[limits]\ntimeout = 9\n' >.mullet.toml/x
  git add .mullet.toml
  git commit -qm "a directory"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml in commit $(git rev-parse HEAD) is a directory"
  git rm -rq .mullet.toml
  git update-index --add --cacheinfo 160000 "$(git rev-parse HEAD)" .mullet.toml
  git commit -qm "a submodule"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml in commit $(git rev-parse HEAD) is a submodule"
  git rm -q --cached .mullet.toml
  head -c 2097152 /dev/zero | tr '\0' '#' >.mullet.toml
  git add .mullet.toml
  git commit -qm "2 MiB of comments"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml in commit $(git rev-parse HEAD) is 2097152 bytes long; at most 1048576"
  assert_absent .git/mullet
  # The control: a regular file is read.
  printf '[limits]\ntimeout = 9\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "a file"
  expect_exit 0 git mullet config
  assert_contains "$OUT" "timeout = 9  # .mullet.toml@"
}

run_tests
