#!/usr/bin/env bash
# Looking after many jobs: `list` orders them to the millisecond, fits a
# terminal and filters; `stop` cancels a running job, detached or not, and
# waits until it has ended with its snapshot; `show` tells where a running
# job is; `discard` takes several jobs, --state and --all, asks first on a
# terminal, refuses without --yes elsewhere, and says what it freed.
source "$(dirname "$0")/../lib/harness.sh"

# detach ARGS...: `git mullet run --detach ARGS`; sets JOB.
detach() {
  expect_exit 0 timeout -k 5 60 git mullet run --detach "$@"
  assert_matches "$OUT" '^[0-9a-f]{10}$' "what run --detach printed"
  JOB="$OUT"
}

# A worker that says it started, then waits for the test (it never gets the
# go-ahead: these jobs are stopped).
WAIT_FOREVER='echo started; while [ ! -e "$HOME/go" ]; do sleep 0.1; done'
started() { grep -q started "$(job_dir "$1")/worker.log" 2>/dev/null; }

# Never leave a waiting job behind when a test fails half-way.
stop_jobs_on_exit() {
  trap 'for id in $(git for-each-ref --format="%(refname:lstrip=3)" refs/mullet/jobs 2>/dev/null); do
    git mullet discard --force "$id" >/dev/null 2>&1 || true; done' EXIT
}

# on_terminal COLUMNS COMMAND: runs the shell COMMAND on a pseudo-terminal
# COLUMNS wide (util-linux script), stdin passed through; sets OUT (what
# reached the terminal, line ends as sent) and CODE.
on_terminal() {
  local columns="$1" command="$2"
  CODE=0
  OUT="$(script -qec "stty cols $columns; $command" /dev/null)" || CODE=$?
  OUT="$(printf '%s' "$OUT" | tr -d '\r')"
}

test_list_orders_jobs_started_within_one_second() {
  new_repo repo
  cd repo
  # No waiting between them: the milliseconds and the sequence order them.
  run_job -m "one" --command 'echo 1 >one'
  local first="$JOB"
  run_job -m "two" --command 'echo 2 >two'
  local second="$JOB"
  run_job -m "three" --command 'echo 3 >three'
  local third="$JOB"
  assert_matches "$(json_field "$JOB_JSON" created_at)" '^[0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z$' "created_at"
  assert_matches "$(json_field "$JOB_JSON" finished_at)" '^[0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z$' "finished_at"
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '[.[].id]')" "[\"$third\",\"$second\",\"$first\"]" "list --json order"
  assert_eq "$(json_get "$OUT" '[.[].sequence]')" "[3,2,1]" "sequences"
  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}')" "$(printf '%s\n%s\n%s' "$third" "$second" "$first")" "list"

  # Same millisecond: the sequence decides. An older record (whole seconds,
  # no sequence) sorts by its time with the rest.
  local tree base
  tree="$(git rev-parse 'HEAD^{tree}')"
  base="$(git rev-parse HEAD)"
  forge() { # ID CREATED [SEQUENCE]
    local json
    json="{\"format\":1,\"id\":\"$1\",\"title\":\"forged $1\",\"state\":\"failed\",\"base\":\"$base\",\"executor\":\"command\",\"created_at\":\"$2\"${3:+,\"sequence\":$3}}"
    local blob record_tree commit
    blob="$(printf '%s' "$json" | git hash-object -w --stdin)"
    record_tree="$(printf '100644 blob %s\tjob.json\n' "$blob" | git mktree)"
    commit="$(printf 'git-mullet job %s: failed\n\n%s\n' "$1" "$json" | git commit-tree "$record_tree" -p "$base")"
    git update-ref "refs/mullet/jobs/$1" "$commit"
  }
  forge aaaaaaaaa1 "2001-01-01T00:00:00.500Z" 7
  forge aaaaaaaaa2 "2001-01-01T00:00:00.500Z" 8
  forge aaaaaaaaa3 "2001-01-01T00:00:00Z"
  forge aaaaaaaaa4 "2001-01-01T00:00:01Z"
  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}' | tail -n 4 | tr '\n' ' ')" \
    "aaaaaaaaa4 aaaaaaaaa2 aaaaaaaaa1 aaaaaaaaa3 " "old and forged records in order"
}

