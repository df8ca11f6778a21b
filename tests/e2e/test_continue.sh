#!/usr/bin/env bash
# Talking back: `run --continue JOB -m TEXT` runs more attempts of a job that
# ended, from its last snapshot, with the job's task, the earlier
# instructions and the new one in the prompt; the attempts chain as commits
# and the record keeps each instruction. A running job, an unknown one and
# flags that would change the job are refused before anything runs.
source "$(dirname "$0")/../lib/harness.sh"

# A worker that keeps every prompt it got and adds a line to a file, so the
# test sees what it was told and that it started from the last result.
KEEPING_WORKER='n=$(ls prompts 2>/dev/null | wc -l); mkdir -p prompts; printf "%s" "$MULLET_PROMPT" >prompts/$n.txt; echo "attempt $n" >>notes.txt'

test_continue_runs_a_new_attempt_from_the_last_result() {
  new_repo repo
  cd repo
  run_job -m "write notes" --command "$KEEPING_WORKER"
  assert_eq "$RUN_CODE" 0 "first run"
  local first_result
  first_result="$(json_field "$JOB_JSON" result)"

  expect_exit 0 git mullet run --continue "$JOB" -m "now add a second line" --json -q
  assert_eq "$(json_field "$OUT" id)" "$JOB" "the same job"
  assert_eq "$(json_field "$OUT" state)" succeeded
  assert_eq "$(json_get "$OUT" '.attempts | length')" 2 "attempts"
  assert_eq "$(json_get "$OUT" '.attempts[0].instruction')" null "the first attempt's instruction"
  assert_eq "$(json_get "$OUT" '.attempts[1].instruction')" "now add a second line" "the new attempt's instruction"
  local result
  result="$(json_field "$OUT" result)"
  assert_eq "$(json_get "$OUT" '.attempts[1].result')" "$result" "the job's result is the new attempt's"
  assert_eq "$(git rev-parse "$result^")" "$first_result" "the new attempt's parent is the old result"
  # It started from the old result, and its prompt holds the task and the instruction.
  assert_eq "$(git cat-file blob "$result:notes.txt")" $'attempt 0\nattempt 1' "notes.txt"
  local prompt
  prompt="$(git cat-file blob "$result:prompts/1.txt")"
  assert_contains "$prompt" "write notes" "the task in the new prompt"
  assert_contains "$prompt" "now add a second line" "the instruction in the new prompt"
  assert_contains "$prompt" "the work tree holds the result so far" "the new prompt"
  assert_not_contains "$(git cat-file blob "$result:prompts/0.txt")" "second line" "the first prompt"

  expect_exit 0 git mullet show "$JOB"
  assert_contains "$OUT" "continued: now add a second line" "show"

  # A second instruction: the first is in its prompt as already worked on.
  expect_exit 0 git mullet run --continue "${JOB:0:6}" -m "and a third" --json -q
  assert_eq "$(json_get "$OUT" '.attempts | length')" 3 "attempts after the second continue"
  prompt="$(git cat-file blob "$(json_field "$OUT" result):prompts/2.txt")"
  assert_contains "$prompt" "now add a second line" "the earlier instruction"
  assert_contains "$prompt" "and a third" "the newest instruction"
  assert_contains "$prompt" "already worked on" "the earlier instruction, as done"
}

