#!/usr/bin/env bash
# Forged job records. Records travel with `git fetch 'refs/mullet/*'`, so a
# record commit is hostile input: each test writes one by hand (git
# hash-object, mktree, commit-tree, update-ref, as a fetch would leave it)
# from a real job's record with one field changed. Every command that reads
# it (show, diff, merge, log, resume, wait) refuses with exit 2 naming the
# damaged field; nothing is written anywhere (no file, no branch, no job
# run); `list` still works and shows the job as damaged.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

RUN_JOB_BOUND=60

# real_job: a repository `repo` (the current directory after) with one
# succeeded job, $JOB, whose result adds done.txt.
real_job() {
  new_repo repo
  cd repo
  run_job -m "a real job" --command 'echo done >done.txt'
  assert_eq "$RUN_CODE" 0 "the real job"
  BASE="$(git rev-parse HEAD)"
  RESULT="$(json_field "$JOB_JSON" result)"
  REAL_RECORD="$(git rev-parse "refs/mullet/jobs/$JOB")"
}

# forge ID PYTHON [PARENT...]: replaces the job's record commit by one whose
# job.json is the real one's with the Python statement applied to `r` (the
# summary line follows it). Parents default to the base and the result.
forge() {
  local id="$1" change="$2"
  shift 2
  local parents=("$@")
  [ "${#parents[@]}" -gt 0 ] || parents=("$BASE" "$RESULT")
  local dir="$TEST_ROOT/forge.$RANDOM"
  mkdir -p "$dir"
  git cat-file blob "$REAL_RECORD:job.json" >"$dir/in.json"
  python3 - "$change" "$dir" <<'PY' || fail "the forgery script failed"
import json, sys
change, out = sys.argv[1], sys.argv[2]
r = json.load(open(out + "/in.json"))
exec(change)
open(out + "/job.json", "w").write(json.dumps(r, allow_nan=True))
keys = ["format", "id", "title", "state", "base", "result", "executor", "created_at", "finished_at", "error", "runner"]
open(out + "/summary", "w").write(json.dumps({k: r.get(k) for k in keys}, allow_nan=True))
PY
  forge_tree "$id" "$(cat "$dir/summary")" "$(printf '100644 blob %s\tjob.json\n' "$(git hash-object -w "$dir/job.json")")" \
    "${parents[@]}"
  rm -rf "$dir"
}

# forge_tree ID SUMMARY TREE-LINES PARENT...: the record commit with this
# tree (mktree input) and this summary line.
forge_tree() {
  local id="$1" summary="$2" lines="$3"
  shift 3
  local tree commit args=() parent
  tree="$(printf '%s\n' "$lines" | git mktree)" || fail "mktree"
  for parent in "$@"; do args+=(-p "$parent"); done
  # Through a file: a forged summary may be larger than an argument may be.
  printf 'git-mullet job %s: succeeded\n\n%s\n' "$id" "$summary" >"$TEST_ROOT/message"
  commit="$(git commit-tree "$tree" "${args[@]}" -F "$TEST_ROOT/message")" || fail "commit-tree"
  git update-ref "refs/mullet/jobs/$id" "$commit"
}

# every_reader_refuses ID FIELD [LIST]: show, diff, merge, log, resume and
# wait all exit 2 with one clear message naming FIELD; nothing of the user's
# changed, no branch appeared, nothing ran; list still lists the job, as
# damaged when FIELD is in the summary line it reads (LIST=listed when the
# field is well-formed there and only names an object of the wrong type).
every_reader_refuses() {
  local id="$1" field="$2" list="${3:-}" before command
  before="$(sec_repo_state)"
  for command in "show" "show --json" "diff" "merge" "log" "resume -q" "wait"; do
    # shellcheck disable=SC2086
    expect_exit 2 timeout 60 git mullet $command "$id"
    assert_clear_error
    assert_contains "$ERR" "job $id is damaged: $field" "git mullet $command"
    assert_not_contains "$OUT" "created branch" "git mullet $command"
  done
  sec_assert_same "the user's repository" "$before" "$(sec_repo_state)"
  [ -z "$(git for-each-ref refs/heads/mullet)" ] || fail "a branch was created: $(git for-each-ref refs/heads/mullet)"
  # list reads only the summary line: it shows the damage when the field is
  # there, and lists the job either way.
  expect_exit 0 git mullet list --json
  local listed
  listed="$(json_get "$OUT" ".[] | select(.id == \"$id\") | .state")"
  expect_exit 0 git mullet list
  case "$OUT" in *$'\x1b'*) fail "list printed an escape sequence" ;; esac
  [ "${#OUT}" -lt 100000 ] || fail "list printed ${#OUT} bytes"
  [ -n "$list" ] || case "$field" in
    id | title | state | base | result | executor | error | format | runner.*) list=damaged ;;
    *) list=listed ;;
  esac
  case "$list" in
    damaged)
      assert_matches "$OUT" "^$id  damaged +(- +)+$field" "list line"
      assert_eq "$listed" damaged "list --json"
      ;;
    *) assert_contains "$OUT" "$id  " "list" ;;
  esac
}

