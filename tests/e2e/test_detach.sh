#!/usr/bin/env bash
# `run --detach` and `wait`: a detached job goes on without the terminal that
# started it; whatever stops it before it exists is reported by the
# foreground process exactly as without --detach; `wait` follows a job to its
# end and exits as the job ended; many detached jobs at once keep apart and
# respect [run] max_parallel; a runner killed outright leaves no sandbox
# behind and reads as interrupted.
source "$(dirname "$0")/../lib/harness.sh"

refs_count() { git for-each-ref refs/mullet/jobs | wc -l; }

# detach ARGS...: `git mullet run --detach ARGS`, which must print one job id
# and nothing else; sets JOB.
detach() {
  expect_exit 0 git mullet run --detach "$@"
  assert_matches "$OUT" '^[0-9a-f]{10}$' "what run --detach printed"
  assert_eq "$ERR" "" "run --detach's stderr"
  JOB="$OUT"
}

job_state() { json_field "$(git mullet show --json "$1")" state; }

# A sleep no other test (or suite) runs, to find the worker's processes by.
marker_sleep() { echo "sleep 60.$$$RANDOM"; }

test_detach_returns_while_the_worker_runs_and_wait_follows_it() {
  new_repo repo
  cd repo
  local before after
  before="$(date +%s%N)"
  detach -m "write f" --command 'echo started; sleep 3; echo hi >f; echo finished'
  after="$(date +%s%N)"
  # Back well before the worker could have ended, with the job on record.
  [ $(((after - before) / 1000000)) -lt 2500 ] || fail "run --detach took $(((after - before) / 1000000)) ms"
  assert_contains "$(git mullet list)" "$JOB  running" "list right after run --detach"
  assert_eq "$(job_state "$JOB")" running "state right after run --detach"

  expect_exit 0 git mullet wait "$JOB"
  assert_matches "$OUT" "^job $JOB succeeded: result [0-9a-f]{12}" "wait's summary"
  assert_contains "$OUT" "git mullet merge $JOB"
  assert_contains "$ERR" started "the worker's output, echoed by wait"
  assert_contains "$ERR" finished "the worker's output, echoed by wait"
  local result
  result="$(json_field "$(git mullet show --json "$JOB")" result)"
  assert_eq "$(git cat-file blob "$result:f")" hi "f in the result"

  # A finished job: wait returns at once, with the same outcome.
  expect_exit 0 timeout 5 git mullet wait -q "$JOB"
  assert_matches "$OUT" "^job $JOB succeeded: result [0-9a-f]{12}" "wait -q on a finished job"
  assert_not_contains "$ERR" started "wait -q's stderr"
  expect_exit 0 timeout 5 git mullet wait --json "${JOB:0:6}"
  assert_eq "$(json_field "$OUT" id)" "$JOB" "wait --json's id"
  assert_eq "$(json_field "$OUT" state)" succeeded "wait --json's state"
  assert_eq "$(json_field "$OUT" result)" "$result" "wait --json's result"

  # --json: the id as JSON.
  expect_exit 0 git mullet run --detach --json -m "quick" --command 'echo x >x'
  local id
  id="$(json_field "$OUT" id)"
  assert_matches "$id" '^[0-9a-f]{10}$' "run --detach --json's id"
  expect_exit 0 git mullet wait -q "$id"
}

test_wait_prints_output_and_events_as_they_appear() {
  new_repo repo
  cd repo
  detach -m "wait for go" --command 'echo started; while [ ! -e go ]; do sleep 0.1; done; echo after-go'
  local dir
  dir="$(job_dir "$JOB")"
  git mullet wait "$JOB" >../wait.out 2>../wait.err &
  local waiter=$!
  # The plain output, while the job runs.
  wait_until 20 grep -q started ../wait.err
  # An event stream (the test writes it as a runner of Claude Code would), its
  # first line in two pieces: rendered once, whole, while the job runs.
  local line='{"type":"assistant","message":{"content":[{"type":"text","text":"hello from the model"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make test"}}]}}'
  printf '%s' "${line:0:50}" >>"$dir/events.jsonl"
  sleep 0.6
  printf '%s\n' "${line:50}" >>"$dir/events.jsonl"
  wait_until 20 grep -q "hello from the model" ../wait.err
  touch "$dir/work/go"
  local code=0
  wait "$waiter" || code=$?
  assert_eq "$code" 0 "wait's exit code (stderr: $(cat ../wait.err))"
  assert_eq "$(grep -c "hello from the model" ../wait.err)" 1 "the event's text, rendered"
  assert_contains "$(cat ../wait.err)" "make test" "the tool use, rendered"
  assert_contains "$(cat ../wait.err)" after-go
  assert_matches "$(cat ../wait.out)" "^job $JOB succeeded" "wait's summary"
}