test_list_fits_the_terminal_filters_and_never_cuts_json() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet list
  assert_eq "$OUT" "" "list with no jobs"
  assert_contains "$ERR" "no jobs yet"
  assert_contains "$ERR" "git mullet run"

  local long_title
  long_title="a task whose first line is long: $(printf 'word%.0s ' $(seq 1 40))end"
  run_job -m "$long_title" --command 'printf "a\nb\n" >two-lines; printf "x\n" >>README'
  local changed="$JOB"
  run_job -m "fails" --command 'exit 3'
  local failed="$JOB"
  run_job -m "nothing" --command true
  local unchanged="$JOB"
  # A [[gate]] without a name is named after its whole command line.
  local gate_command
  gate_command="true # a gate command longer than forty characters, kept whole in the record"
  user_config '[[gate]]' "command = '$gate_command'"
  run_job -m "gated" --command 'echo g >g'
  local gated="$JOB"
  unset GIT_MULLET_CONFIG
  assert_eq "$(json_get "$JOB_JSON" '.attempts[0].gates[0].name')" "$gate_command" "gate name in run --json"

  # Piped: no header, one line per job, nothing cut.
  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | wc -l | tr -d ' ')" 4 "lines"
  assert_contains "$OUT" "$long_title"
  assert_matches "$OUT" "$changed  succeeded +[0-9smhd]+ +[0-9smhd]+ +- +\+3 -0 +a task" "the changed job's line"
  assert_matches "$OUT" "$failed  failed +[0-9smhd]+ +[0-9smhd]+ +- +- +fails" "the failed job's line"

  # On a terminal: a header, every line within the width, the long title
  # cut with an ellipsis.
  on_terminal 70 "git mullet list"
  assert_eq "$CODE" 0 "list on a terminal"
  assert_matches "$(printf '%s\n' "$OUT" | head -n 1)" '^ID +STATE +AGE +DURATION +COST +CHANGES +TITLE$' "header"
  assert_contains "$OUT" "…"
  assert_not_contains "$OUT" "$long_title"
  local widest
  widest="$(printf '%s\n' "$OUT" | while IFS= read -r line; do printf '%s\n' "${#line}"; done | sort -n | tail -n 1)"
  [ "$widest" -le 70 ] || fail "a line is $widest columns wide on a 70-column terminal: $OUT"

  expect_exit 0 git mullet list --state failed
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}')" "$failed" "--state failed"
  expect_exit 0 git mullet list --state failed,no_changes
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}' | sort | tr '\n' ' ')" \
    "$(printf '%s\n%s\n' "$failed" "$unchanged" | sort | tr '\n' ' ')" "--state with a comma list"
  expect_exit 0 git mullet list --state failed --state no_changes
  assert_eq "$(printf '%s\n' "$OUT" | wc -l | tr -d ' ')" 2 "--state repeated"
  expect_exit 0 git mullet list --state cancelled
  assert_eq "$OUT" "" "no cancelled job"
  assert_contains "$ERR" "no job is cancelled"
  expect_exit 2 git mullet list --state finished
  assert_contains "$ERR" "'finished' is not a job state"
  expect_exit 0 git mullet list -n 1
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}')" "$gated" "-n 1"
  expect_exit 0 git mullet list --max-count 2 --json
  assert_eq "$(json_get "$OUT" 'length')" 2 "--max-count 2 --json"

  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" ".[] | select(.id == \"$changed\") | .title")" "$long_title" "title in list --json"
  assert_eq "$(json_get "$OUT" ".[] | select(.id == \"$changed\") | .changes")" \
    '{"deletions":0,"files":2,"insertions":3}' "changes in list --json"
  assert_eq "$(json_get "$OUT" ".[] | select(.id == \"$failed\") | .changes")" null "changes of a job without result"
}