test_base_that_is_an_option_writes_no_file() {
  real_job
  local target="$TEST_ROOT/written-by-diff"
  forge "$JOB" "r['base'] = '--output=$target'"
  expect_exit 2 git mullet diff "$JOB"
  assert_absent "$target"
  every_reader_refuses "$JOB" base
  assert_absent "$target"
}

test_result_that_is_an_option_writes_no_file() {
  real_job
  local target="$TEST_ROOT/written-by-diff"
  forge "$JOB" "r['result'] = '--output=$target'"
  expect_exit 2 git mullet diff "$JOB"
  assert_absent "$target"
  every_reader_refuses "$JOB" result
  assert_absent "$target"
}

test_revisions_that_are_not_hex_are_refused() {
  real_job
  forge "$JOB" "r['result'] = 'HEAD'"
  every_reader_refuses "$JOB" result
  forge "$JOB" "r['base'] = '${BASE^^}'"
  every_reader_refuses "$JOB" base
  forge "$JOB" "r['base'] = '${BASE:0:12}'"
  every_reader_refuses "$JOB" base
}

test_a_tree_or_blob_in_place_of_a_commit_is_refused() {
  real_job
  local tree blob
  tree="$(git rev-parse "$RESULT^{tree}")"
  blob="$(git rev-parse "$RESULT:done.txt")"
  # As parents the real commits (git commit-tree insists); the record names
  # a tree, which merge would make a branch of.
  forge "$JOB" "r['result'] = '$tree'"
  every_reader_refuses "$JOB" result listed
  forge "$JOB" "r['base'] = '$blob'"
  every_reader_refuses "$JOB" base listed
  forge "$JOB" "r['attempts'] = [{'number': 1, 'result': '$tree', 'error': None, 'gates': []}]"
  every_reader_refuses "$JOB" "attempts[0].result"
}

test_a_record_whose_parents_are_not_its_base_and_result_is_refused() {
  real_job
  # Valid commits, but not what gc keeps for this record.
  forge "$JOB" "r['result'] = '$BASE'" "$BASE" "$RESULT"
  every_reader_refuses "$JOB" "base/result"
}

test_a_job_of_several_nodes_is_checked_node_by_node() {
  new_repo repo
  cd repo
  run_job -m "two nodes" --nodes 2 --command 'echo "$MULLET_NODE" >n.txt'
  assert_eq "$RUN_CODE" 0 "the real job"
  BASE="$(git rev-parse HEAD)"
  RESULT="$(json_field "$JOB_JSON" result)"
  REAL_RECORD="$(git rev-parse "refs/mullet/jobs/$JOB")"
  local second
  second="$(json_get "$JOB_JSON" '.nodes[1].result')"
  assert_eq "$(git rev-list --parents -n 1 "$REAL_RECORD" | cut -d' ' -f2-)" "$BASE $RESULT $second" "the real parents"
  # A node's result gc would not keep (not among the record commit's parents).
  forge "$JOB" "pass" "$BASE" "$RESULT"
  every_reader_refuses "$JOB" "base/result"
  # The job's result is none of its nodes'.
  forge "$JOB" "r['nodes'][0]['result'] = '$second'" "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "result" listed
  forge "$JOB" "r['nodes'] = r['nodes'] * 9" "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "nodes"
  forge "$JOB" "r['nodes'] = r['nodes'][:1]" "$BASE" "$RESULT"
  every_reader_refuses "$JOB" "nodes"
  forge "$JOB" "r['nodes'][1]['number'] = 1" "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "nodes[1].number"
  forge "$JOB" "r['nodes'][0]['state'] = 'won'" "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "nodes[0].state"
  forge "$JOB" "r['nodes'][1]['executor_model'] = 'x' * 300" "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "nodes[1].executor_model"
  forge "$JOB" "r['run_flags']['nodes'] = [{'run.executor': 'command', 'sandbox.network': 'on'}]" \
    "$BASE" "$RESULT" "$second"
  every_reader_refuses "$JOB" "run_flags.nodes[0].sandbox.network"
  # A well-formed node flag this machine did not start the job with: resume
  # does not let the record choose a node's executor (user-only).
  forge "$JOB" "r['run_flags']['nodes'] = [{'run.executor': 'opencode'}, {'run.executor': 'command'}]; \
r['nodes'][0]['state'] = 'failed'; r['state'] = 'succeeded'" "$BASE" "$RESULT" "$second"
  local before
  before="$(sec_repo_state)"
  expect_exit 2 timeout 60 git mullet resume -q "$JOB/1"
  assert_contains "$ERR" "asks resume to set run.executor, which only your own configuration may set" "resume JOB/1"
  sec_assert_same "the user's repository" "$before" "$(sec_repo_state)"
}

