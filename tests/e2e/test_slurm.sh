#!/usr/bin/env bash
# Dispatch to a real Slurm cluster (run --on slurm, issue 18): a single-node
# cluster of this machine on loopback (tests/lib/with-slurm.sh starts it once
# for the suite and stops it by pid at the end). Jobs are submitted with
# sbatch, wait as `queued`, run on the node as local jobs (same record, same
# refs), and are stopped through scancel.
if [ -z "${MULLET_SLURM_CLUSTER:-}" ]; then
  # As root: start the cluster around this suite. The as-user run gets it
  # from its wrapper (tests/CMakeLists.txt), with SLURM_CONF.
  if [ "$(id -u)" -eq 0 ]; then exec bash "$(dirname "$0")/../lib/with-slurm.sh" bash "$0" "$@"; fi
  echo "test_slurm.sh: no cluster: run it as root, or under tests/lib/with-slurm.sh" >&2
  exit 1
fi
source "$(dirname "$0")/../lib/harness.sh"

SCHEMA="$HARNESS_DIR/../../docs/json-schema/git-mullet.schema.json"
NODE="$(hostname -s)"

valid_job() {
  local problems
  problems="$(printf '%s' "$1" | python3 "$HARNESS_DIR/validate_json.py" "$SCHEMA" job 2>&1)" ||
    fail "${2:-record} does not follow the schema: $problems"
}

# A user config that dispatches: small enough for the node's memory, CPUS per job.
slurm_config() {
  user_config '[dispatch]' 'engine = "slurm"' "cpus = ${1:-1}" '[limits]' 'memory_mb = 512'
}

# cancel_on_exit ID...: the scheduler's jobs ID are cancelled when the test
# ends, failed or not (the trap runs as the test's subshell exits, its
# locals gone: the ids are kept in SUBMITTED).
cancel_on_exit() {
  SUBMITTED+=("$@")
  trap '[ "${#SUBMITTED[@]}" -eq 0 ] || scancel "${SUBMITTED[@]}" 2>/dev/null || true' EXIT
}
SUBMITTED=()

# submit ARGS...: `git mullet run --json -q ARGS`, which returns at once with
# the job queued; sets JOB and JOB_JSON. The scheduler's job is cancelled when
# the test ends: one a failed test leaves running would hold CPUs that the
# tests after it wait for.
submit() {
  run_job "$@"
  assert_eq "$RUN_CODE" 0 "run's exit code ($JOB_JSON)"
  assert_eq "$(json_field "$JOB_JSON" state)" queued "state after submitting"
  assert_matches "$(json_get "$JOB_JSON" .dispatch.scheduler_id)" '^[0-9]+$' "the scheduler's id"
  cancel_on_exit "$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
}

# hold_the_node: a job of both CPUs that runs until stopped, so that what is
# submitted next waits; sets HOLDER (its job), HOLDER_ID (the scheduler's)
# and HOLDER_MARK (its worker's `sleep` marker). Leaves the config at 2 CPUs.
hold_the_node() {
  slurm_config 2
  HOLDER_MARK="$(marker)"
  submit -m "holds the node" --command "sleep $HOLDER_MARK"
  HOLDER="$JOB"
  HOLDER_ID="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
}

scheduler_state() {
  squeue -h -j "$1" -o %T 2>/dev/null
}

job_state() {
  git mullet show --json "$1" | jq -r .state
}

test_a_dispatched_job_succeeds_and_its_branch_merges() {
  new_repo repo
  cd repo
  slurm_config
  submit --on slurm -m "write a" --command 'echo dispatched >a'
  valid_job "$JOB_JSON" "run --json (queued)"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  valid_job "$OUT" "wait --json (dispatched, ended)"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
  assert_eq "$(json_get "$OUT" .dispatch.node)" "$NODE" "the node that ran it"
  assert_eq "$(json_get "$OUT" .dispatch.scheduler_id)" "$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  expect_exit 0 git mullet merge "$JOB"
  assert_eq "$(git show "mullet/$JOB:a")" dispatched "the file on the job's branch"
}

