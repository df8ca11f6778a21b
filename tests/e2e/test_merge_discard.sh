#!/usr/bin/env bash
# `git mullet merge` makes one branch and stops; `git mullet discard` removes
# one job (scratch directory and ref) and nothing else, leaving a reflog trace.
source "$(dirname "$0")/../lib/harness.sh"

# start_long_job: a job whose worker sleeps, started in the background;
# waits until it is listed as running. Sets LONG_PID (the git we started)
# and LONG_JOB.
start_long_job() {
  git mullet run -q -m "long job" --command 'echo x >x; echo long-worker-started; sleep 30.5' >../long.out 2>../long.err &
  LONG_PID=$!
  wait_until 15 sh -c 'git mullet list | grep -q " running "'
  LONG_JOB="$(git mullet list | awk '$2 == "running" {print $1}')"
  wait_until 10 sh -c "git mullet log $LONG_JOB | grep -q long-worker-started"
}

# Never leave a sleeping job behind when a test fails.
stop_long_job() {
  if [ -n "${LONG_PID:-}" ] && kill -0 "$LONG_PID" 2>/dev/null; then
    kill "$LONG_PID" 2>/dev/null
    wait "$LONG_PID" 2>/dev/null
  fi
  return 0
}

test_merge_creates_a_branch_and_stops() {
  new_repo repo
  cd repo
  run_job -m "add a file" --command 'echo merged >merged.txt'
  local result
  result="$(json_field "$JOB_JSON" result)"
  # A dirty user repository: nothing of it may move.
  printf 'staged\n' >staged.txt
  git add staged.txt
  printf 'dirty\n' >>README
  printf 'untracked\n' >untracked.txt
  local before index_before
  before="$(user_state)"
  index_before="$(file_sha256 .git/index)"
  expect_exit 0 git mullet merge "$JOB"
  assert_contains "$OUT" "created branch mullet/$JOB"
  assert_eq "$(git rev-parse "refs/heads/mullet/$JOB")" "$result" "branch target"
  assert_eq "$(file_sha256 .git/index)" "$index_before" "the index file"
  local after
  after="$(user_state)"
  assert_eq "$(printf '%s\n' "$after" | grep -v "^refs/heads/mullet/$JOB ")" "$before" "everything but the new branch"
  assert_eq "$(git symbolic-ref HEAD)" refs/heads/main "HEAD"
  assert_absent merged.txt
  # The branch is an ordinary branch: the user's git can merge it.
  git stash -q -u
  git merge -q --no-edit "mullet/$JOB"
  assert_eq "$(cat merged.txt)" merged

  run_job -m "another" --command 'echo other >other.txt'
  expect_exit 0 git mullet merge "${JOB:0:6}" --branch feature/named
  assert_eq "$(git rev-parse feature/named)" "$(json_field "$JOB_JSON" result)" "--branch target"
  assert_eq "$(git for-each-ref --format=x "refs/heads/mullet/$JOB")" "" "default branch made too"
}

test_merge_refusals_change_nothing() {
  new_repo repo
  cd repo
  run_job -m "ok" --command 'echo ok >ok.txt'
  local good="$JOB" good_result
  good_result="$(json_field "$JOB_JSON" result)"
  run_job -m "failed with changes" --command 'echo half >half.txt; exit 1'
  local failed="$JOB" failed_result
  failed_result="$(json_field "$JOB_JSON" result)"
  run_job -m "nothing" --command true
  local unchanged="$JOB"
  run_job -m "failed without changes" --command 'exit 1'
  local failed_empty="$JOB"
  git branch taken
  local before traces
  before="$(user_state)"
  traces="$(mullet_traces)"

  expect_exit 2 git mullet merge "$good" --branch taken
  assert_contains "$ERR" "already exists"
  assert_clear_error
  assert_eq "$(git rev-parse taken)" "$(git rev-parse main)" "existing branch"
  expect_exit 2 git mullet merge "$good" --branch main
  assert_contains "$ERR" "already exists"
  expect_exit 2 git mullet merge "$failed"
  assert_contains "$ERR" "did not succeed"
  assert_clear_error
  expect_exit 2 git mullet merge "$unchanged"
  assert_contains "$ERR" "nothing to merge"
  assert_clear_error
  expect_exit 2 git mullet merge "$unchanged" --force
  assert_contains "$ERR" "nothing to merge"
  expect_exit 2 git mullet merge "$failed_empty" --force
  local bad
  for bad in 'a..b' 'ends.lock' 'with space' 'tilde~1' 'colon:x' 'star*' '/leading' 'trailing/' 'x/.hidden' '@{u}' 'HEAD' 'back\slash'; do
    expect_exit 2 git mullet merge "$good" --branch "$bad"
    assert_contains "$ERR" "not a valid branch name" "stderr for --branch '$bad'"
    assert_clear_error
  done
  assert_eq "$(user_state)" "$before" "the user's repository after refusals"
  assert_eq "$(mullet_traces)" "$traces" "mullet's records after refusals"

  # The positive controls: the same jobs merge when allowed.
  expect_exit 0 git mullet merge "$failed" --force
  assert_eq "$(git rev-parse "mullet/$failed")" "$failed_result"
  expect_exit 0 git mullet merge "$good" --branch 'valid/name-1.2'
  assert_eq "$(git rev-parse valid/name-1.2)" "$good_result"
  expect_exit 2 git mullet merge "$good" --branch 'valid/name-1.2'
}

