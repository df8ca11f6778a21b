#!/usr/bin/env bash
# Job records: list, show, log and prefix lookup; records live in git
# (refs/mullet/jobs/*), so they survive losing the scratch directories, gc,
# and travel with `git push`; concurrent runs do not lose each other.
source "$(dirname "$0")/../lib/harness.sh"

ISO='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'

test_show_and_list_describe_the_job() {
  new_repo repo
  cd repo
  local prompt
  prompt="$(printf 'Add a greeting\n\nThe body of the task.')"
  run_job -m "$prompt" --command 'echo hi >greeting.txt; echo worker-output'
  local id="$JOB" base result
  base="$(git rev-parse HEAD)"
  result="$(json_field "$JOB_JSON" result)"
  assert_matches "$id" '^[0-9a-f]{10}$' "job id"

  expect_exit 0 git mullet show --json "$id"
  local json="$OUT"
  assert_eq "$(json_field "$json" id)" "$id"
  assert_eq "$(json_field "$json" state)" succeeded
  assert_eq "$(json_field "$json" base)" "$base"
  assert_eq "$(json_field "$json" result)" "$result"
  assert_eq "$(git rev-parse "$result^")" "$base" "result's parent"
  assert_eq "$(json_field "$json" executor)" command
  assert_eq "$(json_field "$json" executor_command)" 'echo hi >greeting.txt; echo worker-output'
  assert_eq "$(json_field "$json" title)" "Add a greeting"
  assert_eq "$(json_field "$json" prompt)" "$prompt"
  assert_eq "$(json_field "$json" error)" null
  assert_matches "$(json_field "$json" created_at)" "$ISO" created_at
  assert_matches "$(json_field "$json" finished_at)" "$ISO" finished_at
  [[ ! "$(json_field "$json" finished_at)" < "$(json_field "$json" created_at)" ]] || fail "finished before created"
  assert_eq "$(json_get "$json" '.phases | length')" 1 "phases"
  assert_eq "$(json_get "$json" '.phases[0].name')" worker
  assert_eq "$(json_get "$json" '.phases[0].exit_code')" 0
  assert_eq "$(json_get "$json" '.phases[0].ended_by')" exit
  assert_contains "$(json_get "$json" '.phases[0].output_tail')" worker-output
  # run --json and show --json agree.
  assert_eq "$(json_get "$json" 'to_entries | sort_by(.key)')" "$(json_get "$JOB_JSON" 'to_entries | sort_by(.key)')" "run --json vs show --json"

  expect_exit 0 git mullet show "$id"
  assert_contains "$OUT" "job       $id"
  assert_contains "$OUT" "title     Add a greeting"
  assert_contains "$OUT" "state     succeeded"
  assert_contains "$OUT" "base      $base"
  assert_contains "$OUT" "result    $result"
  assert_contains "$OUT" "executor  command: echo hi >greeting.txt"
  assert_contains "$OUT" "$(printf 'prompt:\n  Add a greeting')"
  assert_contains "$OUT" "  The body of the task."

  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | wc -l)" 1 "list lines"
  assert_matches "$OUT" "^$id  succeeded +[0-9smhd]+ +[0-9smhd]+ +- +\\+1 -0 +Add a greeting\$" "list line"

  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" 'length')" 1 "list --json entries"
  assert_eq "$(json_get "$OUT" '.[0].id')" "$id"
  assert_eq "$(json_get "$OUT" '.[0].state')" succeeded
  assert_eq "$(json_get "$OUT" '.[0].base')" "$base"
  assert_eq "$(json_get "$OUT" '.[0].result')" "$result"
  assert_eq "$(json_get "$OUT" '.[0].title')" "Add a greeting"
}

test_list_shows_every_state_newest_first() {
  new_repo repo
  cd repo
  # One right after the other: list shows the order they ran in (in
  # milliseconds, then by the repository's sequence).
  run_job -m "first: changes" --command 'echo a >a'
  local changed="$JOB"
  run_job -m "second: nothing" --command true
  local unchanged="$JOB"
  run_job -m "third: fails" --command 'exit 2'
  local failed="$JOB"
  expect_exit 0 git mullet list
  assert_eq "$(printf '%s\n' "$OUT" | awk '{print $1 " " $2}')" \
    "$(printf '%s failed\n%s no_changes\n%s succeeded' "$failed" "$unchanged" "$changed")" "list"
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '[.[].id]')" "[\"$failed\",\"$unchanged\",\"$changed\"]" "list --json order"
  assert_eq "$(json_get "$OUT" '[.[].result == null]')" "[true,true,false]" "results"
  expect_exit 0 git mullet diff "$unchanged"
  assert_eq "$OUT" "" "diff of a job without changes"
  assert_contains "$ERR" "no changes"
  expect_exit 0 git mullet diff "$changed"
  assert_contains "$OUT" "1 file changed"
  assert_contains "$OUT" "+++ b/a"
  expect_exit 0 git mullet show "$unchanged"
  assert_contains "$OUT" "result    none"
  assert_contains "$OUT" "no_changes"
  expect_exit 0 git mullet show "$failed"
  assert_contains "$OUT" "state     failed"
  assert_contains "$OUT" "error     "
  # An empty store lists nothing, successfully.
  new_repo ../empty
  cd ../empty
  expect_exit 0 git mullet list
  assert_eq "$OUT" "" "list of no jobs"
  expect_exit 0 git mullet list --json
  assert_eq "$(json_get "$OUT" '.')" "[]" "list --json of no jobs"
}