test_four_one_cpu_jobs_on_two_cpus_two_wait_queued() {
  new_repo repo
  cd repo
  slurm_config 1
  local jobs=() n
  for n in 1 2 3 4; do
    # The worker's own work takes a while, so that two of them hold both CPUs.
    submit -m "job $n" --command "sleep 8; echo $n >n$n"
    jobs+=("$JOB")
  done
  wait_until 60 sh -c '[ "$(git mullet list --json | jq "[.[] | select(.state == \"running\")] | length")" = 2 ]'
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '[.[] | select(.state == "queued")] | length')" 2 "queued jobs: $OUT"
  assert_eq "$(json_get "$OUT" '[.[] | select(.state == "queued") | .dispatch.scheduler_id | test("^[0-9]+$")] | all')" \
    true "queued jobs show their scheduler id"
  expect_exit 0 git mullet list
  assert_contains "$OUT" queued "list"
  local queued
  queued="$(git mullet list --json | jq -r 'first(.[] | select(.state == "queued") | .id)')"
  expect_exit 0 git mullet show "$queued"
  assert_contains "$OUT" queued "show of a queued job"
  assert_matches "$OUT" "dispatch +slurm job [0-9]+" "show of a queued job"
  local running
  running="$(git mullet list --json | jq -r 'first(.[] | select(.state == "running") | .id)')"
  expect_exit 0 git mullet show "$running"
  assert_matches "$OUT" "dispatch +slurm job [0-9]+ on $NODE" "show of a running job"
  for n in 0 1 2 3; do
    expect_exit 0 timeout -k 5 180 git mullet wait --json "${jobs[$n]}"
    assert_eq "$(json_field "$OUT" state)" succeeded "job $((n + 1)): $OUT"
    expect_exit 0 git mullet merge "${jobs[$n]}"
    assert_eq "$(git show "mullet/${jobs[$n]}:n$((n + 1))")" "$((n + 1))" "job $((n + 1))'s result"
  done
}

