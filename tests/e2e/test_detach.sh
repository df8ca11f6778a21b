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
# and nothing else; sets JOB. Bounded: a --detach that waited for its job
# would otherwise hang the test.
detach() {
  expect_exit 0 timeout -k 5 60 git mullet run --detach "$@"
  assert_matches "$OUT" '^[0-9a-f]{10}$' "what run --detach printed"
  assert_eq "$ERR" "" "run --detach's stderr"
  JOB="$OUT"
}

job_state() { json_field "$(git mullet show --json "$1")" state; }

# A sleep no other test (or suite) runs, to find the worker's processes by.
marker_sleep() { echo "sleep 60.$$$RANDOM"; }

# A worker's wait for the test's go-ahead: a file in its home (outside the
# result), which `release` creates.
WAIT_FOR_GO='while [ ! -e "$HOME/go" ]; do sleep 0.1; done'

# discard_jobs_on_exit: when the test ends (failed half-way, say), the jobs
# of the current repository are stopped and discarded, so that none is left
# waiting for a go-ahead that never comes.
discard_jobs_on_exit() {
  trap 'for id in $(git for-each-ref --format="%(refname:lstrip=3)" refs/mullet/jobs 2>/dev/null); do
    git mullet discard --force "$id" >/dev/null 2>&1 || true; done' EXIT
}

# started ID: the job's worker has said "started".
started() {
  grep -q started "$(job_dir "$1")/worker.log" 2>/dev/null
}

# release ID: lets the job's worker (waiting in WAIT_FOR_GO) go on, once it
# has started.
release() {
  wait_until 60 started "$1"
  touch "$(job_home "$(job_dir "$1")")/go"
}