# Creating the branch is atomic: of concurrent merges of one job into one
# branch name, exactly one creates it and the others say it exists.
test_concurrent_merges_create_the_branch_once() {
  new_repo repo
  cd repo
  run_job -m "add a file" --command 'echo merged >merged.txt'
  local result round i
  result="$(json_field "$JOB_JSON" result)"
  for round in 1 2 3 4 5; do
    for i in 1 2 3 4; do
      git mullet merge "$JOB" --branch "race-$round" >"$TEST_ROOT/out.$round.$i" 2>"$TEST_ROOT/err.$round.$i" &
    done
    local codes=() pid
    for pid in $(jobs -p); do
      wait "$pid"
      codes+=($?)
    done
    assert_eq "$(printf '%s\n' "${codes[@]}" | sort | tr '\n' ' ')" "0 2 2 2 " "exit codes of round $round"
    assert_eq "$(cat "$TEST_ROOT"/out.$round.* | grep -c '^created branch')" 1 "branches created in round $round"
    assert_eq "$(cat "$TEST_ROOT"/err.$round.* | grep -c "branch 'race-$round' already exists")" 3 \
      "'already exists' refusals in round $round"
    assert_eq "$(git rev-parse "race-$round")" "$result" "the branch of round $round"
  done
}

test_discard_removes_one_job_and_nothing_else() {
  new_repo repo
  mkdir precious
  printf 'keep me\n' >precious/file
  cd repo
  run_job -m "$PWD/../precious" --command 'echo a >a.txt; ln -s "$MULLET_PROMPT" escape; ln -s "$MULLET_PROMPT/file" escape-file;
    mkdir -p locked/sub && echo f >locked/sub/f && chmod 000 locked/sub && chmod 500 locked; echo x >"$HOME/in-home"'
  local gone="$JOB" gone_result gone_record
  gone_result="$(json_field "$JOB_JSON" result)"
  gone_record="$(git rev-parse "refs/mullet/jobs/$gone")"
  run_job -m "kept" --command 'echo b >b.txt'
  local kept="$JOB" kept_record
  kept_record="$(git rev-parse "refs/mullet/jobs/$kept")"
  expect_exit 0 git mullet merge "$gone"
  local gone_dir kept_dir
  gone_dir="$(job_dir "$gone")"
  kept_dir="$(job_dir "$kept")"
  [ -d "$gone_dir/work" ] || fail "no scratch directory to discard"
  [ -L "$(job_work "$gone_dir")/escape" ] || fail "the worker's symlink is missing"
  local before
  before="$(user_state)"

  expect_exit 0 git mullet discard "$gone"
  assert_contains "$OUT" "discarded job $gone"
  local restore
  restore="$(printf '%s\n' "$OUT" | grep -o 'git update-ref .*')"
  assert_absent "$gone_dir"
  assert_eq "$(git for-each-ref "refs/mullet/jobs/$gone")" "" "discarded job's ref"
  # Nothing else: the other job, the branch made from the discarded job,
  # whatever its symlinks pointed at, the user's repository.
  assert_eq "$(git rev-parse "refs/mullet/jobs/$kept")" "$kept_record" "the other job's ref"
  [ -d "$kept_dir/work" ] || fail "the other job's scratch directory is gone"
  assert_eq "$(cat ../precious/file)" "keep me" "a file the worker's symlink named"
  assert_eq "$(git rev-parse "mullet/$gone")" "$gone_result" "branch made from the discarded job"
  git cat-file -e "$gone_result" || fail "the merged result is gone"
  assert_eq "$(user_state)" "$before" "the user's repository"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$kept"
  assert_not_contains "$OUT" "$gone"

  # The trace: one reflog entry, naming the record commit.
  local trace
  trace="$(git reflog show --format='%H %gs' refs/mullet/discarded)"
  assert_eq "$trace" "$gone_record git-mullet discard $gone" "discard reflog"
  # What discard printed restores the job's record.
  assert_eq "$restore" "git update-ref refs/mullet/jobs/$gone $gone_record" "restore command"
  $restore
  expect_exit 0 git mullet show --json "$gone"
  assert_eq "$(json_field "$OUT" result)" "$gone_result" "restored job's result"
}

