#!/usr/bin/env bash
# Jobs of several nodes (`run --nodes N`, `--node`): each node runs the same
# task in a clone of its own; the record keeps nodes[]; `merge JOB` takes the
# chosen node (passed every gate, then fewest changed lines, then lowest
# cost, then lowest number); JOB/N addresses one node; SIGKILL of the runner
# leaves every running node interrupted, each resumable.
source "$(dirname "$0")/../lib/harness.sh"

# Each node writes its own file, sees MULLET_NODE, and:
#   node 1: 10 more lines, node 2: nothing more (fewest lines), node 3: 3
#   more lines, node 4: a file the gate refuses.
NODE_COMMAND='echo "node $MULLET_NODE" >"node-$MULLET_NODE.txt"; ls >"seen-$MULLET_NODE.txt"
case $MULLET_NODE in 1) seq 1 10 >big.txt ;; 3) seq 1 3 >small.txt ;; 4) echo bad >broken ;; esac'

# new_job BEFORE: the id of the job whose ref is not among BEFORE; fails when none.
new_job() {
  git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs | grep -vxF -e "$1"
}

# tree_of COMMIT: its files, one a line.
tree_of() {
  git ls-tree -r --name-only "$1"
}

test_four_nodes_run_apart_and_merge_takes_the_chosen_one() {
  new_repo repo
  cd repo
  local base
  base="$(git rev-parse HEAD)"
  run_job -m "four ways" --nodes 4 --command "$NODE_COMMAND" --gate 'test ! -e broken'
  assert_eq "$RUN_CODE" 0 "run's exit code (a node passed)"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "the job's state"
  assert_eq "$(json_get "$JOB_JSON" '.nodes | length')" 4 "nodes"
  assert_eq "$(json_get "$JOB_JSON" '[.nodes[].number]')" '[1,2,3,4]' "node numbers"
  assert_eq "$(json_get "$JOB_JSON" '[.nodes[].state]')" '["succeeded","succeeded","succeeded","failed"]' "states"
  assert_eq "$(json_get "$JOB_JSON" '.chosen_node')" 2 "the chosen node"
  assert_eq "$(json_field "$JOB_JSON" result)" "$(json_get "$JOB_JSON" '.nodes[1].result')" "the job's result"
  assert_contains "$(json_get "$JOB_JSON" '.nodes[3].error')" "gate" "node 4's error"
  assert_eq "$(json_get "$JOB_JSON" '.nodes[0].changes')" '{"deletions":0,"files":3,"insertions":15}' "node 1's changes"
  # Each node's result holds its own files and no other node's.
  local n result
  for n in 1 2 3 4; do
    result="$(json_get "$JOB_JSON" ".nodes[$((n - 1))].result")"
    assert_matches "$result" '^[0-9a-f]{40}$' "node $n's result"
    assert_eq "$(git rev-parse "$result^")" "$base" "node $n's parent"
    assert_eq "$(git cat-file blob "$result:node-$n.txt")" "node $n" "node $n's file"
    # What the worker saw in its clone: the base and its own file only.
    assert_eq "$(git cat-file blob "$result:seen-$n.txt" | tr '\n' ' ')" "README node-$n.txt seen-$n.txt src " \
      "node $n's work tree"
    for other in 1 2 3 4; do
      [ "$other" = "$n" ] && continue
      assert_not_contains "$(tree_of "$result")" "node-$other.txt" "node $n's result"
    done
  done
  # The record commit keeps every node's result (gc keeps them all).
  local parents
  parents="$(git rev-list --parents -n 1 "refs/mullet/jobs/$JOB")"
  for n in 1 2 3 4; do
    assert_contains "$parents" "$(json_get "$JOB_JSON" ".nodes[$((n - 1))].result")" "record commit's parents"
  done
  # Nothing reached the user's work tree.
  assert_eq "$(git status --porcelain)" "" "the user's work tree"

  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "nodes +3/4 passed; merge takes node 2: passed every gate, 5 changed lines" "show's summary"
  assert_matches "$OUT" $'\n\\* 2 +command +succeeded' "show marks the chosen node"
  assert_matches "$OUT" $'\n  4 +command +failed' "show's node 4"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "[3/4 passed] four ways" "list"
  [ "$(grep -c "$JOB" <<<"$OUT")" = 1 ] || fail "list shows the job more than once: $OUT"
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '.[0].nodes | length')" 4 "list --json nodes"

  expect_exit 0 git mullet merge "$JOB"
  assert_contains "$OUT" "taking node 2: passed every gate" "merge says which and why"
  assert_eq "$(git rev-parse "mullet/$JOB")" "$(json_get "$JOB_JSON" '.nodes[1].result')" "merge JOB's branch"
  # One node, by its address.
  expect_exit 0 git mullet merge "$JOB/3"
  assert_eq "$(git rev-parse "mullet/$JOB-3")" "$(json_get "$JOB_JSON" '.nodes[2].result')" "merge JOB/3's branch"
  expect_exit 2 git mullet merge "$JOB/4"
  assert_contains "$ERR" "failed its gate" "merge JOB/4"
  expect_exit 0 git mullet merge --force "$JOB/4"
  assert_eq "$(git cat-file blob "mullet/$JOB-4:broken")" bad "merge --force JOB/4"
  expect_exit 0 git mullet diff "$JOB/1"
  assert_contains "$OUT" "big.txt" "diff JOB/1"
  assert_not_contains "$OUT" "small.txt" "diff JOB/1"
  expect_exit 0 git mullet show --json "$JOB/3"
  assert_eq "$(json_get "$OUT" '.node')" 3 "show --json JOB/3"
  assert_eq "$(json_field "$OUT" result)" "$(json_get "$JOB_JSON" '.nodes[2].result')" "show --json JOB/3's result"
  expect_exit 0 git mullet show "$JOB/4"
  assert_matches "$OUT" "job +$JOB/4" "show JOB/4"
  assert_contains "$OUT" "FAIL" "show JOB/4's gate"
  expect_exit 0 git mullet log "$JOB"
  assert_contains "$OUT" "== node 4 (command, failed)" "log JOB"
  # Addresses that name no node.
  for bad in "$JOB/5" "$JOB/0" "$JOB/x" "$JOB/"; do
    expect_exit 2 git mullet show "$bad"
    assert_contains "$ERR" "node" "show $bad"
  done
  expect_exit 0 git mullet __complete-jobs merge
  assert_contains "$OUT" "$JOB/2" "completion of merge"
  # As for jobs, a node with a result is offered (merge --force takes it).
  assert_contains "$OUT" "$JOB/4" "completion of merge"
  expect_exit 0 git mullet __complete-jobs resume
  assert_contains "$OUT" "$JOB/4" "completion of resume (node 4 failed)"
  assert_not_contains "$OUT" "$JOB/2" "completion of resume (node 2 succeeded)"
}