test_ids_with_slashes_or_dots_are_refused() {
  real_job
  forge "$JOB" "r['id'] = '../../../x'"
  every_reader_refuses "$JOB" id
  forge "$JOB" "r['id'] = '0123/56789'"
  every_reader_refuses "$JOB" id
  # Another job's id: the record is not the one its ref names.
  forge "$JOB" "r['id'] = '0123456789'"
  every_reader_refuses "$JOB" id
}

test_huge_title_nul_and_line_breaks_are_refused() {
  real_job
  forge "$JOB" "r['title'] = 'x' * (2 << 20)"
  every_reader_refuses "$JOB" title
  forge "$JOB" "r['title'] = 'two\\nlines'"
  every_reader_refuses "$JOB" title
  forge "$JOB" "r['prompt'] = 'nul \\u0000 inside'"
  every_reader_refuses "$JOB" prompt
  forge "$JOB" "r['error'] = 'nul \\u0000'"
  every_reader_refuses "$JOB" error
}

# Escape sequences are text a record may hold: --json gives them as they are,
# and every command that prints for a person neutralises them.
test_escapes_in_a_record_never_reach_the_terminal() {
  real_job
  forge "$JOB" "r['title'] = 'fine \\u001b]0;owned\\u0007 \\u001b[2J'; r['error'] = 'ring \\u0007'"
  local command
  for command in "show $JOB" "list" "log $JOB"; do
    # shellcheck disable=SC2086
    expect_exit 0 git mullet $command
    case "$OUT$ERR" in *$'\x1b'* | *$'\a'*) fail "git mullet $command printed a control character" ;; esac
  done
  expect_exit 0 git mullet show "$JOB"
  assert_contains "$OUT" 'fine \x1b]0;owned' "show's neutralised title"
  expect_exit 0 git mullet show --json "$JOB"
  [ "$(json_get "$OUT" .title)" = "$(printf 'fine \033]0;owned\007 \033[2J')" ] || fail "show --json changed the title"
}

test_numbers_that_are_not_finite_or_out_of_range_are_refused() {
  real_job
  forge "$JOB" "r['runner']['pid'] = 10**30"
  every_reader_refuses "$JOB" runner.pid
  forge "$JOB" "r['phases'][0]['exit_code'] = -2**40"
  every_reader_refuses "$JOB" "phases[0].exit_code"
  forge "$JOB" "r['report'] = {'cost_usd': float('nan')}"
  every_reader_refuses "$JOB" "job.json"
  forge "$JOB" "r['report'] = {'cost_usd': 1e300}"
  every_reader_refuses "$JOB" "report.cost_usd"
  forge "$JOB" "r['format'] = 99"
  every_reader_refuses "$JOB" format
}

test_unknown_state_executor_and_stop_reason_are_refused() {
  real_job
  forge "$JOB" "r['state'] = 'owned'"
  every_reader_refuses "$JOB" state
  forge "$JOB" "r['executor'] = 'sh'"
  every_reader_refuses "$JOB" executor
  forge "$JOB" "r['phases'][0]['ended_by'] = 'owned'"
  every_reader_refuses "$JOB" "phases[0].ended_by"
}