test_prefixes_unique_ambiguous_and_unknown() {
  new_repo repo
  cd repo
  jobs_until_shared_first_char
  local ids
  ids="$(git for-each-ref --format='%(refname:lstrip=3)' "refs/mullet/jobs/$SHARED*" | LC_ALL=C sort)"
  expect_exit 2 git mullet show "$SHARED"
  assert_contains "$ERR" ambiguous
  local id
  for id in $ids; do assert_contains "$ERR" "$id"; done
  for command in show diff log merge discard; do
    expect_exit 2 git mullet "$command" "$SHARED"
    assert_contains "$ERR" ambiguous "$command stderr"
  done
  # Every job is reachable by its full id and by its shortest unique prefix.
  local all length prefix
  all="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  for id in $all; do
    expect_exit 0 git mullet show --json "$id"
    assert_eq "$(json_field "$OUT" id)" "$id"
    for length in 1 2 3 4 5 6 7 8 9 10; do
      prefix="${id:0:$length}"
      [ "$(printf '%s\n' $all | grep -c "^$prefix")" -eq 1 ] && break
    done
    expect_exit 0 git mullet show --json "$prefix"
    assert_eq "$(json_field "$OUT" id)" "$id" "job found by prefix $prefix"
  done
  # Unknown ids, in every form.
  for unknown in 0000000000 ffffffffff0 zz "$SHARED"zzz; do
    expect_exit 2 git mullet show "$unknown"
    assert_contains "$ERR" "no job matches"
  done
}

test_log_shows_worker_output() {
  new_repo repo
  cd repo
  run_job -m "talk" --command 'echo to-stdout; echo to-stderr >&2; printf "no newline at end"'
  expect_exit 0 git mullet log "$JOB"
  assert_contains "$OUT" to-stdout
  assert_contains "$OUT" to-stderr
  assert_contains "$OUT" "no newline at end"
  run_job -m "fail loudly" --command 'echo about-to-fail; exit 5'
  expect_exit 0 git mullet log "$JOB"
  assert_contains "$OUT" about-to-fail
  run_job -m "silent" --command true
  expect_exit 0 git mullet log "$JOB"
  assert_eq "$OUT" "" "log of a silent worker"
}

test_records_survive_losing_scratch_directories() {
  new_repo repo
  cd repo
  run_job -m "add" --command 'echo added >added.txt; echo logged-line'
  local id="$JOB" result
  result="$(json_field "$JOB_JSON" result)"
  rm -rf .git/mullet
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$id  succeeded"
  expect_exit 0 git mullet show --json "$id"
  assert_eq "$(json_field "$OUT" result)" "$result"
  expect_exit 0 git mullet diff "$id"
  assert_contains "$OUT" "+added"
  assert_contains "$OUT" "added.txt"
  expect_exit 0 git mullet log "$id"
  assert_contains "$OUT" logged-line
  expect_exit 0 git mullet merge "$id"
  assert_eq "$(git rev-parse "mullet/$id")" "$result"
  expect_exit 0 git mullet discard "$id"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "job refs after discard"
}

test_gc_keeps_base_and_result() {
  new_repo repo
  cd repo
  # A base no branch reaches: only the job record keeps it.
  git checkout -qb throwaway
  printf 'throwaway\n' >README
  git commit -qam "throwaway base"
  local base
  base="$(git rev-parse HEAD)"
  git checkout -q main
  run_job --base "$base" -m "change" --command 'echo result >result.txt'
  local result
  result="$(json_field "$JOB_JSON" result)"
  git branch -qD throwaway
  # A control: an unreferenced commit that gc must prune.
  local dangling
  dangling="$(git commit-tree -m dangling "$(git rev-parse HEAD^{tree})")"
  git reflog expire --expire=now --all
  git gc -q --prune=now
  if git cat-file -e "$dangling" 2>/dev/null; then fail "gc did not prune (the control commit survived)"; fi
  git cat-file -e "$base" || fail "gc pruned the base"
  git cat-file -e "$result" || fail "gc pruned the result"
  git cat-file -e "$result:result.txt" || fail "gc pruned the result's blob"
  expect_exit 0 git mullet diff "$JOB"
  assert_contains "$OUT" "+result"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_field "$OUT" base)" "$base"
  # The job refs are packed now; list still reads them.
  grep -q "refs/mullet/jobs/$JOB" .git/packed-refs || fail "gc did not pack the job ref"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$JOB  succeeded"
  git fsck --no-dangling >/dev/null 2>&1 || fail "git fsck found problems"
}