# running_and_queued: two jobs of both CPUs each, the first running (its
# worker sleeps until stopped), the second waiting for it; sets MARK (the
# sleep's marker), RUNNING, RUNNING_ID, QUEUED and QUEUED_ID (the jobs and
# the scheduler's ids), which are cancelled when the test ends.
running_and_queued() {
  hold_the_node
  MARK="$HOLDER_MARK" RUNNING="$HOLDER" RUNNING_ID="$HOLDER_ID"
  submit -m "waits" --command "echo never >never"
  QUEUED="$JOB"
  QUEUED_ID="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  wait_until 60 sh -c "[ \"\$(git mullet show --json $RUNNING | jq -r .state)\" = running ]"
  wait_until 60 is_running "sleep $MARK"
  assert_eq "$(scheduler_state "$QUEUED_ID")" PENDING "the second job, for the scheduler"
}

test_stop_cancels_a_queued_and_a_running_job_through_the_scheduler() {
  new_repo repo
  cd repo
  running_and_queued
  local mark="$MARK" running="$RUNNING" running_id="$RUNNING_ID" queued="$QUEUED" queued_id="$QUEUED_ID"

  expect_exit 0 timeout -k 5 60 git mullet stop --json "$queued"
  assert_eq "$(json_field "$OUT" state)" cancelled "stop of a queued job: $OUT"
  wait_until 30 sh -c "[ -z \"\$(squeue -h -j $queued_id -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED)\" ]"

  expect_exit 0 timeout -k 5 90 git mullet stop --json "$running"
  assert_eq "$(json_field "$OUT" state)" cancelled "stop of a running job: $OUT"
  no_process_left "sleep $mark"
  wait_until 30 sh -c "[ -z \"\$(squeue -h -j $running_id -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED)\" ]"
  # Nothing ran for the queued one.
  assert_eq "$(job_state "$queued")" cancelled
  assert_eq "$(git mullet show --json "$queued" | jq -r .result)" null "the queued job's result"
}

test_discard_force_cancels_a_queued_and_a_running_job_through_the_scheduler() {
  new_repo repo
  cd repo
  running_and_queued
  local mark="$MARK" running="$RUNNING" running_id="$RUNNING_ID" queued="$QUEUED" queued_id="$QUEUED_ID"

  # Without --force neither goes: the scheduler would run them on.
  expect_exit 2 git mullet discard "$queued"
  assert_contains "$ERR" "is still queued"
  expect_exit 0 git mullet discard --all --yes
  assert_contains "$ERR" "left 2 running jobs alone"
  assert_eq "$(scheduler_state "$queued_id")" PENDING "the queued job, for the scheduler, after discard --all"

  expect_exit 0 timeout -k 5 60 git mullet discard --force "$queued"
  wait_until 30 sh -c "[ -z \"\$(squeue -h -j $queued_id -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED)\" ]"
  expect_exit 0 timeout -k 5 90 git mullet discard --force "$running"
  no_process_left "sleep $mark"
  wait_until 30 sh -c "[ -z \"\$(squeue -h -j $running_id -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED)\" ]"
  assert_eq "$(git for-each-ref refs/mullet/jobs/)" "" "records left"
}

test_a_job_the_scheduler_kills_is_interrupted_and_resume_finishes_it() {
  new_repo repo
  cd repo
  slurm_config
  local mark
  mark="$(marker)"
  # Its first run waits to be killed; resumed from that run's snapshot, it ends.
  submit -m "killed, then resumed" --command "if [ -e started ]; then echo resumed >done; exit 0; fi; echo 1 >started; sleep $mark"
  local first_id
  first_id="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  # The worker's own sleep, not bwrap or the shell whose command line holds
  # its words: `started` is written, so the snapshot of the run the
  # scheduler kills has it (cancelled before, the resumed run would sleep).
  wait_until 60 is_running_exactly "sleep $mark"
  scancel "$first_id"
  # wait's exit code for a job that did not end well.
  expect_exit 1 timeout -k 5 90 git mullet wait --json "$JOB"
  valid_job "$OUT" "wait --json (interrupted by the scheduler)"
  assert_eq "$(json_field "$OUT" state)" interrupted "$OUT"
  assert_contains "$(json_field "$OUT" error)" "the scheduler ended slurm job $first_id" "the error"
  assert_eq "$(json_get "$OUT" .dispatch.reason)" "SIGTERM from the scheduler"
  no_process_left "sleep $mark"

  expect_exit 0 git mullet resume --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" queued "resume of a dispatched job: $OUT"
  local second_id
  second_id="$(json_get "$OUT" .dispatch.scheduler_id)"
  cancel_on_exit "$second_id"
  [ "$second_id" != "$first_id" ] || fail "resume did not submit it again ($second_id)"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
  expect_exit 0 git mullet merge "$JOB"
  assert_eq "$(git show "mullet/$JOB:done")" resumed "the resumed run's file"
}

# A queued job the scheduler ends (scancel from outside) never started: the
# host maps "ended for the scheduler, queued on record" to interrupted, with
# the scheduler's words, and resume submits it again.
test_a_queued_job_the_scheduler_cancels_shows_interrupted() {
  new_repo repo
  cd repo
  hold_the_node
  local mark="$HOLDER_MARK" holder="$HOLDER"
  submit -m "waits" --command 'echo later >later'
  local waiting="$JOB" waiting_id
  waiting_id="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  wait_until 60 is_running "sleep $mark"
  scancel "$waiting_id"
  wait_until 30 sh -c "[ \"\$(git mullet show --json $waiting | jq -r .state)\" = interrupted ]"
  expect_exit 0 git mullet show "$waiting"
  assert_matches "$OUT" "dispatch +slurm job $waiting_id \\(the scheduler ended slurm job $waiting_id \\(CANCELLED" "show"
  expect_exit 0 timeout -k 5 90 git mullet stop "$holder"
  no_process_left "sleep $mark"
  expect_exit 0 git mullet resume --json "$waiting"
  assert_eq "$(json_field "$OUT" state)" queued "resume: $OUT"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$waiting"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
}

# Issue 18, item 3: no shell string of user text reaches the scheduler or the
# node. A prompt, a title and sbatch arguments full of shell syntax and
# newlines run nothing; the batch script is the fixed one, its arguments the
# binary, __run-dispatched and the job's id.
test_attack_shell_syntax_in_prompt_title_and_config_runs_nothing() {
  new_repo repo
  cd repo
  local pwned="$TEST_ROOT/pwned-$RANDOM"
  local evil="x'\"; touch $pwned.1; \$(touch $pwned.2) \`touch $pwned.3\`
touch $pwned.4
"
  user_config '[dispatch]' 'engine = "slurm"' "sbatch_args = [\"--comment=\$(touch $pwned.5); touch $pwned.6\"]" \
    '[limits]' 'memory_mb = 512'
  submit -m "$evil" --title "$evil" --command 'echo ok >ok'
  local scheduler_id="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
  assert_eq "$(json_field "$OUT" prompt)" "$(printf "%s" "$evil")" "the prompt, kept as given"
  local n
  for n in 1 2 3 4 5 6; do assert_absent "$pwned.$n"; done
  assert_eq "$(cat "$(job_dir "$JOB")/dispatch.sh")" "$(printf '#!/bin/sh\n# git-mullet: runs its arguments (the binary, __run-dispatched, the job'"'"'s id)\nexec "$@"')" \
    "the batch script"
  # What the scheduler holds of the job: the script and our three arguments.
  expect_exit 0 scontrol show job -o "$scheduler_id"
  assert_contains "$OUT" "Command=$(job_dir "$JOB")/dispatch.sh $(readlink -f "$MULLET_BIN") __run-dispatched $JOB WorkDir=" \
    "the batch job's command"
}

