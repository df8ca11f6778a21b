#!/usr/bin/env bash
# Budgets, signals and resume. A limit ([limits] timeout per phase,
# job_timeout for the whole job, gate_timeout per gate, inactivity) kills the
# sandbox's whole process tree within seconds, the phase's ended_by says which
# limit it was and the job's error names it. SIGINT/SIGTERM to git-mullet stop
# the job: the sandbox dies, what the worker wrote so far is the result, the
# job is cancelled (exit 1). SIGKILL leaves an interrupted job with nothing
# running, which `git mullet resume` finishes from its last snapshot, as more
# attempts of the same job; `discard` removes it after.
source "$(dirname "$0")/../lib/harness.sh"

# Every job of this suite is bounded: a limit that fails must not hang it.
RUN_JOB_BOUND=60

# timed_job ARGS...: run_job, and TOOK (seconds).
timed_job() {
  local started=$SECONDS
  run_job "$@"
  TOOK=$((SECONDS - started))
}

# phase_field INDEX FIELD
phase_field() {
  json_get "$JOB_JSON" ".phases[$1].$2"
}

# start_job ARGS...: starts `git mullet run --json -q ARGS` in the background
# (BG_PID; its stdout in ../bg.out) and waits for its record: sets JOB and
# RUNNER (the git-mullet process).
start_job() {
  local before
  before="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  git mullet run --json -q "$@" >../bg.out 2>../bg.err &
  BG_PID=$!
  # Should the test fail, the job is cancelled (git forwards SIGTERM).
  trap 'kill -TERM '"$BG_PID"' 2>/dev/null || true' EXIT
  local deadline=$((SECONDS + 15))
  JOB=""
  while [ -z "$JOB" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no job record appeared"
    sleep 0.1
    JOB="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs | grep -vxF -e "$before" | head -n 1 || true)"
  done
  RUNNER="$(json_get "$(git mullet show --json "$JOB")" '.runner.pid')"
  assert_matches "$RUNNER" '^[0-9]+$' "runner pid"
}

# finish_job SECONDS: waits for the background job to end (at most SECONDS);
# sets RUN_CODE and JOB_JSON.
finish_job() {
  local deadline=$((SECONDS + $1))
  while kill -0 "$BG_PID" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "git mullet run did not end within $1 s after the signal"
    sleep 0.1
  done
  RUN_CODE=0
  wait "$BG_PID" || RUN_CODE=$?
  JOB_JSON="$(cat ../bg.out)"
}

# result_file PATH: a file of the job's result commit.
result_file() {
  git cat-file blob "$(json_field "$JOB_JSON" result):$1"
}

test_the_phase_timeout_stops_the_worker() {
  new_repo repo
  cd repo
  local m daemon
  m="$(marker)"
  daemon="$(marker)"
  user_config '[limits]' 'timeout = 2'
  # It leaves a daemon behind too, in a session of its own.
  timed_job -m "sleepy" --command "setsid nohup sleep $daemon >/dev/null 2>&1 </dev/null &
    echo started >started.txt; echo started; sleep $m; echo NOT-STOPPED >late.txt"
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(phase_field 0 ended_by)" timeout "the worker's ended_by"
  local error
  error="$(json_field "$JOB_JSON" error)"
  assert_contains "$error" "the worker was stopped: timeout" "error"
  assert_contains "$error" "limits.timeout" "error"
  local ms
  ms="$(phase_field 0 duration_ms)"
  [ "$ms" -ge 1900 ] && [ "$ms" -le 6000 ] || fail "the worker ran ${ms} ms, expected about 2000"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  # What it wrote before the limit is the result.
  assert_eq "$(result_file started.txt)" started
  git cat-file -e "$(json_field "$JOB_JSON" result):late.txt" 2>/dev/null && fail "the worker went on after its timeout"
  no_process_left "sleep $m"
  no_process_left "sleep $daemon"
  # The same limit from the repository's .mullet.toml (it may lower one).
  user_config
  printf '[limits]\ntimeout = 2\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "a lower timeout"
  timed_job -m "sleepy again" --command "echo started; sleep $m"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(phase_field 0 ended_by)" timeout "ended_by under the repository's limit"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  no_process_left "sleep $m"
}

test_the_job_timeout_spans_every_phase() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  # Each phase alone is within `timeout`; together they pass job_timeout.
  user_config '[limits]' 'timeout = 100' 'job_timeout = 3'
  timed_job -m "slow" --setup 'sleep 1.5; echo setup-done' --command "echo w >w.txt; echo working; sleep $m"
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '[.phases[] | [.name, .ended_by]]')" '[["setup","exit"],["worker","job_timeout"]]' "phases"
  local error
  error="$(json_field "$JOB_JSON" error)"
  assert_contains "$error" "job_timeout" "error"
  assert_contains "$error" "limits.job_timeout" "error"
  local total
  total="$(json_get "$JOB_JSON" '[.phases[].duration_ms] | add')"
  [ "$total" -ge 2500 ] && [ "$total" -le 6000 ] || fail "the phases ran ${total} ms in all, expected about 3000"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  assert_eq "$(result_file w.txt)" w
  no_process_left "sleep $m"

  # A gate is within the job's limit too.
  timed_job -m "slow gate" --command 'echo w >w.txt' --gate "echo gating; sleep $m"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '.attempts[0].gates[0].ended_by')" job_timeout "the gate's ended_by"
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.job_timeout" "error"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  no_process_left "sleep $m"

  # And attempts: each is quick, all of them are not.
  user_config '[limits]' 'job_timeout = 3' '[run]' 'attempts = 20'
  timed_job -m "again and again" --command 'echo $$ >>runs; sleep 0.8' --gate 'exit 1'
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_contains "$(json_field "$JOB_JSON" error)" "job_timeout" "error"
  local attempts
  attempts="$(json_get "$JOB_JSON" '.attempts | length')"
  [ "$attempts" -ge 2 ] && [ "$attempts" -le 5 ] || fail "$attempts attempts within a 3 s job"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
}