test_discard_again_and_merge_of_discarded_are_refused() {
  new_repo repo
  cd repo
  run_job -m "one" --command 'echo a >a'
  local id="$JOB"
  run_job -m "two" --command 'echo b >b'
  expect_exit 0 git mullet discard "$id"
  local traces
  traces="$(mullet_traces)"
  expect_exit 2 git mullet discard "$id"
  assert_contains "$ERR" "no job matches"
  assert_clear_error
  expect_exit 2 git mullet merge "$id"
  assert_contains "$ERR" "no job matches"
  assert_clear_error
  for command in show diff log; do
    expect_exit 2 git mullet "$command" "$id"
  done
  assert_eq "$(git for-each-ref refs/heads/mullet)" "" "branches made"
  assert_eq "$(mullet_traces)" "$traces" "records after refusals"
  # A second discard adds a second reflog entry.
  expect_exit 0 git mullet discard "$JOB"
  assert_eq "$(git reflog show refs/mullet/discarded | wc -l)" 2 "discard log entries"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "job refs"
}

test_discard_of_a_running_job_needs_force() {
  new_repo repo
  cd repo
  trap stop_long_job EXIT
  start_long_job
  local dir
  dir="$(job_dir "$LONG_JOB")"
  expect_exit 2 git mullet discard "$LONG_JOB"
  assert_contains "$ERR" "still running"
  assert_contains "$ERR" "--force"
  kill -0 "$LONG_PID" 2>/dev/null || fail "the refusal stopped the job"
  [ -d "$dir" ] || fail "the refusal removed the scratch directory"
  expect_exit 0 git mullet show --json "$LONG_JOB"
  assert_eq "$(json_field "$OUT" state)" running

  expect_exit 0 timeout 60 git mullet discard --force "$LONG_JOB"
  assert_contains "$OUT" "discarded job $LONG_JOB"
  assert_absent "$dir"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "job refs"
  # The run we started has ended, and so has its worker.
  wait_until 10 sh -c "! kill -0 $LONG_PID"
  local code=0
  wait "$LONG_PID" || code=$?
  [ "$code" -ne 0 ] || fail "a job stopped by discard --force exited 0"
  wait_until 10 sh -c "! pgrep -f '[l]ong-worker-started; sleep 30.5'"
  # And it left no record behind (the discard won).
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "job refs after the runner ended"
  assert_eq "$(git reflog show refs/mullet/discarded | wc -l)" 1 "discard log entries"
}

test_discard_of_an_interrupted_job_needs_no_force() {
  new_repo repo
  cd repo
  trap stop_long_job EXIT
  start_long_job
  local runner
  runner="$(json_get "$(git mullet show --json "$LONG_JOB")" '.runner.pid')"
  kill -KILL "$runner"
  wait "$LONG_PID" 2>/dev/null || true
  wait_until 10 sh -c "git mullet list | grep -q interrupted"
  expect_exit 0 git mullet discard "$LONG_JOB"
  assert_absent "$(job_dir "$LONG_JOB")"
}

run_tests
