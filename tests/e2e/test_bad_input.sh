#!/usr/bin/env bash
# Bad input: each mistake gets one clear message on stderr and exit 2 (or 3
# when a repository file tries to widen a wall), and changes nothing: no job
# ref, no scratch directory, no branch, nothing in the user's repository.
source "$(dirname "$0")/../lib/harness.sh"
# As a user, the tests that run a sandbox; the rest is argument and config
# parsing on the host, the same for every uid (root runs all).
AS_USER_TESTS=(
  test_repository_file_may_not_widen_a_wall
)

# config_error FILE LINE KEY: $ERR reports one configuration problem, naming
# the file, the line and the key.
config_error() {
  assert_contains "$ERR" "git mullet: invalid configuration:"
  assert_contains "$ERR" "$1:$2: $3"
  assert_not_contains "$ERR" "internal error"
  assert_eq "$(printf '%s\n' "$ERR" | grep -c "$1:")" 1 "lines naming $1"
}

commit_file() {
  printf '%s' "$2" >"$1"
  git add "$1"
  git commit -qm "add $1"
}

test_not_a_git_repository() {
  mkdir -p outside/sub
  cd outside/sub
  export GIT_CEILING_DIRECTORIES="$TEST_ROOT"
  local before
  before="$(cd .. && find . -printf '%p %y %m\n' | sort)"
  for command in "run -m task --command true" "list" "show abc" "diff abc" "log abc" "merge abc" "discard abc"; do
    # shellcheck disable=SC2086
    expect_exit 2 git mullet $command
    assert_contains "$ERR" "not a git repository"
    assert_clear_error
  done
  assert_eq "$(cd .. && find . -printf '%p %y %m\n' | sort)" "$before" "directory after the refusals"
}

test_unborn_head() {
  git init -q repo
  cd repo
  refused_cleanly 2 git mullet run -m "task" --command 'touch ran'
  assert_contains "$ERR" "no commits yet"
  assert_clear_error
  assert_absent .git/mullet
  expect_exit 0 git mullet list
  assert_eq "$OUT" "" "list in an unborn repository"
  # The control: with a commit to start from, an unborn HEAD is no obstacle.
  git checkout -q -b other
  printf 'x\n' >x
  git add x
  git commit -qm x
  git checkout -q --orphan orphan
  git rm -rq --cached .
  refused_cleanly 2 git mullet run -m "task" --command 'touch ran'
  run_job --base other -m "task" --command 'touch ran'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "run --base from an unborn HEAD"
}

test_unknown_base() {
  new_repo repo
  cd repo
  local blob
  blob="$(git rev-parse HEAD:README)"
  for base in no-such-branch HEAD~5 0123456789abcdef0123456789abcdef01234567 'main@{99}' "$blob" "HEAD:src"; do
    refused_cleanly 2 git mullet run --base "$base" -m "task" --command 'touch ran'
    assert_clear_error
  done
  expect_exit 2 git mullet run --base no-such-branch -m task --command true
  assert_contains "$ERR" "no-such-branch"
  refused_cleanly 2 git mullet config --base no-such-branch
  assert_contains "$ERR" "no-such-branch"
  assert_clear_error
  assert_absent .git/mullet
  # The control: a base that exists runs.
  run_job --base main -m task --command 'touch ran'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
}

test_unknown_and_ambiguous_jobs() {
  new_repo repo
  cd repo
  for command in show diff log merge discard; do
    refused_cleanly 2 git mullet "$command" 0123456789
    assert_contains "$ERR" "no job matches '0123456789'"
    assert_clear_error
  done
  jobs_until_shared_first_char
  for command in show diff log merge discard; do
    refused_cleanly 2 git mullet "$command" "$SHARED"
    assert_contains "$ERR" "ambiguous"
    assert_clear_error
  done
  refused_cleanly 2 git mullet show ''
}

test_no_task_text() {
  new_repo repo
  cd repo
  : >../empty-task
  printf '  \n\t\n' >../blank-task
  refused_cleanly 2 git mullet run --command 'touch ran'
  assert_contains "$ERR" "no task"
  assert_clear_error
  refused_cleanly 2 git mullet run -m '' --command 'touch ran'
  assert_clear_error
  refused_cleanly 2 git mullet run -m "$(printf '  \n\t ')" --command 'touch ran'
  assert_contains "$ERR" "no task"
  refused_cleanly 2 git mullet run -F ../empty-task --command 'touch ran'
  assert_contains "$ERR" "no task"
  refused_cleanly 2 git mullet run -F ../blank-task --command 'touch ran'
  refused_cleanly 2 sh -c 'git mullet run -F - --command "touch ran" </dev/null'
  assert_contains "$ERR" "no task"
  refused_cleanly 2 git mullet run -m task -F ../blank-task --command 'touch ran'
  assert_clear_error
  assert_absent .git/mullet
}