# The node side takes only a whole job id, and only a queued job.
test_run_dispatched_takes_only_a_queued_job_by_its_whole_id() {
  new_repo repo
  cd repo
  run_job -m "local" --command 'echo a >a'
  local id="$JOB"
  for bad in "${id:0:6}" "$id; touch x" "../$id" ""; do
    expect_exit 2 git mullet __run-dispatched "$bad"
  done
  expect_exit 2 git mullet __run-dispatched "$id"
  assert_contains "$ERR" "succeeded"
  assert_absent x
}

# Attack: a record naming another job's scheduler id (anyone's on the
# cluster) makes `stop` cancel nothing; the other job runs on, and the record
# is not marked as stopped.
test_attack_a_record_naming_another_scheduler_job_cancels_nothing() {
  new_repo repo
  cd repo
  slurm_config 2
  local other real_id
  other="$(sbatch --parsable --job-name=nightly-backup --output=/dev/null --wrap 'sleep 300')" ||
    fail "the other job could not be submitted"
  other="${other%%;*}"
  cancel_on_exit "$other"
  # Both CPUs wanted: it waits behind the other job.
  submit -m "queued" --command 'echo never >never'
  real_id="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  wait_until 60 sh -c "[ \"\$(squeue -h -j $other -o %T)\" = RUNNING ]"
  rewrite_record "$JOB" ".dispatch.scheduler_id = \"$other\"" \
    's/"scheduler_id":"[0-9_]*"/"scheduler_id":"'"$other"'"/'
  assert_eq "$(git mullet show --json "$JOB" | jq -r .dispatch.scheduler_id)" "$other" "the forged record"

  # The scheduler says the id is another job's: this one is not queued there
  # (interrupted), so there is nothing to stop.
  expect_exit 2 git mullet stop "$JOB"
  assert_contains "$ERR" "is not running (it is interrupted)"
  assert_eq "$(scheduler_state "$other")" RUNNING "the other job after the stop"
  assert_eq "$(git mullet show --json "$JOB" | jq -r .dispatch.reason)" "" "the record's reason after the refusal"
  # Seen for what it is: not this job's, so not queued at the scheduler.
  expect_exit 0 git mullet show "$JOB"
  assert_contains "$OUT" "is another job (named nightly-backup)"
  scancel "$other" "$real_id"
}

# Attack: a job id is unique only in its repository. Another repository that
# fetched this one's records holds a record of a running dispatched job whose
# scheduler id and name check out; its `stop` must cancel nothing (before the
# scheduler's name carried the repository's key, it scancelled the job).
test_attack_a_copied_record_of_a_dispatched_job_cancels_nothing_there() {
  new_repo a
  cd a
  slurm_config
  local n id scheduler_id
  n=$((9500000 + RANDOM * 10))
  submit -m "runs on" --command "echo up >/mullet/work/up.marker; sleep $n"
  id="$JOB"
  scheduler_id="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  wait_until 60 sh -c "[ \"\$(git mullet show --json $id | jq -r .state)\" = running ]"
  wait_until 60 is_running "sleep $n"
  cd ..
  new_repo b
  cd b
  git fetch -q ../a 'refs/mullet/*:refs/mullet/*' || fail "fetching a's records"
  assert_eq "$(job_state "$id")" running "b's copy of the record"
  expect_exit 3 git mullet stop "$id"
  assert_contains "$ERR" "is not known to be job $id of this repository"
  assert_eq "$(scheduler_state "$scheduler_id")" RUNNING "a's job at the scheduler after b's stop"
  is_running "sleep $n" || fail "b's stop ended a's worker"
  # b's discard --force takes b's copy and leaves a's job running.
  expect_exit 0 git mullet discard --force "$id"
  assert_eq "$(git for-each-ref refs/mullet/jobs/)" "" "b's records after its discard"
  assert_eq "$(scheduler_state "$scheduler_id")" RUNNING "a's job at the scheduler after b's discard --force"
  is_running "sleep $n" || fail "b's discard --force ended a's worker"
  cd ../a
  expect_exit 0 git mullet stop "$id"
  assert_eq "$(job_state "$id")" cancelled "a's job after its own stop"
}

# --- Jobs of several nodes: one job array (sbatch --array), a task per node.

# Each node writes its own file; node 1 ten more lines, node 2 nothing more
# (fewest lines: chosen), node 3 three more.
ARRAY_COMMAND='echo "node $MULLET_NODE" >"node-$MULLET_NODE.txt"
case $MULLET_NODE in 1) seq 1 10 >big.txt ;; 3) seq 1 3 >small.txt ;; esac'

