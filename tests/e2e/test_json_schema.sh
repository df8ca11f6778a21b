#!/usr/bin/env bash
# The JSON git-mullet prints is a contract: docs/json-schema/git-mullet.schema.json
# describes every field, and what real jobs print (run, show, wait, stop,
# list, run --detach; command and Claude Code workers; succeeded, failed,
# no_changes, cancelled, running, damaged) must validate against it.
source "$(dirname "$0")/../lib/harness.sh"
source "$HARNESS_DIR/claude_api.sh"

SCHEMA="$HARNESS_DIR/../../docs/json-schema/git-mullet.schema.json"
VALIDATE="$HARNESS_DIR/validate_json.py"

# valid DEFINITION JSON [WHAT]: JSON validates against $defs/DEFINITION.
valid() {
  local problems
  problems="$(printf '%s' "$2" | python3 "$VALIDATE" "$SCHEMA" "$1" 2>&1)" ||
    fail "${3:-$1} does not follow the schema: $problems"
}

# The control: the validator rejects what the schema does not describe.
test_the_validator_rejects_what_the_schema_does_not_describe() {
  new_repo repo
  cd repo
  run_job -m "a job" --command 'echo a >a'
  valid job "$JOB_JSON" "run --json"
  local bad
  for bad in '.extra = 1' '.state = "finished"' '.created_at = "yesterday"' '.changes.files = -1' \
    '.phases[0].ended_by = "gone"' 'del(.sequence)'; do
    if printf '%s' "$JOB_JSON" | jq "$bad" | python3 "$VALIDATE" "$SCHEMA" job 2>/dev/null; then
      fail "a record changed by '$bad' still validates"
    fi
  done
}

test_command_jobs_in_every_state_follow_the_schema() {
  new_repo repo
  cd repo
  run_job -m "passes its gate" --command 'echo a >a' --gate 'test -e a'
  valid job "$JOB_JSON" "run --json (succeeded)"
  local succeeded="$JOB"
  run_job -m "fails its gate twice" --command 'echo b >>b' --gate 'test -e never' --attempts 2
  valid job "$JOB_JSON" "run --json (failed gate, two attempts)"
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 2 "attempts"
  run_job -m "changes nothing" --command true --setup 'echo setting up'
  valid job "$JOB_JSON" "run --json (no_changes, with setup)"
  run_job -m "fails" --command 'exit 4'
  valid job "$JOB_JSON" "run --json (failed)"

  expect_exit 0 git mullet show --json "$succeeded"
  valid job "$OUT" "show --json"
  expect_exit 0 git mullet wait --json "$succeeded"
  valid job "$OUT" "wait --json"
  expect_exit 0 git mullet list --json
  valid list "$OUT" "list --json"
  assert_eq "$(json_get "$OUT" 'length')" 4 "jobs listed"

  # Running, then stopped.
  expect_exit 0 git mullet run --detach --json -m "waits" --command 'echo started; while :; do sleep 0.1; done'
  valid detached "$OUT" "run --detach --json"
  local running
  running="$(json_field "$OUT" id)"
  wait_until 60 sh -c "git mullet show --json $running | jq -e '.progress.phase == \"worker\"'"
  expect_exit 0 git mullet show --json "$running"
  valid job "$OUT" "show --json (running)"
  expect_exit 0 git mullet list --json
  valid list "$OUT" "list --json (one running)"
  expect_exit 0 timeout -k 5 60 git mullet stop --json "$running"
  valid job "$OUT" "stop --json"
  assert_eq "$(json_field "$OUT" state)" cancelled

  # A damaged record is listed as such.
  local base blob tree commit
  base="$(git rev-parse HEAD)"
  blob="$(printf '{}' | git hash-object -w --stdin)"
  tree="$(printf '100644 blob %s\tjob.json\n' "$blob" | git mktree)"
  commit="$(printf 'git-mullet job x: failed\n\nnot json\n' | git commit-tree "$tree" -p "$base")"
  git update-ref refs/mullet/jobs/ddddddddd0 "$commit"
  expect_exit 0 git mullet list --json
  valid list "$OUT" "list --json (with a damaged record)"
  assert_eq "$(json_get "$OUT" '[.[] | select(.state == "damaged")] | length')" 1 "damaged jobs listed"
}

test_a_job_of_several_nodes_follows_the_schema() {
  new_repo repo
  cd repo
  run_job -m "nodes" --node command --node command --command 'echo "$MULLET_NODE" >n; [ "$MULLET_NODE" = 1 ] || echo x >x' \
    --gate 'test ! -e x'
  valid job "$JOB_JSON" "run --json (nodes, one failed its gate)"
  assert_eq "$(json_get "$JOB_JSON" '.nodes | length')" 2 "nodes"
  assert_eq "$(json_get "$JOB_JSON" '.chosen_node')" 1 "chosen node"
  expect_exit 0 git mullet show --json "$JOB"
  valid job "$OUT" "show --json (nodes)"
  expect_exit 0 git mullet show --json "$JOB/2"
  valid job "$OUT" "show --json JOB/2"
  expect_exit 0 git mullet list --json
  valid list "$OUT" "list --json (nodes)"
  assert_eq "$(json_get "$OUT" '.[0].nodes | length')" 2 "list --json nodes"
  local bad
  for bad in '.nodes[0].number = 0' '.nodes[1].state = "won"' '.nodes[0].extra = 1' '.nodes = [.nodes[0]]'; do
    if printf '%s' "$JOB_JSON" | jq "$bad" | python3 "$VALIDATE" "$SCHEMA" job 2>/dev/null; then
      fail "a record changed by '$bad' still validates"
    fi
  done
}

test_a_claude_job_follows_the_schema() {
  scratch
  start_api "$(script \
    "$(write_turn write /mullet/work/hello.txt "$(printf 'hello\n')")" \
    "$(done_turn "wrote hello.txt")")"
  claude_config ""
  new_repo repo
  cd repo
  run_job -m "write hello.txt"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded "$JOB_JSON"
  valid job "$JOB_JSON" "run --json (claude)"
  assert_eq "$(json_get "$JOB_JSON" '.report.status')" done "report"
  [ "$(json_get "$JOB_JSON" '.phases[0].api')" != null ] || fail "no credential endpoint account to validate"
  expect_exit 0 git mullet list --json
  valid list "$OUT" "list --json (claude)"
}

run_tests