test_the_terminal_gets_a_line_per_node_never_the_workers_output() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet run -m "talk" --nodes 2 --command 'echo "WORKER-OUTPUT-$MULLET_NODE"; echo x >x'
  local n
  for n in 1 2; do
    assert_contains "$ERR" "node $n/2: running (command)" "run's lines"
    assert_contains "$ERR" "node $n/2: succeeded" "run's lines"
  done
  assert_not_contains "$ERR$OUT" "WORKER-OUTPUT" "run's terminal output"
  assert_not_contains "$ERR$OUT" "attempt 1/1" "run's terminal output"
  assert_contains "$OUT" "nodes:   2/2 passed; merge takes node 1" "run's closing lines"
  local job
  job="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  # The logs keep it, each node's under its own header.
  expect_exit 0 git mullet log "$job/2"
  assert_contains "$OUT" "WORKER-OUTPUT-2" "log JOB/2"
  assert_not_contains "$OUT" "WORKER-OUTPUT-1" "log JOB/2"
  expect_exit 0 git mullet wait --json "$job"
  assert_eq "$(json_field "$OUT" state)" succeeded "wait --json"
  # wait tells each node's end, never its output.
  expect_exit 0 git mullet wait "$job"
  assert_contains "$ERR" "node 1/2: succeeded · 1 files +1 -0" "wait's lines"
  assert_contains "$ERR" "node 2/2: succeeded · 1 files +1 -0" "wait's lines"
  assert_not_contains "$ERR$OUT" "WORKER-OUTPUT" "wait's output"
}

test_each_node_holds_a_slot_of_max_parallel() {
  new_repo repo
  cd repo
  # One slot: the nodes run one after the other, each from taking the slot
  # (started_at) to its final record (finished_at).
  user_config '[run]' 'max_parallel = 1'
  run_job -m "one at a time" --nodes 2 --command 'echo "$MULLET_NODE" >n.txt'
  assert_eq "$RUN_CODE" 0
  local later earlier_end
  later="$(json_get "$JOB_JSON" '.nodes | sort_by(.started_at) | .[1].started_at')"
  earlier_end="$(json_get "$JOB_JSON" '.nodes | sort_by(.started_at) | .[0].finished_at')"
  [[ "$later" > "$earlier_end" || "$later" == "$earlier_end" ]] ||
    fail "with one slot, a node started ($later) before the other ended ($earlier_end)"
}