# submit_array ARGS...: `git mullet run --json -q ARGS` of a job array; sets
# JOB, JOB_JSON and ARRAY (the array's id), which is cancelled when the test
# ends. A task may have claimed its node before the record was printed:
# queued or running.
submit_array() {
  run_job "$@"
  assert_eq "$RUN_CODE" 0 "run's exit code ($JOB_JSON)"
  assert_matches "$(json_field "$JOB_JSON" state)" '^(queued|running)$' "state after submitting"
  ARRAY="$(json_get "$JOB_JSON" .dispatch.scheduler_id)"
  assert_matches "$ARRAY" '^[0-9]+$' "the array's id"
  cancel_on_exit "$ARRAY"
}

# node_states JOB: the nodes' states as recorded, space-separated.
node_states() {
  git mullet show --json "$1" | jq -r '[.nodes[].state] | join(" ")'
}

# tasks_left ARRAY: the array's tasks the scheduler has not ended.
tasks_left() {
  squeue -h -r -j "$1" -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED -e FAILED
}

# Three nodes of one CPU each on the two-CPU node: two run, one waits; all
# end; the table and merge choose as a local job of several nodes does. The
# repository's path holds a '%', which sbatch's --output would expand.
test_nodes_3_run_as_one_job_array_and_merge_takes_the_chosen_node() {
  new_repo 'repo%j'
  cd 'repo%j'
  slurm_config 1
  submit_array -m "three ways" --nodes 3 --command "$ARRAY_COMMAND"
  valid_job "$JOB_JSON" "run --json (a job array, queued)"
  assert_eq "$(json_get "$JOB_JSON" '.nodes | length')" 3 "nodes"
  local n
  for n in 1 2 3; do
    assert_matches "$(json_get "$JOB_JSON" ".nodes[$((n - 1))].dispatch.scheduler_id")" "^${ARRAY}_$n\$" "node $n's task"
  done
  # One submission: the scheduler holds one array of three tasks.
  expect_exit 0 scontrol show job -o "$ARRAY"
  assert_contains "$OUT" "JobName=mullet-" "the array's name"
  expect_exit 0 timeout -k 5 180 git mullet wait --json "$JOB"
  valid_job "$OUT" "wait --json (a job array, ended)"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
  assert_eq "$(json_get "$OUT" '[.nodes[].state] | join(" ")')" "succeeded succeeded succeeded" "the nodes"
  assert_eq "$(json_get "$OUT" .chosen_node)" 2 "the chosen node"
  assert_eq "$(json_field "$OUT" result)" "$(json_get "$OUT" '.nodes[1].result')" "the job's result"
  assert_matches "$(json_field "$OUT" finished_at)" '^20' "the job's end"
  for n in 1 2 3; do
    assert_eq "$(json_get "$OUT" ".nodes[$((n - 1))].dispatch.node")" "$NODE" "the host that ran node $n"
    assert_eq "$(json_get "$OUT" ".nodes[$((n - 1))].dispatch.scheduler_id")" "${ARRAY}_$n" "node $n's task"
    assert_eq "$(git cat-file blob "$(json_get "$OUT" ".nodes[$((n - 1))].result"):node-$n.txt")" "node $n" \
      "node $n's file"
    # Each task's own log, at the path as it is ('%' not expanded).
    assert_exists "$(job_dir "$JOB")/dispatch.log.$n"
  done
  expect_exit 0 git mullet list
  assert_contains "$OUT" "[3/3 passed] three ways" "list"
  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "merge takes node 2: passed every gate" "show"
  expect_exit 0 git mullet merge "$JOB"
  assert_contains "$OUT" "taking node 2" "merge"
  assert_eq "$(git rev-parse "mullet/$JOB")" "$(git mullet show --json "$JOB" | jq -r '.nodes[1].result')" "merge's branch"
}