test_a_task_on_stdin_reaches_a_detached_job() {
  new_repo repo
  cd repo
  expect_exit 0 sh -c 'printf "task from stdin\nline 2\n" | git mullet run --detach -F - --command "cat >stdin.txt"'
  local id="$OUT"
  expect_exit 0 git mullet wait -q "$id"
  assert_eq "$(git cat-file blob "$(json_field "$(git mullet show --json "$id")" result):stdin.txt")" \
    "$(printf 'task from stdin\nline 2')" "the task on the worker's stdin"
}

test_wait_exits_as_the_job_ended() {
  new_repo repo
  cd repo
  detach -m "fail" --command 'echo partial >partial.txt; echo giving up >&2; exit 5'
  expect_exit 1 git mullet wait "$JOB"
  assert_matches "$OUT" "^job $JOB failed: result [0-9a-f]{12}" "wait's summary of a failed job"
  assert_contains "$ERR" "git mullet: job $JOB failed: " "wait's error line"
  assert_contains "$ERR" "giving up" "the worker's output"
  detach -m "nothing" --command true
  expect_exit 0 git mullet wait "$JOB"
  assert_eq "$OUT" "job $JOB no_changes" "wait's summary of a job without changes"
  expect_exit 2 git mullet wait ffffffffff
  assert_clear_error
  expect_exit 2 git mullet wait --timeout -1 "$JOB"
}

test_usage_errors_are_reported_by_the_foreground_process() {
  new_repo repo
  cd repo
  local before plain
  before="$(mullet_traces)"
  expect_exit 2 git mullet run --command true
  plain="$ERR"
  expect_exit 2 git mullet run --detach --command true
  assert_eq "$ERR" "$plain" "the error with --detach"
  assert_eq "$OUT" "" "stdout"
  assert_clear_error
  # A bad user config is found by the detached child: the same again.
  printf '[run]\nno_such_key = 1\n' >../bad.toml
  expect_exit 2 env GIT_MULLET_CONFIG="$PWD/../bad.toml" git mullet run -m x --command true
  plain="$ERR"
  expect_exit 2 env GIT_MULLET_CONFIG="$PWD/../bad.toml" git mullet run --detach -m x --command true
  assert_eq "$ERR" "$plain" "the config error with --detach"
  assert_contains "$ERR" no_such_key
  expect_exit 2 git mullet run --detach --dry-run -m x --command true
  assert_clear_error
  expect_exit 2 git mullet run --detach -m x --command true --no-such-option
  assert_eq "$(mullet_traces)" "$before" "jobs and scratch after the usage errors"
}

test_refusals_are_reported_by_the_foreground_process() {
  new_repo repo
  # A PATH without bwrap (git-mullet needs nothing else on it before it
  # looks for bwrap).
  mkdir nobwrap
  ln -s "$(command -v git)" nobwrap/git
  ln -s "$MULLET_BIN" nobwrap/git-mullet
  cd repo
  local plain
  expect_exit 3 env PATH="$PWD/../nobwrap" git mullet run -m "task" --command 'echo ran >ran'
  plain="$ERR"
  expect_exit 3 env PATH="$PWD/../nobwrap" git mullet run --detach -m "task" --command 'echo ran >ran'
  assert_eq "$ERR" "$plain" "the refusal with --detach"
  assert_contains "$ERR" bubblewrap
  assert_eq "$OUT" "" "stdout"
  assert_eq "$(refs_count)" 0 "jobs created"
  # A repository file that widens a wall: refused, by the child, the same way.
  printf '[run]\ncommand = "echo widened"\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "widen"
  expect_exit 3 git mullet run -m "task" --command 'echo ran >ran'
  plain="$ERR"
  expect_exit 3 git mullet run --detach -m "task" --command 'echo ran >ran'
  assert_eq "$ERR" "$plain" "the policy refusal with --detach"
  assert_eq "$(refs_count)" 0 "jobs created"
}

test_ten_detached_jobs_at_once() {
  new_repo repo
  cd repo
  local i pids=()
  # Started together, so their records are created at the same time too.
  for i in $(seq 1 10); do
    git mullet run --detach -m "job $i" --command "sleep 1; echo $i >file-$i.txt" >"../id-$i" 2>"../err-$i" &
    pids+=($!)
  done
  for i in $(seq 1 10); do
    wait "${pids[$((i - 1))]}" || fail "run --detach $i failed: $(cat "../err-$i")"
    assert_matches "$(cat "../id-$i")" '^[0-9a-f]{10}$' "id of job $i"
  done
  for i in $(seq 1 10); do
    local id result
    id="$(cat "../id-$i")"
    expect_exit 0 git mullet wait -q "$id"
    assert_matches "$OUT" "^job $id succeeded" "job $i"
    result="$(json_field "$(git mullet show --json "$id")" result)"
    assert_eq "$(git ls-tree --name-only "$result" | grep '^file-')" "file-$i.txt" "job $i's files"
    assert_eq "$(git cat-file blob "$result:file-$i.txt")" "$i" "job $i's file"
  done
  assert_eq "$(git mullet list | awk '{print $1}' | sort -u | wc -l)" 10 "distinct jobs listed"
  assert_eq "$(git mullet list | awk '{print $2}' | sort -u)" succeeded "states listed"
  assert_eq "$(cat ../id-* | sort -u | wc -l)" 10 "distinct ids printed"
}