test_no_node_passes_merge_refuses_and_names_one_node() {
  new_repo repo
  cd repo
  run_job -m "two failing" --nodes 2 --command 'echo "$MULLET_NODE" >n.txt' --gate false
  assert_eq "$RUN_CODE" 1 "run's exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed "the job's state"
  assert_eq "$(json_field "$JOB_JSON" result)" null "the job's result"
  assert_eq "$(json_get "$JOB_JSON" '.chosen_node')" null "the chosen node"
  expect_exit 2 git mullet merge "$JOB"
  assert_contains "$ERR" "no node of job $JOB passed every gate" "merge's refusal"
  assert_contains "$ERR" "git mullet merge $JOB/N" "merge's hint"
  expect_exit 0 git mullet merge --force "$JOB/2"
  assert_eq "$(git cat-file blob "mullet/$JOB-2:n.txt")" 2 "node 2's result"
  expect_exit 2 git mullet run --continue "$JOB" -m "more"
  assert_contains "$ERR" "has several nodes" "run --continue"
  # The commands that act on a whole job answer a node's address as one,
  # naming the job to give instead; nothing is stopped or discarded.
  local cmd
  for cmd in discard stop wait shell; do
    expect_exit 2 git mullet "$cmd" "$JOB/2"
    assert_contains "$ERR" "'$JOB/2' names one node of a job" "$cmd of a node's address"
    assert_contains "$ERR" "name the job alone: $JOB" "$cmd's hint"
  done
  # Discard takes every node's directory with the job's.
  assert_exists "$(job_dir "$JOB")/nodes/2"
  expect_exit 0 git mullet discard "$JOB"
  assert_absent "$(job_dir "$JOB")"
}

test_a_job_of_one_node_has_no_nodes() {
  new_repo repo
  cd repo
  run_job -m "one" --nodes 1 --command 'echo "${MULLET_NODE-unset}" >n.txt'
  assert_eq "$RUN_CODE" 0
  assert_eq "$(json_get "$JOB_JSON" 'has("nodes")')" false "nodes in a job of one"
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):n.txt")" unset "MULLET_NODE in a job of one"
  expect_exit 2 git mullet show "$JOB/1"
  assert_contains "$ERR" "a job of one node" "JOB/1 of a job of one"
}

test_node_flags_are_checked() {
  new_repo repo
  cd repo
  local before
  before="$(git for-each-ref refs/mullet)"
  expect_exit 2 git mullet run -m x --nodes 0 --command true
  expect_exit 2 git mullet run -m x --nodes 17 --command true
  expect_exit 2 git mullet run -m x --nodes 2 --node command --command true
  expect_exit 2 git mullet run -m x --node command:sonnet --node command --command true
  assert_contains "$ERR" "runs no model" "--node command:MODEL"
  expect_exit 2 git mullet run -m x --node command --node command --executor command --command true
  expect_exit 2 git mullet run -m x --node command --node command --model sonnet --command true
  expect_exit 2 git mullet run -m x --node nosuch --node command --command true
  # --dry-run: each node's plans, with its own directories.
  expect_exit 0 git mullet run -m x --nodes 2 --dry-run --command true
  assert_matches "$OUT" $'\nnode 2 \\(command\\)\n' "the plans of node 2"
  assert_matches "$OUT" "/mullet/work <- .*/mullet/jobs/NEW-JOB/nodes/2/work" "node 2's work tree"
  expect_exit 0 git mullet run -m x --node command --node command --dry-run --json --command true
  assert_eq "$(json_get "$OUT" '[.nodes[].number]')" '[1,2]' "dry-run --json"
  assert_eq "$(git for-each-ref refs/mullet)" "$before" "no job was made"
  # --node mixes: each node records its executor.
  run_job -m "mixed" --node command --node command --command 'echo "$MULLET_NODE" >n.txt'
  assert_eq "$RUN_CODE" 0
  assert_eq "$(json_get "$JOB_JSON" '[.nodes[].executor]')" '["command","command"]' "--node executors"
  assert_eq "$(json_get "$JOB_JSON" '.run_flags.nodes')" \
    '[{"run.executor":"command"},{"run.executor":"command"}]' "--node flags kept for resume"
}