# stop of a running array: the array's id is cancelled, every task with it;
# the running nodes end cancelled (stop's mark), the waiting one never runs.
test_stop_of_a_running_array_cancels_every_task() {
  new_repo repo
  cd repo
  slurm_config 1
  local mark
  mark="$(marker)"
  submit_array -m "three sleepers" --nodes 3 --command "sleep $mark"
  wait_until 60 sh -c "[ \"\$(git mullet show --json $JOB | jq '[.nodes[] | select(.state == \"running\")] | length')\" = 2 ]"
  wait_until 60 is_running "sleep $mark"
  expect_exit 0 list_state_is "$JOB" running
  # One node, by its address: running, on its own task.
  local one
  one="$(git mullet show --json "$JOB" | jq -r '[.nodes[] | select(.state == "running") | .number][0]')"
  expect_exit 0 git mullet show "$JOB/$one"
  assert_matches "$OUT" "state +running" "show $JOB/$one"
  assert_matches "$OUT" "dispatch +slurm job ${ARRAY}_$one on $NODE" "show $JOB/$one"
  expect_exit 0 timeout -k 5 120 git mullet stop --json "$JOB"
  valid_job "$OUT" "stop --json (a job array)"
  assert_eq "$(json_field "$OUT" state)" cancelled "stop of a running array: $OUT"
  assert_eq "$(json_get "$OUT" '[.nodes[].state] | join(" ")')" "cancelled cancelled cancelled" "the nodes"
  assert_eq "$(json_get "$OUT" '[.nodes[] | select(.error == "cancelled before it started")] | length')" 1 \
    "the node that never started"
  no_process_left "sleep $mark"
  wait_until 60 sh -c "[ -z \"\$(squeue -h -r -j $ARRAY -o %T 2>/dev/null | grep -v -x -e CANCELLED -e COMPLETED)\" ]"
}

# list_state_is JOB STATE: `list --json` shows JOB in STATE.
list_state_is() {
  [ "$(git mullet list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .state')" = "$2" ]
}