test_inactivity_stops_a_silent_worker() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  user_config '[limits]' 'inactivity = 2' 'timeout = 60'
  timed_job -m "quiet" --command "echo once; echo o >once.txt; sleep $m"
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(phase_field 0 ended_by)" inactivity
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.inactivity" "error"
  local ms
  ms="$(phase_field 0 duration_ms)"
  [ "$ms" -ge 1900 ] && [ "$ms" -le 6000 ] || fail "the worker ran ${ms} ms, expected about 2000"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  assert_eq "$(result_file once.txt)" o
  no_process_left "sleep $m"
  # The control: talking (on stderr) every half second for 4 s is not
  # inactivity.
  timed_job -m "chatty" --command 'for i in 1 2 3 4 5 6 7 8; do echo tick $i >&2; sleep 0.5; done; echo done >done.txt'
  assert_eq "$RUN_CODE" 0 "exit code of the chatty worker ($(json_field "$JOB_JSON" error))"
  assert_eq "$(result_file done.txt)" done
}

test_gate_timeout_and_a_gates_own_timeout_only_lowers_it() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  user_config '[limits]' 'gate_timeout = 2' '[[gate]]' 'name = "slow"' "command = 'sleep $m'" 'timeout = 100'
  timed_job -m "gated" --command 'echo w >w.txt'
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_get "$JOB_JSON" '.attempts[0].gates[0] | [.name, .ended_by, .passed]')" '["slow","timeout",false]' "the gate"
  local ms
  ms="$(json_get "$JOB_JSON" '.attempts[0].gates[0].duration_ms')"
  [ "$ms" -ge 1900 ] && [ "$ms" -le 6000 ] || fail "the gate ran ${ms} ms, expected about 2000"
  [ "$TOOK" -le 10 ] || fail "the job took ${TOOK}s"
  no_process_left "sleep $m"
  # The control: within its limit the gate passes.
  user_config '[limits]' 'gate_timeout = 5' '[[gate]]' 'name = "quick"' 'command = "sleep 0.5"' 'timeout = 100'
  timed_job -m "gated" --command 'echo w >w.txt'
  assert_eq "$RUN_CODE" 0 "exit code within the gate's limit"
}