test_sigkill_interrupts_every_node_and_each_resumes() {
  new_repo repo
  cd repo
  local m before
  m="$(marker)"
  user_config '[run]' 'executor = "command"' \
    "command = 'echo \$MULLET_NODE >node-\$MULLET_NODE.txt; echo hanging >hanging.txt; sleep $m'"
  before="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  git mullet run --json -q -m "hang" --nodes 3 >../bg.out 2>../bg.err &
  local pid=$!
  trap 'kill -TERM '"$pid"' 2>/dev/null || true' EXIT
  wait_until 15 new_job "$before"
  JOB="$(new_job "$before")"
  local n
  for n in 1 2 3; do
    wait_until 30 job_has "$(job_dir "$JOB")/nodes/$n" hanging.txt
  done
  expect_exit 2 git mullet resume "$JOB/1"
  assert_contains "$ERR" "running" "resume of a running job"
  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "now +[0-9a-z]+ so far, 3/3 running" "show of a running job"
  assert_matches "$OUT" $'\n  2 +command +running .*now: attempt 1 · worker' "show's line of a running node"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "[3/3 running] hang" "list of a running job"
  local runner
  runner="$(json_get "$(git mullet show --json "$JOB")" '.runner.pid')"
  kill -KILL "$runner"
  wait "$pid" || true
  trap - EXIT
  # Each node's worker goes with its sandbox.
  no_process_left "sleep $m"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" interrupted "the job"
  assert_eq "$(json_get "$OUT" '[.nodes[].state]')" '["interrupted","interrupted","interrupted"]' "its nodes"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$JOB  interrupted" "list"

  # The worker no longer hangs: node 2 alone first, then the rest.
  user_config '[run]' 'executor = "command"' "command = 'echo \$MULLET_NODE >node-\$MULLET_NODE.txt; ls >seen.txt'"
  expect_exit 0 git mullet resume -q "$JOB/2"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_get "$OUT" '[.nodes[].state]')" '["interrupted","succeeded","interrupted"]' "after resume JOB/2"
  assert_eq "$(json_field "$OUT" state)" succeeded "the job after resume JOB/2"
  expect_exit 2 git mullet resume "$JOB/2"
  assert_contains "$ERR" "node 2 of job $JOB is succeeded" "resume of a node that ended"
  expect_exit 0 git mullet resume -q "$JOB"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_get "$OUT" '[.nodes[].state]')" '["succeeded","succeeded","succeeded"]' "after resume JOB"
  for n in 1 2 3; do
    local result
    result="$(json_get "$OUT" ".nodes[$((n - 1))].result")"
    assert_eq "$(git cat-file blob "$result:node-$n.txt")" "$n" "node $n's file"
    assert_eq "$(git cat-file blob "$result:seen.txt" | tr '\n' ' ')" "README node-$n.txt seen.txt src " \
      "node $n's fresh clone"
  done
}

test_stop_cancels_every_node_and_shell_refuses_a_job_of_several() {
  new_repo repo
  cd repo
  local m before
  m="$(marker)"
  before="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  git mullet run --json -q -m "hang" --nodes 2 --command "echo \$MULLET_NODE >hanging.txt; sleep $m" \
    >../bg.out 2>../bg.err &
  local pid=$!
  trap 'kill -TERM '"$pid"' 2>/dev/null || true' EXIT
  wait_until 15 new_job "$before"
  JOB="$(new_job "$before")"
  wait_until 30 job_has "$(job_dir "$JOB")/nodes/1" hanging.txt
  wait_until 30 job_has "$(job_dir "$JOB")/nodes/2" hanging.txt
  expect_exit 0 timeout -k 5 60 git mullet stop --json "$JOB"
  assert_eq "$(json_field "$OUT" state)" cancelled "the job"
  assert_eq "$(json_get "$OUT" '[.nodes[].state]')" '["cancelled","cancelled"]' "its nodes"
  local n
  for n in 1 2; do
    assert_eq "$(git cat-file blob "$(json_get "$OUT" ".nodes[$((n - 1))].result"):hanging.txt")" "$n" \
      "node $n's snapshot"
  done
  wait "$pid" || true
  trap - EXIT
  no_process_left "sleep $m"
  expect_exit 2 git mullet shell "$JOB" -- true
  assert_contains "$ERR" "several nodes" "shell"
}

run_tests