# scancel of one task (the scheduler's doing, not stop): that node ends
# interrupted with the scheduler's reason, the others run on; resume submits
# an array of that node alone, which finishes from its snapshot.
test_a_task_the_scheduler_cancels_is_interrupted_and_resume_runs_only_it() {
  new_repo repo
  cd repo
  slurm_config 1
  local mark
  mark="$(marker)"
  submit_array -m "one is killed" --nodes 2 --command \
    "if [ \"\$MULLET_NODE\" = 2 ] && [ ! -e started ]; then echo 1 >started; sleep $mark; fi; echo \"node \$MULLET_NODE\" >done-\$MULLET_NODE"
  local first="$ARRAY"
  # Node 2's own sleep: its `started` is written (see the test of a job of one).
  wait_until 60 is_running_exactly "sleep $mark"
  scancel "${first}_2"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  valid_job "$OUT" "wait --json (a node interrupted by the scheduler)"
  assert_eq "$(json_get "$OUT" '[.nodes[].state] | join(" ")')" "succeeded interrupted" "the nodes: $OUT"
  assert_eq "$(json_get "$OUT" '.nodes[1].dispatch.reason')" "SIGTERM from the scheduler" "node 2's reason"
  assert_contains "$(json_get "$OUT" '.nodes[1].error')" "the scheduler ended slurm job ${first}_2" "node 2's error"
  no_process_left "sleep $mark"
  local node1
  node1="$(json_get "$OUT" '.nodes[0].result')"

  expect_exit 0 git mullet resume --json "$JOB"
  valid_job "$OUT" "resume --json (a job array)"
  assert_matches "$(json_field "$OUT" state)" '^(queued|running)$' "resume of a job array: $OUT"
  local second
  second="$(json_get "$OUT" .dispatch.scheduler_id)"
  cancel_on_exit "$second"
  [ "$second" != "$first" ] || fail "resume did not submit it again ($second)"
  # Only the unfinished node is submitted; the finished one keeps its task.
  expect_exit 0 scontrol show job -o "$second"
  assert_contains "$OUT" "ArrayTaskId=2 " "the resubmitted array"
  assert_not_contains "$OUT" "ArrayTaskId=1 " "the resubmitted array"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" succeeded "$OUT"
  assert_eq "$(json_get "$OUT" '[.nodes[].state] | join(" ")')" "succeeded succeeded" "the nodes"
  assert_eq "$(json_get "$OUT" '.nodes[0].result')" "$node1" "node 1's result, untouched"
  assert_eq "$(json_get "$OUT" '.nodes[0].dispatch.scheduler_id')" "${first}_1" "node 1's task"
  assert_eq "$(json_get "$OUT" '.nodes[1].dispatch.scheduler_id')" "${second}_2" "node 2's task"
  assert_eq "$(git cat-file blob "$(json_get "$OUT" '.nodes[1].result'):done-2")" "node 2" "node 2's resumed run"
  assert_eq "$(git cat-file blob "$(json_get "$OUT" '.nodes[1].result'):started")" "1" "node 2's first run, kept"
}

# A node re-reads the configuration as a local job would: one broken while
# the array waited fails each node that finds it, and the job with them.
test_a_configuration_broken_while_queued_fails_the_array() {
  new_repo repo
  cd repo
  hold_the_node
  local mark="$HOLDER_MARK" holder="$HOLDER"
  submit_array -m "waits" --nodes 2 --command 'echo never >never'
  local waiting="$JOB"
  wait_until 60 is_running "sleep $mark"
  assert_eq "$(node_states "$waiting")" "queued queued" "the array while the node is held"
  printf '[dispatch\n' >>"$USER_CONFIG"
  scancel "$(git mullet show --json "$holder" | jq -r .dispatch.scheduler_id)"
  expect_exit 1 timeout -k 5 120 git mullet wait --json "$waiting"
  assert_eq "$(json_field "$OUT" state)" failed "$OUT"
  assert_eq "$(json_get "$OUT" '[.nodes[].state] | join(" ")')" "failed failed" "the nodes"
  assert_contains "$(json_get "$OUT" '.nodes[0].error')" "could not be taken up as it was queued" "node 1's error"
  assert_eq "$(git mullet show --json "$waiting" | jq -r .result)" null "the job's result"
}