# resume replays run_flags: a forged one must not choose what only the user
# configures (the command, the sandbox's uid, the network, the Claude binary).
test_run_flags_cannot_set_user_only_keys_for_resume() {
  real_job
  local pwned="$TEST_ROOT/pwned"
  user_config '[run]' 'executor = "command"' "command = 'echo mine >mine.txt'"
  forge "$JOB" "r['state'] = 'failed'; r['run_flags'] = {'config': {'run.command': 'echo owned >owned.txt; touch $pwned'}, 'gates': []}"
  local before
  before="$(sec_repo_state)"
  expect_exit 2 timeout 60 git mullet resume -q "$JOB"
  assert_clear_error
  assert_contains "$ERR" "run.command" "resume's refusal"
  assert_eq "$(git mullet show --json "$JOB" | jq -r .state)" failed "the job after the refused resume"
  sec_assert_same "the user's repository" "$before" "$(sec_repo_state)"
  assert_absent "$pwned"
  # Every user-only key a record may hold is refused alike: a forged model
  # would choose what the job spends.
  for flag in "'claude.model': 'claude-opus-4-1'" "'opencode.model': 'anthropic/claude-opus-4-1'" \
    "'run.executor': 'claude'"; do
    forge "$JOB" "r['state'] = 'failed'; r['run_flags'] = {'config': {$flag}, 'gates': []}"
    expect_exit 2 timeout 60 git mullet resume -q "$JOB"
    assert_clear_error
    local key="${flag%%\'\:*}"
    assert_contains "$ERR" "asks resume to set ${key#\'}, which only your own configuration may set" "resume's refusal"
    assert_eq "$(git mullet show --json "$JOB" | jq -r .state)" failed "the job after the refused resume"
  done
  for flag in "'network.worker': ['*']" "'sandbox.uid': 0" "'claude.binary': '/bin/sh'" "'limits.timeout': 99999"; do
    forge "$JOB" "r['state'] = 'failed'; r['run_flags'] = {'config': {$flag}, 'gates': []}"
    local key="${flag%%\'\:*}"
    every_reader_refuses "$JOB" "run_flags.config.${key#\'}"
  done
  forge "$JOB" "r['state'] = 'failed'; r['run_flags'] = {'config': {}, 'gates': [], 'env': {'LD_PRELOAD': '/x'}}"
  every_reader_refuses "$JOB" "run_flags.env"
}

# Nor raise what a repository may only lower: a forged run.attempts of 100
# would be up to 100 worker runs on the user's credential, for resume and for
# run --continue (which takes a job in any ended state).
test_run_flags_cannot_raise_attempts_for_resume_or_continue() {
  real_job
  local before attempts
  attempts="$(git mullet show --json "$JOB" | jq '.attempts | length')"
  for state in failed succeeded; do
    forge "$JOB" "r['state'] = '$state'; r['run_flags'] = {'config': {'run.attempts': 100}, 'gates': [{'name': 'never', 'command': 'false'}]}"
    before="$(sec_repo_state)"
    if [ "$state" = failed ]; then
      expect_exit 2 timeout 60 git mullet resume -q "$JOB"
    else
      expect_exit 2 timeout 60 git mullet run --continue "$JOB" -q -m "go on"
    fi
    assert_clear_error
    assert_contains "$ERR" "asks resume to raise run.attempts to 100" "the refusal ($state)"
    assert_eq "$(git mullet show --json "$JOB" | jq -r .state)" "$state" "the job after the refusal"
    assert_eq "$(git mullet show --json "$JOB" | jq '.attempts | length')" "$attempts" "no attempt ran ($state)"
    sec_assert_same "the user's repository" "$before" "$(sec_repo_state)"
  done
}

test_a_job_json_of_100_mb_is_not_read() {
  real_job
  local file="$TEST_ROOT/big.json" blob
  # 100 MiB of JSON, compressed to almost nothing in the object store.
  python3 - "$file" "$JOB" "$BASE" <<'PY'
import sys
out, job, base = sys.argv[1:]
with open(out, "w") as f:
    f.write('{"format": 1, "id": "%s", "state": "failed", "base": "%s", "prompt": "' % (job, base))
    chunk = "x" * (1 << 20)
    for _ in range(100):
        f.write(chunk)
    f.write('"}')
PY
  blob="$(git hash-object -w "$file")"
  rm -f "$file"
  forge_tree "$JOB" "{\"id\": \"$JOB\", \"state\": \"failed\", \"base\": \"$BASE\"}" \
    "$(printf '100644 blob %s\tjob.json\n' "$blob")" "$BASE"
  expect_exit 2 git mullet show "$JOB"
  assert_contains "$ERR" "job $JOB is damaged: job.json is larger than"
  [ "${#OUT}" -lt 100000 ] || fail "show printed ${#OUT} bytes"
  every_reader_refuses "$JOB" job.json
}