test_max_parallel_holds_for_detached_jobs() {
  new_repo repo
  cd repo
  printf '[run]\nmax_parallel = 2\n' >../config.toml
  export GIT_MULLET_CONFIG="$PWD/../config.toml"
  # Each worker notes when it started and ended, in its own clone (the host
  # clock: the sandbox has no time namespace); its result keeps both.
  local i ids=()
  for i in $(seq 1 10); do
    detach -m "job $i" --command "date +%s.%N >start; sleep 1; echo $i >file; date +%s.%N >end"
    ids+=("$JOB")
  done
  local id result events=""
  for id in "${ids[@]}"; do
    expect_exit 0 git mullet wait -q "$id"
    result="$(json_field "$(git mullet show --json "$id")" result)"
    events+="$(git cat-file blob "$result:start") 1"$'\n'"$(git cat-file blob "$result:end") -1"$'\n'
  done
  # The most workers ever running at once: a sweep over the starts and ends
  # (an end before a start at the same instant).
  local most
  most="$(printf '%s' "$events" | sort -k1,1g -k2,2n | awk '{n += $2; if (n > m) m = n} END {print m}')"
  [ "$most" -le 2 ] || fail "$most workers ran at once with max_parallel = 2"
  [ "$most" -ge 1 ] || fail "no worker timestamps"
}

# start_long_job: a new repository with a detached job whose worker has
# started and sleeps; SLEEPER is its sleep command, RUNNER its runner's pid.
start_long_job() {
  new_repo repo
  cd repo
  SLEEPER="$(marker_sleep)"
  detach -m "long" --command "echo started; $SLEEPER"
  wait_until 20 sh -c "git mullet log $JOB | grep -q started"
  RUNNER="$(json_get "$(git mullet show --json "$JOB")" '.runner.pid')"
}

test_a_detached_job_survives_a_hangup_and_is_cancelled_by_sigterm() {
  start_long_job
  local sleeper="$SLEEPER" runner="$RUNNER"
  # A session of its own: no terminal whose hangup or Ctrl-C reaches it.
  assert_eq "$(ps -o sid= -p "$runner" | tr -d ' ')" "$runner" "the runner's session"
  kill -HUP "$runner"
  sleep 0.5
  assert_eq "$(job_state "$JOB")" running "state after SIGHUP"
  kill -TERM "$runner"
  expect_exit 1 timeout 30 git mullet wait -q "$JOB"
  assert_eq "$OUT" "job $JOB cancelled" "wait's summary after SIGTERM"
  wait_until 10 sh -c "! pgrep -f '[${sleeper:0:1}]${sleeper:1}'"
}

test_a_killed_runner_leaves_no_sandbox_and_reads_interrupted() {
  start_long_job
  local pattern="[${SLEEPER:0:1}]${SLEEPER:1}" runner="$RUNNER"
  pgrep -f "$pattern" >/dev/null || fail "the worker's sleep is not running (the check below would prove nothing)"
  kill -KILL "$runner"
  wait_until 10 sh -c "! pgrep -f '$pattern'"
  expect_exit 1 timeout 10 git mullet wait "$JOB"
  assert_eq "$OUT" "job $JOB interrupted" "wait's summary"
  assert_contains "$ERR" "interrupted" "wait's error"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" interrupted "state shown"
}

test_wait_timeout_leaves_the_job_running() {
  new_repo repo
  cd repo
  detach -m "long" --command 'echo started; sleep 30'
  wait_until 20 sh -c "git mullet log $JOB | grep -q started"
  expect_exit 1 timeout 10 git mullet wait --timeout 1 "$JOB"
  assert_contains "$ERR" started "the output so far"
  assert_contains "$ERR" "git mullet: job $JOB is still running"
  expect_exit 1 timeout 10 git mullet wait -q --timeout 0.5 "$JOB"
  assert_contains "$ERR" "job $JOB is still running"
  assert_clear_error
  assert_eq "$(job_state "$JOB")" running "state after wait --timeout"
  expect_exit 0 git mullet discard --force "$JOB"
}

run_tests