# Attack: only the scheduler's own task runs a node. A hand-set
# SLURM_ARRAY_TASK_ID out of range or not digits, an array id that is not
# the job's, a task the scheduler has not started, and a record copied into
# another repository (whose name at the scheduler is not that repository's)
# each run nothing and change no record; a task whose node is claimed
# already exits without running it.
test_attack_forged_array_tasks_and_a_copied_record_run_nothing() {
  local holder_id array
  new_repo a
  cd a
  hold_the_node
  local mark="$HOLDER_MARK" holder="$HOLDER" work
  holder_id="$HOLDER_ID"
  work="$(marker)"
  # One CPU a task: both run once the holder is gone.
  slurm_config 1
  submit_array -m "waits" --nodes 2 --command "sleep $work"
  array="$ARRAY"
  local id="$JOB" before
  wait_until 60 is_running "sleep $mark"
  before="$(git rev-parse "refs/mullet/jobs/$id")"
  local task
  for task in 0 3 "" "1;touch pwned" "-1" "01" "1 " 99999999999999999999; do
    expect_exit 3 env SLURM_ARRAY_JOB_ID="$array" SLURM_ARRAY_TASK_ID="$task" git mullet __run-dispatched "$id"
    assert_contains "$ERR" "runs nothing" "task '$task'"
  done
  assert_contains "$ERR" "is not a node's number (1..2)"
  # Not the job's array; not a job id at all; no array at all.
  expect_exit 3 env SLURM_ARRAY_JOB_ID="$holder_id" SLURM_ARRAY_TASK_ID=1 git mullet __run-dispatched "$id"
  assert_contains "$ERR" "is not the job's"
  expect_exit 3 env SLURM_ARRAY_JOB_ID="$array;x" SLURM_ARRAY_TASK_ID=1 git mullet __run-dispatched "$id"
  expect_exit 3 env -u SLURM_ARRAY_JOB_ID -u SLURM_ARRAY_TASK_ID git mullet __run-dispatched "$id"
  # The right array and task, but the scheduler has not started that task.
  expect_exit 3 env SLURM_ARRAY_JOB_ID="$array" SLURM_ARRAY_TASK_ID=1 git mullet __run-dispatched "$id"
  assert_contains "$ERR" "is not a running task of this repository's job (it is PENDING"
  assert_eq "$(git rev-parse "refs/mullet/jobs/$id")" "$before" "the record after the forged tasks"
  assert_absent pwned

  # The array runs; another repository holds a copy of its record.
  expect_exit 0 timeout -k 5 90 git mullet stop "$holder"
  wait_until 60 sh -c "[ \"\$(git mullet show --json $id | jq -r '[.nodes[].state] | join(\" \")')\" = 'running running' ]"
  wait_until 60 is_running "sleep $work"
  # A second task for a node already claimed runs nothing.
  expect_exit 2 env SLURM_ARRAY_JOB_ID="$array" SLURM_ARRAY_TASK_ID=1 git mullet __run-dispatched "$id"
  assert_contains "$ERR" "is running, not queued; this task runs nothing"
  cd ..
  new_repo b
  cd b
  git fetch -q ../a 'refs/mullet/*:refs/mullet/*' || fail "fetching a's records"
  rewrite_record "$id" '.nodes[0].state = "queued" | .state = "queued"' 's/"state":"running"/"state":"queued"/g'
  before="$(git rev-parse "refs/mullet/jobs/$id")"
  expect_exit 3 env SLURM_ARRAY_JOB_ID="$array" SLURM_ARRAY_TASK_ID=1 git mullet __run-dispatched "$id"
  assert_contains "$ERR" "is not a running task of this repository's job"
  assert_eq "$(git rev-parse "refs/mullet/jobs/$id")" "$before" "b's copy after the task"
  is_running "sleep $work" || fail "b's task ended a's workers"
  cd ../a
  assert_eq "$(node_states "$id")" "running running" "a's nodes after b's task"
  expect_exit 0 timeout -k 5 90 git mullet stop "$id"
  assert_eq "$(job_state "$id")" cancelled "a's array after its own stop"
  no_process_left "sleep $work"
}

run_tests