test_record_files_that_are_trees_or_symlinks_are_not_read() {
  real_job
  local summary json tree link
  summary="$(git log -1 --format=%b "refs/mullet/jobs/$JOB")"
  json="$(git rev-parse "refs/mullet/jobs/$JOB:job.json")"
  tree="$(git rev-parse "$RESULT^{tree}")"
  link="$(printf '/etc/shadow' | git hash-object -w --stdin)"
  # job.json as a symlink, then as a tree.
  forge_tree "$JOB" "$summary" "$(printf '120000 blob %s\tjob.json\n' "$link")" "$BASE" "$RESULT"
  every_reader_refuses "$JOB" job.json
  forge_tree "$JOB" "$summary" "$(printf '040000 tree %s\tjob.json\n' "$tree")" "$BASE" "$RESULT"
  every_reader_refuses "$JOB" job.json
  # worker.log as a tree, events.jsonl as a symlink: log refuses to read them.
  forge_tree "$JOB" "$summary" "$(printf '100644 blob %s\tjob.json\n040000 tree %s\tworker.log\n' "$json" "$tree")" \
    "$BASE" "$RESULT"
  expect_exit 2 git mullet log "$JOB"
  assert_clear_error
  assert_contains "$ERR" "job $JOB is damaged: worker.log"
  forge_tree "$JOB" "$summary" "$(printf '100644 blob %s\tjob.json\n120000 blob %s\tevents.jsonl\n' "$json" "$link")" \
    "$BASE" "$RESULT"
  expect_exit 2 git mullet log "$JOB"
  assert_contains "$ERR" "job $JOB is damaged: events.jsonl"
  # The record itself is fine: show works, and discard removes it.
  expect_exit 0 git mullet show "$JOB"
  expect_exit 0 git mullet discard "$JOB"
}

test_a_damaged_record_can_be_discarded() {
  real_job
  forge "$JOB" "r['base'] = '--output=$TEST_ROOT/x'; r['runner'] = {'pid': 1, 'start_ticks': 1, 'boot_id': 'x'}"
  expect_exit 0 git mullet discard "$JOB"
  assert_contains "$OUT" "discarded job $JOB"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "jobs after discard"
  assert_absent "$TEST_ROOT/x"
}

# A record copied from another repository on this host names that one's live
# runner: pid, boot id and start time all check out. Neither `stop` nor
# `discard --force` here may signal it (before runners named their
# repository, both killed the other repository's job).
test_attack_a_copied_record_of_a_running_job_never_signals_its_runner() {
  new_repo a
  cd a
  sec_config '[limits]' 'timeout = 120'
  local n
  n=$((9400000 + RANDOM * 10))
  git mullet run -q -m "runs on" --command "echo up > /mullet/work/up.marker; sleep $n" >/dev/null 2>&1 &
  local bg=$!
  wait_until 30 sh -c 'git for-each-ref refs/mullet/jobs/ | grep -q .'
  local id
  id="$(git for-each-ref --format='%(refname:lstrip=3)' refs/mullet/jobs/)"
  wait_until 30 job_has "$(job_dir "$id")" up.marker
  cd ..
  new_repo b
  cd b
  git fetch -q ../a 'refs/mullet/*:refs/mullet/*' || fail "fetching a's records"
  assert_eq "$(git mullet show --json "$id" | jq -r .state)" running "b's copy of the record"
  expect_exit 3 git mullet stop --timeout 5 "$id"
  assert_contains "$ERR" "another repository" "stop's refusal"
  is_running "sleep $n" || fail "b's stop killed a's job"
  expect_exit 0 git mullet discard --force "$id"
  assert_eq "$(git for-each-ref refs/mullet/jobs)" "" "b's jobs after discard"
  cd ../a
  is_running "sleep $n" || fail "b's discard --force killed a's job"
  assert_eq "$(git mullet show --json "$id" | jq -r .state)" running "a's job"
  # a's own stop still works: the refusal is about the copy.
  expect_exit 0 git mullet stop "$id"
  wait "$bg" 2>/dev/null || true
  assert_eq "$(git mullet show --json "$id" | jq -r .state)" cancelled "a's job after its own stop"
  no_process_left "sleep $n"
  git mullet discard "$id" >/dev/null
}

run_tests