test_unreadable_task_file() {
  new_repo repo
  cd repo
  refused_cleanly 2 git mullet run -F ../no-such-file --command 'touch ran'
  assert_contains "$ERR" "no-such-file"
  assert_clear_error
  mkdir ../a-directory
  refused_cleanly 2 git mullet run -F ../a-directory --command 'touch ran'
  assert_clear_error
  # A task file is read only up to what a record holds (8 MiB): an endless
  # one (/dev/zero) or a larger one is refused, not read into memory.
  refused_cleanly 2 timeout 20 git mullet run -F /dev/zero --command 'touch ran'
  assert_contains "$ERR" "longer than 8 MiB"
  assert_clear_error
  head -c $((8 * 1024 * 1024 + 1)) /dev/zero | tr '\0' x >../big-task
  refused_cleanly 2 git mullet run -F ../big-task --command 'touch ran'
  assert_contains "$ERR" "longer than 8 MiB"
  refused_cleanly 2 sh -c 'git mullet run -F - --command "touch ran" <../big-task'
  assert_contains "$ERR" "longer than 8 MiB"
  if [ "$(id -u)" -ne 0 ]; then
    printf 'secret task\n' >../locked
    chmod 000 ../locked
    refused_cleanly 2 git mullet run -F ../locked --command 'touch ran'
    assert_clear_error
  fi
  assert_absent .git/mullet
}

test_usage_mistakes() {
  new_repo repo
  cd repo
  refused_cleanly 2 git mullet
  refused_cleanly 2 git mullet frobnicate
  refused_cleanly 2 git mullet run --bogus -m task --command true
  refused_cleanly 2 git mullet show
  refused_cleanly 2 git mullet merge
  refused_cleanly 2 git mullet run -m task --executor nonsense --command true
  assert_clear_error
  # No command for the command executor.
  refused_cleanly 2 git mullet run -m task --executor command
  assert_clear_error
  # The command executor runs no model; a model name is no option.
  refused_cleanly 2 git mullet run -m task --command true --model sonnet
  assert_clear_error
  assert_contains "$ERR" "--model: the command executor runs no model"
  refused_cleanly 2 git mullet run -m task --model=--settings=/tmp/evil
  assert_clear_error
  assert_contains "$ERR" "may not start with '-'"
  refused_cleanly 2 git mullet run -m task --executor opencode --model $'a\x1b]0;x\x07b'
  assert_contains "$ERR" "printable ASCII"
  assert_absent .git/mullet
}

test_merge_of_a_discarded_job_and_bad_branch_names() {
  new_repo repo
  cd repo
  run_job -m task --command 'echo a >a'
  local id="$JOB"
  run_job -m task --command 'echo b >b'
  local other="$JOB"
  expect_exit 0 git mullet discard "$id"
  refused_cleanly 2 git mullet merge "$id"
  assert_contains "$ERR" "no job matches"
  assert_clear_error
  refused_cleanly 2 git mullet merge "$other" --branch 'bad..name'
  assert_contains "$ERR" "not a valid branch name"
  assert_clear_error
  refused_cleanly 2 git mullet merge "$other" --branch 'x.lock'
  expect_exit 0 git mullet merge "$other" --branch good-name
}

test_malformed_user_config() {
  new_repo repo
  cd repo
  local config="$XDG_CONFIG_HOME/git-mullet/config.toml"
  mkdir -p "$(dirname "$config")"

  printf '[run]\ncommand = "touch ran"\n[limits\ntimeout = 5\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "$config:3"
  assert_contains "$ERR" "invalid configuration"

  printf '# a comment\n[run]\n\nexecutorr = "command"\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error "$config" 4 run.executorr
  assert_contains "$ERR" "unknown key"

  printf '[limits]\ntimeout = 60\ninactivity = "ten"\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error "$config" 3 limits.inactivity
  assert_contains "$ERR" "integer"

  printf '[sandbox]\nenv = "HOME"\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error "$config" 2 sandbox.env

  printf '[nonsense]\nkey = 1\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" "$config:2: nonsense.key"

  printf '[limits]\ntimeout = -5\n' >"$config"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error "$config" 2 limits.timeout

  # The same through GIT_MULLET_CONFIG, and `git mullet config` reports it too.
  rm "$config"
  printf '[run]\n\n\ncommand = ["a list"]\n' >../explicit.toml
  GIT_MULLET_CONFIG="$PWD/../explicit.toml" refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error "$PWD/../explicit.toml" 4 run.command
  GIT_MULLET_CONFIG="$PWD/../explicit.toml" refused_cleanly 2 git mullet config
  config_error "$PWD/../explicit.toml" 4 run.command
  GIT_MULLET_CONFIG="$PWD/../missing.toml" refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" missing.toml
  assert_clear_error
  assert_absent .git/mullet

  # The control: a valid file is used.
  printf '[run]\nexecutor = "command"\ncommand = "echo from-config >from-config"\n' >"$config"
  run_job -m task
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):from-config")" from-config
}