test_sigint_and_sigterm_cancel_the_worker_and_keep_its_work() {
  new_repo repo
  cd repo
  local how signal target m
  # To git-mullet itself, and (SIGTERM, as `timeout` or a CI runner sends
  # it) to the `git mullet` process that started it.
  for how in INT:runner TERM:runner TERM:git; do
    signal="${how%%:*}"
    target="${how#*:}"
    m="$(marker)"
    start_job -m "cancel with $how" --command "echo partial-$signal >partial.txt; echo ready; sleep $m"
    wait_until 15 job_has "$(job_dir "$JOB")" partial.txt
    wait_until 5 is_running "sleep $m"
    local sent=$SECONDS
    if [ "$target" = runner ]; then kill -s "$signal" "$RUNNER"; else kill -s "$signal" "$BG_PID"; fi
    finish_job 10
    [ $((SECONDS - sent)) -le 5 ] || fail "the job took $((SECONDS - sent))s to stop after SIG$how"
    # (git itself dies of the signal it forwarded: 128 + 15.)
    if [ "$target" = runner ]; then assert_eq "$RUN_CODE" 1 "exit code after SIG$how"; else assert_eq "$RUN_CODE" 143 "exit code after SIG$how"; fi
    assert_eq "$(json_field "$JOB_JSON" state)" cancelled "state after SIG$how"
    assert_eq "$(json_field "$JOB_JSON" id)" "$JOB"
    assert_eq "$(phase_field 0 ended_by)" cancelled "ended_by after SIG$how"
    assert_matches "$(json_field "$JOB_JSON" error)" "cancel" "error after SIG$how"
    assert_eq "$(result_file partial.txt)" "partial-$signal" "what the worker wrote before SIG$how"
    assert_eq "$(git rev-parse "$(json_field "$JOB_JSON" result)^")" "$(git rev-parse HEAD)" "the result's parent"
    no_process_left "sleep $m"
    expect_exit 0 git mullet show --json "$JOB"
    assert_eq "$(json_field "$OUT" state)" cancelled "state shown after SIG$how"
    expect_exit 0 git mullet list
    assert_contains "$OUT" "$JOB  cancelled"
  done
}

test_sigterm_mid_gate_cancels_the_job() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  start_job -m "gated" --command 'echo w >w.txt' --gate "echo started >gate-started; echo gating; sleep $m"
  wait_until 15 test -e "$(job_dir "$JOB")/gate/work/gate-started"
  wait_until 5 is_running "sleep $m"
  kill -TERM "$RUNNER"
  finish_job 10
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" cancelled
  assert_eq "$(json_get "$JOB_JSON" '.attempts[0].gates[0] | [.ended_by, .passed]')" '["cancelled",false]' "the gate"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[].ended_by]')" '["exit","cancelled"]' "phases"
  # The worker's snapshot is the result; the gate's file is not in it.
  assert_eq "$(result_file w.txt)" w
  git cat-file -e "$(json_field "$JOB_JSON" result):gate-started" 2>/dev/null && fail "the gate's file is in the result"
  no_process_left "sleep $m"
  assert_absent "$(job_dir "$JOB")/gate"
}

test_sigint_during_setup_never_runs_the_worker() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  start_job -m "setup" --setup "echo s >setup-started; sleep $m" --command 'echo w >worker-ran.txt'
  wait_until 15 job_has "$(job_dir "$JOB")" setup-started
  kill -INT "$RUNNER"
  finish_job 10
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" cancelled
  assert_eq "$(json_get "$JOB_JSON" '[.phases[] | [.name, .ended_by]]')" '[["setup","cancelled"]]' "phases"
  assert_absent "$(job_work "$(job_dir "$JOB")")/worker-ran.txt"
  no_process_left "sleep $m"
}