test_push_carries_jobs_to_another_clone() {
  new_repo repo
  git init -q --bare remote.git
  cd repo
  run_job -m "shared work" --command 'echo shared >shared.txt; echo pushed-log'
  local id="$JOB" result
  result="$(json_field "$JOB_JSON" result)"
  git push -q ../remote.git main 'refs/mullet/*:refs/mullet/*'
  cd ..
  git clone -q remote.git other
  cd other
  expect_exit 0 git mullet list
  assert_eq "$OUT" "" "jobs before fetching refs/mullet"
  git fetch -q origin 'refs/mullet/*:refs/mullet/*'
  expect_exit 0 git mullet show --json "$id"
  assert_eq "$(json_field "$OUT" state)" succeeded
  assert_eq "$(json_field "$OUT" result)" "$result"
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$id  succeeded"
  expect_exit 0 git mullet diff "$id"
  assert_contains "$OUT" "+shared"
  expect_exit 0 git mullet log "$id"
  assert_contains "$OUT" pushed-log
  expect_exit 0 git mullet merge "$id"
  assert_eq "$(git cat-file blob "mullet/$id:shared.txt")" shared
}

# started_jobs COUNT: COUNT jobs exist and each one's worker has said
# "started".
started_jobs() {
  local ids id
  ids="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  [ "$(printf '%s\n' "$ids" | grep -c .)" -eq "$1" ] || return 1
  for id in $ids; do grep -q started "$(job_dir "$id")/worker.log" 2>/dev/null || return 1; done
}

test_concurrent_runs_all_complete() {
  new_repo repo
  cd repo
  local pids="" n id
  # Each worker waits for a file in its home, so all four are running at once.
  for n in 1 2 3 4; do
    git mullet run --json -q -m "job $n" \
      --command "echo started; while [ ! -e \"\$HOME/go\" ]; do sleep 0.1; done; echo $n >file-$n.txt" \
      >"../out-$n.json" 2>"../err-$n.txt" &
    pids="$pids $!"
  done
  # Should the test fail, the waiting jobs are cancelled (git forwards SIGTERM).
  trap 'kill -TERM '"$pids"' 2>/dev/null || true' EXIT
  wait_until 120 started_jobs 4
  for id in $(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs); do touch "$(job_home "$(job_dir "$id")")/go"; done
  n=0
  for pid in $pids; do
    n=$((n + 1))
    wait "$pid" || fail "concurrent run $n failed: $(cat "../err-$n.txt")"
  done
  expect_exit 0 git mullet list --json
  local list="$OUT"
  assert_eq "$(json_get "$list" 'length')" 4 "jobs listed"
  for n in 1 2 3 4; do
    local json id result
    json="$(cat "../out-$n.json")"
    id="$(json_field "$json" id)"
    result="$(json_field "$json" result)"
    assert_eq "$(json_field "$json" state)" succeeded "job $n"
    assert_eq "$(json_get "$list" "[.[] | select(.id == \"$id\") | .state]")" "[\"succeeded\"]" "job $n in list"
    assert_eq "$(json_get "$list" "[.[] | select(.id == \"$id\") | .result]")" "[\"$result\"]" "job $n result in list"
    assert_eq "$(git ls-tree --name-only "$result" | grep '^file-')" "file-$n.txt" "job $n's own file only"
  done
}

test_a_job_whose_runner_died_is_interrupted() {
  new_repo repo
  cd repo
  git mullet run -q -m "long" --command 'echo started; sleep 30' >/dev/null 2>&1 &
  local started=$!
  wait_until 10 sh -c 'git mullet list | grep -q running'
  local id runner
  id="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs)"
  expect_exit 0 git mullet show --json "$id"
  assert_eq "$(json_field "$OUT" state)" running
  assert_eq "$(json_field "$OUT" result)" null
  assert_eq "$(json_field "$OUT" finished_at)" null
  runner="$(json_get "$OUT" '.runner.pid')"
  # The runner is a child of the git we started.
  assert_eq "$(ps -o ppid= -p "$runner" | tr -d ' ')" "$started" "runner's parent"
  wait_until 10 sh -c "git mullet log $id | grep -q started"
  kill -KILL "$runner"
  wait "$started" 2>/dev/null || true
  expect_exit 0 git mullet show --json "$id"
  assert_eq "$(json_field "$OUT" state)" interrupted
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$id  interrupted"
  # The sandbox died with its runner.
  wait_until 10 sh -c "! pgrep -f '[e]cho started; sleep 30'"
}

run_tests