test_malformed_repository_config_in_the_base() {
  new_repo repo
  cd repo
  commit_file .mullet.toml $'[limits]\n\ntimeout = "soon"\n'
  local short
  short="$(git rev-parse --short=12 HEAD)"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error ".mullet.toml@$short" 3 limits.timeout
  commit_file .mullet.toml $'[limits]\nwall = 5\n'
  short="$(git rev-parse --short=12 HEAD)"
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  config_error ".mullet.toml@$short" 2 limits.wall
  commit_file .mullet.toml $'this is not toml\n'
  refused_cleanly 2 git mullet run -m task --command 'touch ran'
  assert_contains "$ERR" ".mullet.toml@$(git rev-parse --short=12 HEAD):1"
  refused_cleanly 2 git mullet config
  assert_absent .git/mullet

  # The work tree's copy is never read, only the base commit's.
  git rm -q .mullet.toml
  git commit -qm "no repo config"
  printf '[limits]\ntimeout = "broken"\n' >.mullet.toml
  run_job -m task --command 'echo x >x'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "with a broken uncommitted .mullet.toml"
  git add .mullet.toml
  run_job -m task --command 'echo x >x'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "with a broken staged .mullet.toml"
  # And the base named by --base decides, not HEAD.
  git commit -qm "broken again"
  run_job --base HEAD~1 -m task --command 'echo x >x'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "with --base before the broken file"
}

test_repository_file_may_not_widen_a_wall() {
  new_repo repo
  cd repo
  local config="$XDG_CONFIG_HOME/git-mullet/config.toml"
  mkdir -p "$(dirname "$config")"
  printf '[sandbox]\nenv = ["MULLET_T_FOO", "MULLET_T_BAR"]\n[limits]\ntimeout = 600\n' >"$config"
  local widening
  for widening in \
    $'[run]\nexecutor = "command"\n' \
    $'[run]\ncommand = "touch ran"\n' \
    $'[claude]\nbinary = "/tmp/evil"\n' \
    $'[claude]\nbase_url = "http://evil.example"\n' \
    $'[claude]\nmodel = "claude-opus-4-1"\n' \
    $'[opencode]\nmodel = "anthropic/claude-opus-4-1"\n' \
    $'[run]\nmax_attempts = 100\n' \
    $'[sandbox]\nuid = 1000\n' \
    $'[sandbox]\nenv = ["MULLET_T_FOO", "AWS_SECRET_ACCESS_KEY"]\n' \
    $'[network]\nworker = ["evil.example:443"]\n' \
    $'[network]\nsetup = ["*"]\n' \
    $'[claude]\nallow_bash = ["rm -rf *"]\n' \
    $'[limits]\ntimeout = 601\n' \
    $'[limits]\nmemory_mb = 999999\n' \
    $'[limits]\nprocesses = 100000\n' \
    $'[limits]\ninactivity = 100000\n'; do
    commit_file .mullet.toml "$widening"
    refused_cleanly 3 git mullet run -m task --command 'touch ran'
    assert_contains "$ERR" ".mullet.toml@$(git rev-parse --short=12 HEAD):"
    assert_contains "$ERR" "$(printf '%s' "$widening" | sed -n 2p | cut -d' ' -f1)" "stderr for $widening"
  done
  assert_absent .git/mullet

  # Narrowing is accepted, and applied.
  commit_file .mullet.toml $'[sandbox]\nenv = ["MULLET_T_FOO"]\n[limits]\ntimeout = 2\n'
  expect_exit 0 git mullet config
  assert_contains "$OUT" "timeout = 2  # .mullet.toml@$(git rev-parse --short=12 HEAD):4"
  assert_contains "$OUT" "env = [ 'MULLET_T_FOO' ]  # .mullet.toml@$(git rev-parse --short=12 HEAD):2"
  assert_contains "$OUT" "memory_mb = 8192  # built-in"
  commit_file .mullet.toml $'[limits]\ntimeout = 2\n'
  expect_exit 0 git mullet config
  assert_contains "$OUT" "env = [ 'MULLET_T_FOO', 'MULLET_T_BAR' ]  # $config:2"
  commit_file .mullet.toml $'[sandbox]\nenv = ["MULLET_T_FOO"]\n[limits]\ntimeout = 2\n'
  export MULLET_T_FOO=foo MULLET_T_BAR=bar
  run_job -m task --command 'printf "%s|%s" "$MULLET_T_FOO" "$MULLET_T_BAR" >env.txt; sleep 20; echo late >late.txt'
  assert_eq "$(json_field "$JOB_JSON" state)" failed "a job past the repository's timeout"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" timeout
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git cat-file blob "$result:env.txt")" "foo|" "environment let in"
  if git cat-file -e "$result:late.txt" 2>/dev/null; then fail "the worker ran past its timeout"; fi
}

run_tests