test_detach_returns_while_the_worker_runs_and_wait_follows_it() {
  new_repo repo
  cd repo
  discard_jobs_on_exit
  # The worker cannot end before the test lets it: run --detach must be
  # back while it runs, with the job on record.
  detach -m "write f" --command "echo started; $WAIT_FOR_GO; echo hi >f; echo finished"
  assert_contains "$(git mullet list)" "$JOB  running" "list right after run --detach"
  assert_eq "$(job_state "$JOB")" running "state right after run --detach"

  release "$JOB"
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

# wait_has_read FILE: a `git mullet wait` has FILE open and has read it to
# its end (its offset, in /proc/PID/fdinfo, is the file's size).
wait_has_read() {
  local size pid fd
  size="$(stat -c %s "$1")"
  for pid in $(pgrep -f '[g]it-mullet wait'); do
    for fd in "/proc/$pid/fd/"*; do
      [ "$(readlink "$fd")" = "$1" ] || continue
      [ "$(sed -n 's/^pos:[[:space:]]*//p' "/proc/$pid/fdinfo/${fd##*/}")" = "$size" ] && return 0
    done
  done
  return 1
}

test_wait_prints_output_and_events_as_they_appear() {
  new_repo repo
  cd repo
  discard_jobs_on_exit
  detach -m "wait for go" --command 'echo started; while [ ! -e "$HOME/go" ]; do sleep 0.1; done; echo after-go; echo after-go >after-go.txt'
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
  # The rest is written once wait has read the first piece.
  wait_until 20 wait_has_read "$dir/events.jsonl"
  printf '%s\n' "${line:50}" >>"$dir/events.jsonl"
  wait_until 20 grep -q "hello from the model" ../wait.err
  touch "$(job_home "$dir")/go"
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
  # A failure is reported once, in the closing lines, on stderr.
  assert_eq "$OUT" "" "wait's stdout for a failed job"
  assert_matches "$ERR" "(^|"$'\n'")job $JOB failed: result [0-9a-f]{12}"$'\n'"  error:   " "wait's summary of a failed job"
  assert_eq "$(grep -c "job $JOB failed" <<<"$ERR")" 1 "lines that say the job failed"
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
  discard_jobs_on_exit
  local i pids=()
  # Started together, so their records are created at the same time too; and
  # all running at once: each worker waits until all ten have started.
  for i in $(seq 1 10); do
    timeout -k 5 60 git mullet run --detach -m "job $i" --command "echo started; $WAIT_FOR_GO; echo $i >file-$i.txt" \
      >"../id-$i" 2>"../err-$i" &
    pids+=($!)
  done
  for i in $(seq 1 10); do
    wait "${pids[$((i - 1))]}" || fail "run --detach $i failed: $(cat "../err-$i")"
    assert_matches "$(cat "../id-$i")" '^[0-9a-f]{10}$' "id of job $i"
  done
  for i in $(seq 1 10); do wait_until 120 started "$(cat "../id-$i")"; done
  for i in $(seq 1 10); do release "$(cat "../id-$i")"; done
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

# started_among ID...: those of the jobs whose worker has said "started".
started_among() {
  local id
  for id in "$@"; do
    if started "$id"; then echo "$id"; fi
  done
}

# at_least_started COUNT ID...: at least COUNT of the jobs have started.
at_least_started() {
  local count="$1"
  shift
  [ "$(started_among "$@" | wc -l)" -ge "$count" ]
}

test_max_parallel_holds_for_detached_jobs() {
  new_repo repo
  cd repo
  discard_jobs_on_exit
  printf '[run]\nmax_parallel = 2\n' >../config.toml
  export GIT_MULLET_CONFIG="$PWD/../config.toml"
  # Each worker says it started, then waits for the test: the test sees
  # which ones run, and lets them end one at a time.
  local i waiting=()
  for i in $(seq 1 10); do
    detach -m "job $i" --command "echo started; $WAIT_FOR_GO; echo $i >file"
    waiting+=("$JOB")
  done
  local running=() rest=() id
  while [ "${#waiting[@]}" -gt 0 ]; do
    # As many as the cap lets run get there (or all that are left) ...
    wait_until 60 at_least_started "$((${#waiting[@]} < 2 ? ${#waiting[@]} : 2))" "${waiting[@]}"
    # ... and no more: the one let go last has ended, every other worker is
    # still waiting for the test.
    mapfile -t running < <(started_among "${waiting[@]}")
    [ "${#running[@]}" -le 2 ] || fail "${#running[@]} workers ran at once with max_parallel = 2"
    release "${running[0]}"
    expect_exit 0 timeout 60 git mullet wait -q "${running[0]}"
    assert_matches "$OUT" "^job ${running[0]} succeeded" "a job let go"
    rest=()
    for id in "${waiting[@]}"; do [ "$id" = "${running[0]}" ] || rest+=("$id"); done
    waiting=("${rest[@]}")
  done
}

# start_long_job [STEPS]: a new repository with a detached job whose worker
# has started and sleeps (after STEPS, shell commands ending in ';');
# SLEEPER is its sleep command, RUNNER its runner's pid.
start_long_job() {
  new_repo repo
  cd repo
  SLEEPER="$(marker_sleep)"
  discard_jobs_on_exit
  detach -m "long" --command "echo started; ${1:-}$SLEEPER"
  wait_until 20 sh -c "git mullet log $JOB | grep -q started"
  RUNNER="$(json_get "$(git mullet show --json "$JOB")" '.runner.pid')"
}

# hangup_taken PID: no SIGHUP is pending for PID any more (it was delivered,
# or PID is gone).
hangup_taken() {
  local mask
  [ -r "/proc/$1/status" ] || return 0
  for mask in $(awk '/^(SigPnd|ShdPnd):/ {print $2}' "/proc/$1/status"); do
    [ $((16#$mask & 1)) -eq 0 ] || return 1
  done
}

test_a_detached_job_survives_a_hangup_and_is_cancelled_by_sigterm() {
  start_long_job "$WAIT_FOR_GO; echo after-hangup; "
  local sleeper="$SLEEPER" runner="$RUNNER"
  # A session of its own: no terminal whose hangup or Ctrl-C reaches it.
  assert_eq "$(ps -o sid= -p "$runner" | tr -d ' ')" "$runner" "the runner's session"
  kill -HUP "$runner"
  # Once the runner has taken the signal the worker is let go: its output
  # reaches the log only through a runner, and a sandbox, that lived on.
  wait_until 10 hangup_taken "$runner"
  release "$JOB"
  wait_until 20 sh -c "git mullet log $JOB | grep -q after-hangup"
  assert_eq "$(job_state "$JOB")" running "state after SIGHUP"
  kill -TERM "$runner"
  expect_exit 1 timeout 30 git mullet wait -q "$JOB"
  assert_eq "$(printf '%s\n' "$ERR" | grep "^job " | head -n 1)" "job $JOB cancelled" "wait's summary after SIGTERM"
  assert_contains "$ERR" "go on:   git mullet resume $JOB"
  wait_until 10 sh -c "! pgrep -f '[${sleeper:0:1}]${sleeper:1}'"
}

test_a_killed_runner_leaves_no_sandbox_and_reads_interrupted() {
  start_long_job
  local pattern="[${SLEEPER:0:1}]${SLEEPER:1}" runner="$RUNNER"
  pgrep -f "$pattern" >/dev/null || fail "the worker's sleep is not running (the check below would prove nothing)"
  kill -KILL "$runner"
  wait_until 10 sh -c "! pgrep -f '$pattern'"
  expect_exit 1 timeout 10 git mullet wait "$JOB"
  assert_eq "$(printf '%s\n' "$ERR" | grep "^job " | head -n 1)" "job $JOB interrupted" "wait's summary"
  assert_contains "$ERR" "look:    git mullet show $JOB"
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