test_continue_turns_a_failed_job_around_with_its_own_gate() {
  new_repo repo
  cd repo
  # The gate was a flag of the first run: continuing replays it.
  run_job -m "make it pass" --gate 'test -f fixed' \
    --command 'if printf "%s" "$MULLET_PROMPT" | grep -q "create the file fixed"; then touch fixed; fi; echo tried >>log.txt'
  assert_eq "$RUN_CODE" 1 "first run"
  assert_eq "$(json_field "$JOB_JSON" state)" failed

  expect_exit 1 git mullet run --continue "$JOB" -m "the gate wants a file; do not create it" --json -q
  assert_eq "$(json_field "$OUT" state)" failed "the gate still fails"
  assert_eq "$(json_get "$OUT" '.attempts[1].gates[0].passed')" false "the replayed gate"

  expect_exit 0 git mullet run --continue "$JOB" -m "create the file fixed" --json -q
  assert_eq "$(json_field "$OUT" state)" succeeded
  assert_eq "$(json_get "$OUT" '.attempts | length')" 3 "attempts"
  assert_eq "$(json_get "$OUT" '.attempts[2].gates[0].passed')" true "the gate of the last attempt"
  assert_eq "$(git cat-file blob "$(json_field "$OUT" result):log.txt")" $'tried\ntried\ntried' "log.txt"
  expect_exit 0 git mullet merge "$JOB"
  assert_eq "$(git show "mullet/$JOB:fixed")" "" "the merged branch has the file"
}

test_continue_reads_the_instruction_from_a_file_and_prints_the_outcome() {
  new_repo repo
  cd repo
  run_job -m "write notes" --command "$KEEPING_WORKER"
  printf 'from a file\nwith two lines\n' >../instruction.txt
  expect_exit 0 git mullet run --continue "$JOB" -F ../instruction.txt -q
  assert_contains "$OUT" "job $JOB succeeded" "the closing lines"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_get "$OUT" '.attempts[1].instruction')" $'from a file\nwith two lines' "the instruction"
}

test_continue_detached() {
  new_repo repo
  cd repo
  run_job -m "write notes" --command "$KEEPING_WORKER"
  expect_exit 0 timeout -k 5 60 git mullet run --continue "$JOB" -m "again, in the background" --detach
  assert_eq "$OUT" "$JOB" "what --detach printed"
  expect_exit 0 timeout -k 5 120 git mullet wait --json "$JOB"
  assert_eq "$(json_get "$OUT" '.attempts | length')" 2 "attempts"
  assert_eq "$(json_get "$OUT" '.attempts[1].instruction')" "again, in the background"
}

test_continue_refuses_what_it_cannot_take() {
  new_repo repo
  cd repo
  expect_exit 2 git mullet run --continue 0123456789 -m "hello"
  assert_contains "$ERR" "0123456789" "the unknown job named"

  run_job -m "write notes" --command "$KEEPING_WORKER"
  local before
  before="$(git rev-parse "refs/mullet/jobs/$JOB")"
  expect_exit 2 git mullet run --continue "$JOB"
  assert_contains "$ERR" "no task given"
  # What would change the job is not taken with it, each flag named.
  for flag in "--base HEAD" "--executor command" "--command true" "--title x" "--setup true" "--gate true" \
    "--attempts 2" "--dry-run"; do
    # shellcheck disable=SC2086
    expect_exit 2 git mullet run --continue "$JOB" -m "x" $flag
    assert_contains "$ERR" "${flag%% *}" "the refusal of $flag"
    assert_eq "$(printf '%s\n' "$ERR" | wc -l)" 1 "one line for $flag"
  done
  assert_eq "$(git rev-parse "refs/mullet/jobs/$JOB")" "$before" "the record, after the refusals"

  # A running job is not continued; it is offered only once it ended.
  expect_exit 0 timeout -k 5 60 git mullet run --detach -m "wait" --command 'echo started; while :; do sleep 0.1; done'
  RUNNING="$OUT"
  local running="$RUNNING"
  trap 'git mullet stop "$RUNNING" >/dev/null 2>&1 || true' EXIT
  expect_exit 2 git mullet run --continue "$running" -m "more"
  assert_contains "$ERR" "still running" "the refusal"
  assert_contains "$ERR" "git mullet wait $running" "the hint"
  expect_exit 0 git mullet __complete-jobs continue
  assert_contains "$OUT" "$JOB" "an ended job is offered"
  assert_not_contains "$OUT" "$running" "a running job is not offered"
  expect_exit 0 timeout -k 5 60 git mullet stop "$running"
  expect_exit 0 git mullet __complete-jobs continue
  assert_contains "$OUT" "$running" "a cancelled job is offered"
}

run_tests