test_stop_cancels_a_detached_job_and_keeps_its_snapshot() {
  new_repo repo
  cd repo
  stop_jobs_on_exit
  detach -m "write, then wait" --command "echo kept >kept.txt; $WAIT_FOREVER"
  wait_until 60 started "$JOB"
  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "now +[0-9smhd]+ so far, attempt 1/1 · worker \(for [0-9smhd]+\)" "show of a running job"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_get "$OUT" '.progress.phase')" worker "progress.phase"
  assert_eq "$(json_get "$OUT" '.progress.attempt')" 1 "progress.attempt"

  expect_exit 0 timeout -k 5 60 git mullet stop "$JOB"
  assert_matches "$OUT" "^job $JOB cancelled: result [0-9a-f]{12}" "what stop printed"
  assert_contains "$OUT" "git mullet resume $JOB"
  # Its end is on record the moment stop is back.
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" cancelled
  assert_eq "$(json_get "$OUT" '.progress')" null "progress of an ended job"
  assert_eq "$(git cat-file blob "$(json_field "$OUT" result):kept.txt")" kept "the snapshot"

  expect_exit 2 git mullet stop "$JOB"
  assert_contains "$ERR" "job $JOB is not running (it is cancelled)"
  run_job -m "done" --command true
  expect_exit 2 git mullet stop "$JOB"
  assert_contains "$ERR" "is not running (it is no_changes)"
  expect_exit 2 git mullet stop 0123456789
  assert_contains "$ERR" "no job matches"
}

test_stop_cancels_a_run_in_the_foreground_and_a_gate() {
  new_repo repo
  cd repo
  stop_jobs_on_exit
  user_config '[[gate]]' 'name = "waits"' "command = '''$WAIT_FOREVER'''"
  git mullet run -q -m "gate waits" --command 'echo w >w' >../run.out 2>../run.err &
  local run_pid=$!
  wait_until 30 sh -c 'git mullet list --state running | grep -q running'
  local id
  id="$(git mullet list --state running | awk '{print $1}')"
  wait_until 60 sh -c "git mullet show --json $id | jq -e '.progress.phase == \"gate:waits\"'"
  expect_exit 0 git mullet show "$id"
  assert_contains "$OUT" "attempt 1/1 · gate waits"

  expect_exit 0 timeout -k 5 60 git mullet stop --json "$id"
  assert_eq "$(json_field "$OUT" state)" cancelled "stop --json"
  # The foreground run was cancelled: it says so and exits 1.
  local code=0
  wait "$run_pid" || code=$?
  assert_eq "$code" 1 "the cancelled run's exit code"
  assert_contains "$(cat ../run.err)" "job $id cancelled"
  assert_eq "$(json_get "$OUT" '.attempts[0].gates[0].ended_by')" cancelled "the gate's end"
}

test_discard_takes_several_jobs_states_and_all() {
  new_repo repo
  cd repo
  stop_jobs_on_exit
  run_job -m "a" --command 'head -c 300000 /dev/urandom >big'
  local a="$JOB"
  run_job -m "b" --command 'echo b >b'
  local b="$JOB"
  run_job -m "c fails" --command 'exit 1'
  local c="$JOB"
  run_job -m "d fails" --command 'exit 1'
  local d="$JOB"
  run_job -m "e" --command true
  local e="$JOB"

  expect_exit 0 git mullet discard "$a" "${b:0:7}"
  assert_contains "$OUT" "discarded job $a"
  assert_contains "$OUT" "discarded job $b"
  assert_matches "$OUT" "freed [0-9.]+ (KiB|MiB) of scratch space" "space freed"
  assert_eq "$(git for-each-ref "refs/mullet/jobs/$a" "refs/mullet/jobs/$b")" "" "refs of discarded jobs"
  assert_absent "$(job_dir "$a")"

  # Many at once need a yes: on a terminal by asking, elsewhere --yes.
  local traces
  traces="$(mullet_traces)"
  expect_exit 2 git mullet discard --state failed </dev/null
  assert_contains "$ERR" "without --yes"
  assert_eq "$(mullet_traces)" "$traces" "after the refusal"
  on_terminal 100 "git mullet discard --state failed" <<<"n"
  assert_eq "$CODE" 2 "declined"
  assert_contains "$OUT" "discard them? [y/N]"
  assert_contains "$OUT" "$c  failed  c fails"
  assert_eq "$(mullet_traces)" "$traces" "after declining"
  on_terminal 100 "git mullet discard --state failed" <<<"y"
  assert_eq "$CODE" 0 "confirmed: $OUT"
  assert_contains "$OUT" "discarded job $c"
  assert_contains "$OUT" "discarded job $d"
  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1}')" "$e" "what is left"

  # --all leaves a running job alone.
  detach -m "runs" --command "$WAIT_FOREVER"
  local running="$JOB"
  wait_until 60 started "$running"
  expect_exit 0 git mullet discard --all --yes
  assert_contains "$OUT" "discarded job $e"
  assert_contains "$ERR" "left 1 running job alone"
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '[.[].id]')" "[\"$running\"]" "only the running job is left"
  expect_exit 0 timeout -k 5 60 git mullet discard --state running --force --yes
  assert_contains "$OUT" "discarded job $running"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "no job left"
  expect_exit 0 git mullet discard --all --yes
  assert_contains "$ERR" "no job to discard"
  expect_exit 2 git mullet discard
  assert_contains "$ERR" "JOB..., --state STATE or --all"
  expect_exit 2 git mullet discard --state finished
}