test_sigkill_leaves_an_interrupted_job_that_resume_finishes() {
  new_repo repo
  cd repo
  local base m
  base="$(git rev-parse HEAD)"
  m="$(marker)"
  # Attempt 1 makes a snapshot that fails the gate; attempt 2 hangs, and its
  # git-mullet is killed.
  user_config '[run]' 'executor = "command"' \
    "command = 'n=\$(cat counter 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >counter; echo run-\$n >>runs; printf %s \"\$MULLET_PROMPT\" >prompt-\$n.txt; if [ \$n -ge 2 ]; then echo hanging >hanging.txt; sleep $m; fi'" \
    'attempts = 2' '[[gate]]' 'name = "twice"' "command = 'test \$(cat counter) -ge 2'"
  start_job -m "count and hang"
  wait_until 20 job_has "$(job_dir "$JOB")" hanging.txt
  wait_until 5 is_running "sleep $m"
  # A running job is not resumed.
  expect_exit 2 git mullet resume "$JOB"
  assert_clear_error
  assert_contains "$ERR" running "resume's refusal"
  is_running "sleep $m" || fail "the refused resume stopped the job"
  kill -KILL "$RUNNER"
  no_process_left "sleep $m"
  finish_job 10
  expect_exit 0 git mullet show --json "$JOB"
  local shown="$OUT"
  assert_eq "$(json_field "$shown" state)" interrupted "state shown"
  local first
  first="$(json_field "$shown" result)"
  assert_matches "$first" '^[0-9a-f]{40}$' "the snapshot of attempt 1"
  assert_eq "$(git rev-parse "$first^")" "$base" "attempt 1's parent"
  assert_eq "$(git cat-file blob "$first:counter")" 1
  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "state +interrupted" "show"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$JOB  interrupted" "list"
  # (Checked last: the record keeps attempt 1 and its failed gate.)
  local attempts_before
  attempts_before="$(json_get "$shown" '[.attempts[] | [.number, .result, .gates[0].passed]]')"

  # Resume: the worker no longer hangs.
  user_config '[run]' 'executor = "command"' \
    "command = 'n=\$(cat counter 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >counter; echo run-\$n >>runs; printf %s \"\$MULLET_PROMPT\" >prompt-\$n.txt; ls >seen-\$n.txt'" \
    'attempts = 2' '[[gate]]' 'name = "twice"' "command = 'test \$(cat counter) -ge 2'"
  expect_exit 0 timeout 60 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" id)" "$JOB" "the resumed job's id"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state after resume ($(json_field "$JOB_JSON" error))"
  local result
  result="$(json_field "$JOB_JSON" result)"
  # It went on from attempt 1's snapshot, not from what attempt 2 left
  # unsnapshotted (hanging.txt), on top of it in history.
  assert_eq "$(git rev-parse "$result^")" "$first" "the resumed result's parent"
  git merge-base --is-ancestor "$first" "$result" || fail "the first snapshot is not in the resumed result's history"
  assert_eq "$(git cat-file blob "$result:counter")" 2 "counter after resume"
  assert_eq "$(git cat-file blob "$result:runs")" "$(printf 'run-1\nrun-2')" "runs that reached the result"
  git cat-file -e "$result:hanging.txt" 2>/dev/null && fail "the interrupted attempt's unsnapshotted file is in the result"
  assert_contains "$(git cat-file blob "$result:prompt-2.txt")" "count and hang" "the resumed prompt"
  assert_eq "$(json_get "$JOB_JSON" '.attempts[-1].gates[0].passed')" true "the last gate"
  assert_eq "$(json_get "$JOB_JSON" '.attempts[-1].result')" "$result" "the last attempt's result"
  local resumed_json="$JOB_JSON"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$JOB  succeeded" "list after resume"
  assert_eq "$(git for-each-ref refs/mullet/jobs | wc -l)" 1 "jobs after resume"
  # A succeeded job is not resumed again.
  expect_exit 2 git mullet resume "$JOB"
  assert_clear_error

  # discard removes it.
  local record
  record="$(git rev-parse "refs/mullet/jobs/$JOB")"
  expect_exit 0 git mullet discard "$JOB"
  git rev-parse -q --verify "refs/mullet/jobs/$JOB" >/dev/null && fail "the job's ref is still there"
  assert_absent "$(job_dir "$JOB")"
  assert_contains "$(git reflog show --format=%H refs/mullet/discarded)" "$record" "the discard trace"
  expect_exit 2 git mullet show "$JOB"

  # The record of the interrupted job kept attempt 1 and its failed gate, and
  # the resumed job's attempts are numbered after it.
  assert_eq "$attempts_before" "[[1,\"$first\",false]]" "attempts recorded before the kill"
  assert_eq "$(json_get "$resumed_json" '.attempts[0] | [.number, .result, .gates[0].passed]')" "[1,\"$first\",false]" \
    "attempt 1 in the resumed record"
  local numbers
  numbers="$(json_get "$resumed_json" '[.attempts[].number]')"
  assert_eq "$(json_get "$resumed_json" '[.attempts[].number] | (. == (sort | unique)) and .[-1] >= 2')" true "attempt numbers $numbers"
}

