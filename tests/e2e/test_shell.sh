#!/usr/bin/env bash
# `git mullet shell JOB`: a shell in a sandbox over the job's last snapshot.
# Without a terminal its stdin is piped in; without --record nothing of what
# it changes reaches the job; with --record its tree becomes a new attempt
# (kind "shell") whose commit's parent is the previous result, which merge
# then takes. The tree is a fresh checkout of the snapshot, never the job's
# live work tree; a running job is refused.
source "$(dirname "$0")/../lib/harness.sh"

record() { git mullet show --json "$1"; }

# A job whose result holds one.txt.
one_job() {
  new_repo repo
  cd repo
  run_job -m "write one" --command 'echo one >one.txt'
  assert_eq "$RUN_CODE" 0 "run's exit code"
}

test_piped_commands_run_in_the_snapshot_and_change_nothing_without_record() {
  one_job
  local before
  before="$(record "$JOB")"
  expect_exit 0 timeout -k 5 60 sh -c "printf 'echo hi >new.txt; cat one.txt; pwd; exit\n' | git mullet shell $JOB"
  assert_contains "$OUT" "one" "the shell's output (the snapshot's one.txt)"
  assert_contains "$OUT" "/mullet/work" "the shell's working directory"
  assert_contains "$ERR" "job $JOB is unchanged"
  assert_eq "$(record "$JOB")" "$before" "the record after a shell without --record"
  # Its directory is gone.
  local left
  left="$(find "$(job_dir "$JOB")" -maxdepth 1 -name 'shell-*')"
  assert_eq "$left" "" "shell directories left behind"
}

test_record_makes_a_shell_attempt_that_merge_takes() {
  one_job
  local previous
  previous="$(json_field "$(record "$JOB")" result)"
  expect_exit 0 timeout -k 5 60 sh -c "printf 'echo hi >new.txt\n' | git mullet shell --record $JOB"
  assert_contains "$ERR" "recorded as attempt 2 of job $JOB"
  local json result
  json="$(record "$JOB")"
  result="$(json_field "$json" result)"
  [ "$result" != "$previous" ] || fail "the result did not move"
  assert_eq "$(json_get "$json" '.attempts | length')" 2 "attempts"
  assert_eq "$(json_get "$json" '.attempts[1].kind')" shell "the new attempt's kind"
  assert_eq "$(json_get "$json" '.attempts[0].kind')" worker "the worker's attempt's kind"
  assert_eq "$(json_get "$json" '.attempts[1].result')" "$result" "the new attempt's result"
  assert_eq "$(git rev-parse "$result^")" "$previous" "the shell attempt's parent"
  assert_eq "$(git show "$result:new.txt")" hi "new.txt in the shell's snapshot"
  assert_eq "$(git show "$result:one.txt")" one "one.txt in the shell's snapshot"
  assert_eq "$(json_field "$json" state)" succeeded "state"
  assert_contains "$(git mullet show "$JOB")" "2  ${result:0:12}  (git mullet shell --record)" "show's attempts"
  git log -1 --format=%B "$result" | grep -F 'Mullet-Kind: shell' >/dev/null || fail "no Mullet-Kind trailer"
  # The record, with its shell attempt, is what the schema says.
  printf '%s' "$json" | python3 "$HARNESS_DIR/validate_json.py" \
    "$HARNESS_DIR/../../docs/json-schema/git-mullet.schema.json" job ||
    fail "the record with a shell attempt does not validate against the schema"
  expect_exit 0 git mullet merge "$JOB"
  assert_eq "$(git show "mullet/$JOB:new.txt")" hi "new.txt on the merged branch"
}

test_record_of_an_unchanged_tree_records_nothing() {
  one_job
  local before
  before="$(record "$JOB")"
  expect_exit 0 timeout -k 5 60 sh -c "printf 'cat one.txt >/dev/null\n' | git mullet shell --record $JOB"
  assert_contains "$ERR" "the shell changed nothing"
  assert_eq "$(record "$JOB")" "$before" "the record"
}

test_record_on_a_job_without_changes_gives_it_a_result() {
  new_repo repo
  cd repo
  run_job -m "nothing" --command 'true'
  assert_eq "$(json_field "$JOB_JSON" state)" no_changes
  expect_exit 0 timeout -k 5 60 git mullet shell --record "$JOB" -- sh -c 'echo made >made.txt'
  local json
  json="$(record "$JOB")"
  assert_eq "$(json_field "$json" state)" succeeded "state"
  local result
  result="$(json_field "$json" result)"
  assert_eq "$(git rev-parse "$result^")" "$(json_field "$json" base)" "the parent of the first result"
  assert_eq "$(git show "$result:made.txt")" made
}

test_record_of_a_tree_back_at_the_base_leaves_no_result() {
  one_job
  expect_exit 0 timeout -k 5 60 git mullet shell --record "$JOB" -- rm one.txt
  assert_contains "$ERR" "recorded as attempt 2 of job $JOB (no changes against its base)"
  local json
  json="$(record "$JOB")"
  assert_eq "$(json_field "$json" result)" null "result"
  assert_eq "$(json_field "$json" state)" no_changes "state"
  assert_eq "$(json_get "$json" '.attempts[1].kind')" shell "the new attempt's kind"
}

test_a_command_after_dashes_and_its_exit_status() {
  one_job
  expect_exit 0 timeout -k 5 60 git mullet shell "$JOB" -- cat one.txt
  assert_eq "$OUT" one "cat's output"
  expect_exit 1 timeout -k 5 60 git mullet shell "$JOB" -- sh -c 'exit 7'
  assert_contains "$ERR" "7" "the exit status said"
}

test_the_tree_is_the_snapshot_not_the_live_work_tree() {
  one_job
  # What a worker could have left unsnapshotted in the job's work tree.
  local work
  work="$(job_work "$(job_dir "$JOB")")"
  if [ -d "$work" ]; then
    echo planted >"$work/planted.txt"
  fi
  expect_exit 0 timeout -k 5 60 git mullet shell "$JOB" -- ls -a
  assert_contains "$OUT" "one.txt"
  assert_not_contains "$OUT" "planted.txt" "the shell's tree"
}

test_a_running_job_is_refused() {
  new_repo repo
  cd repo
  trap 'for id in $(git for-each-ref --format="%(refname:lstrip=3)" refs/mullet/jobs 2>/dev/null); do
    git mullet discard --force "$id" >/dev/null 2>&1 || true; done' EXIT
  expect_exit 0 timeout -k 5 60 git mullet run --detach -m wait \
    --command 'echo started; while [ ! -e "$HOME/go" ]; do sleep 0.1; done'
  local id="$OUT"
  wait_until 60 grep -q started "$(job_dir "$id")/worker.log"
  expect_exit 2 timeout -k 5 60 git mullet shell "$id" -- true
  assert_contains "$ERR" "is running"
  assert_contains "$ERR" "git mullet wait $id"
  touch "$(job_home "$(job_dir "$id")")/go"
  expect_exit 0 timeout -k 5 60 git mullet wait -q "$id"
}

test_an_unknown_job_is_a_usage_error() {
  new_repo repo
  cd repo
  expect_exit 2 git mullet shell 0123456789 -- true
}

run_tests