test_a_terminal_sees_each_phase_with_a_status_line_and_headers() {
  new_repo repo
  cd repo
  stop_jobs_on_exit
  user_config '[[gate]]' 'name = "check"' 'command = "echo gate-said-so"'
  # On a terminal (script's pty), the worker waits until the test has seen
  # its status line, then the gate runs.
  script -qfec "git mullet run -m 'status' --command 'echo worker-said-so; $WAIT_FOREVER; echo w >w'" ../typescript \
    >/dev/null 2>&1 &
  local run_pid=$!
  wait_until 60 grep -q "attempt 1/1 · worker · running" ../typescript
  local id
  id="$(git mullet list --state running | awk '{print $1}')"
  touch "$(job_home "$(job_dir "$id")")/go"
  local code=0
  wait "$run_pid" || code=$?
  assert_eq "$code" 0 "the run's exit code: $(cat ../typescript)"
  local shown
  shown="$(tr -d '\r' <../typescript)"
  assert_matches "$shown" "\[[0-9]+s\] attempt 1/1 · worker · running" "the status line"
  assert_contains "$shown" "── attempt 1/1 · worker ──"
  assert_contains "$shown" "── attempt 1/1 · gate check ──"
  assert_contains "$shown" "gate-said-so"
  assert_contains "$shown" "gates:   check pass"
  assert_contains "$shown" "take it: git mullet merge $id"
  # The log has the headers, not the status line.
  expect_exit 0 git mullet log "$id"
  assert_eq "$OUT" "$(printf '── attempt 1/1 · worker ──\nworker-said-so\nstarted\n── attempt 1/1 · gate check ──\ngate-said-so')" "log"
  # Into a pipe: the headers, no status line.
  run_job -m "piped" --command 'echo piped-worker'
  expect_exit 0 git mullet run -m "piped" --command 'echo piped-worker'
  assert_contains "$ERR" "── attempt 1/1 · gate check ──"
  assert_not_contains "$ERR" "running"
  # A failed job says where to look and how to go on.
  expect_exit 1 git mullet run -m "fails" --command 'exit 3'
  assert_contains "$ERR" "go on:   git mullet resume"
  assert_contains "$ERR" "look:    git mullet show"
}

test_a_job_between_attempts_reads_running() {
  new_repo repo
  cd repo
  stop_jobs_on_exit
  # Attempt 1 fails its gate; attempt 2 waits. Meanwhile the job is running
  # (not the failed verdict attempt 1 left): resume and discard refuse it.
  user_config '[run]' 'attempts = 2' '[[gate]]' 'name = "second"' "command = 'test \$(cat counter) -ge 2'"
  detach -m "twice" --command "n=\$(cat counter 2>/dev/null || echo 0); echo \$((n + 1)) >counter; if [ \$n -ge 1 ]; then $WAIT_FOREVER; fi"
  wait_until 60 started "$JOB"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" running "state during attempt 2"
  assert_eq "$(json_get "$OUT" '.progress.attempt')" 2 "progress.attempt"
  assert_eq "$(json_field "$OUT" error)" null "error during attempt 2"
  expect_exit 2 git mullet resume "$JOB"
  assert_contains "$ERR" running
  expect_exit 2 git mullet discard "$JOB"
  assert_contains "$ERR" "still running"
  expect_exit 0 timeout -k 5 60 git mullet stop "$JOB"
  assert_contains "$OUT" "job $JOB cancelled"
}

run_tests