test_resume_continues_a_cancelled_and_a_failed_job() {
  new_repo repo
  cd repo
  local base m
  base="$(git rev-parse HEAD)"
  m="$(marker)"
  user_config '[run]' 'executor = "command"' "command = 'echo partial >partial.txt; sleep $m'"
  start_job -m "resume me"
  wait_until 15 job_has "$(job_dir "$JOB")" partial.txt
  kill -TERM "$RUNNER"
  finish_job 10
  assert_eq "$(json_field "$JOB_JSON" state)" cancelled
  local cancelled_result
  cancelled_result="$(json_field "$JOB_JSON" result)"
  no_process_left "sleep $m"
  user_config '[run]' 'executor = "command"' \
    "command = 'cat partial.txt >seen.txt; printf %s \"\$MULLET_PROMPT\" >prompt.txt; echo done >done.txt'"
  expect_exit 0 timeout 60 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git rev-parse "$result^")" "$cancelled_result" "parent of the resumed result"
  assert_eq "$(git rev-parse "$cancelled_result^")" "$base"
  assert_eq "$(git cat-file blob "$result:seen.txt")" partial "what the resumed worker found"
  assert_contains "$(git cat-file blob "$result:prompt.txt")" "resume me" "the resumed prompt"

  # A job whose gate failed gets more attempts, numbered on.
  user_config '[run]' 'executor = "command"' "command = 'echo try >>tries.txt'" \
    '[[gate]]' 'name = "fixed"' 'command = "test -e fixed"'
  run_job -m "needs a fix"
  assert_eq "$RUN_CODE" 1
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  local first
  first="$(json_field "$JOB_JSON" result)"
  user_config '[run]' 'executor = "command"' "command = 'echo try >>tries.txt; touch fixed'" \
    '[[gate]]' 'name = "fixed"' 'command = "test -e fixed"'
  expect_exit 0 timeout 60 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[] | [.number, .gates[0].passed]]')" '[[1,false],[2,true]]' "attempts"
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git rev-parse "$result^")" "$first" "parent of the resumed result"
  assert_eq "$(git cat-file blob "$result:tries.txt")" "$(printf 'try\ntry')"
  assert_eq "$(json_field "$JOB_JSON" error)" null "error after the resume"
}

test_resume_keeps_the_jobs_gates() {
  # A job whose --gate failed: resumed, the same gate must still decide.
  new_repo repo
  cd repo
  user_config '[run]' 'executor = "command"' "command = 'echo try >>tries.txt'"
  run_job -m "gated by a flag" --gate 'echo FLAG-GATE-CHECKED; test -e fixed'
  assert_eq "$RUN_CODE" 1
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  # The resumed worker still does not fix it: the job must still fail.
  expect_exit 1 timeout 60 git mullet resume --json -q "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" state)" failed "state after a resume that fixed nothing"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[] | [.number, (.gates | map(.passed))]]')" '[[1,[false]],[2,[false]]]' "attempts"
  expect_exit 2 git mullet merge "$JOB"
}

test_two_resumes_at_once_run_the_job_once() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  user_config '[run]' 'executor = "command"' "command = 'echo started >started.txt; sleep $m'"
  start_job -m "contested"
  wait_until 15 job_has "$(job_dir "$JOB")" started.txt
  kill -KILL "$RUNNER"
  no_process_left "sleep $m"
  finish_job 10
  assert_eq "$(json_field "$(git mullet show --json "$JOB")" state)" interrupted
  # A resumed worker leaves its mark, then waits for the test: whichever
  # resume comes second meets the job while the first one runs it.
  local go
  go="$(job_dir "$JOB")/home/go"
  user_config '[run]' 'executor = "command"' \
    "command = 'echo run >>runs.txt; while [ ! -e \"\$HOME/go\" ]; do sleep 0.1; done'"
  local r resumes=""
  for r in a b; do
    (
      code=0
      git mullet resume --json -q "$JOB" >"../$r.out" 2>"../$r.err" || code=$?
      echo "$code" >"../$r.code.tmp" && mv "../$r.code.tmp" "../$r.code"
    ) </dev/null >/dev/null 2>&1 &
    resumes="$resumes $!"
  done
  # Should the test fail, the resumes are cancelled (git forwards SIGTERM).
  trap 'for p in '"$resumes"'; do pkill -TERM -P "$p" || true; done 2>/dev/null; touch "'"$go"'"' EXIT
  # One resume is refused while the other runs the worker, which waits.
  wait_until 60 sh -c 'test -e ../a.code || test -e ../b.code'
  local first=a second=b
  if [ ! -e ../a.code ]; then first=b second=a; fi
  wait_until 60 job_has "$(job_dir "$JOB")" runs.txt
  touch "$(job_home "$(job_dir "$JOB")")/go"
  wait_until 60 test -e "../$second.code"
  assert_eq "$(cat "../$first.code") $(cat "../$second.code")" "2 0" \
    "exit codes of the refused and the running resume ($(cat ../a.err ../b.err))"
  ERR="$(cat "../$first.err")"
  assert_clear_error
  assert_matches "$ERR" "running|cannot be resumed" "the refused resume's error"
  expect_exit 0 git mullet show --json "$JOB"
  JOB_JSON="$OUT"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(result_file runs.txt)" run "the resumed worker's runs"
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 1 "attempts after the resume"
}

run_tests
