#!/usr/bin/env bash
# `git mullet run`: what the worker wrote becomes exactly the result commit,
# the prompt reaches the worker, failures are recorded, and the user's own
# repository (HEAD, index, work tree, refs) is never touched.
source "$(dirname "$0")/../lib/harness.sh"

# reference_tree REPO REV SCRIPT: the tree plain git makes of SCRIPT's changes
# (run by sh in a fresh clone of REV, then `git add -A`), for exact comparison.
reference_tree() {
  local repo="$1" rev="$2" script="$3" dir
  dir="$(mktemp -d "$TEST_ROOT/reference.XXXXXX")"
  git clone -q --no-checkout "$repo" "$dir/clone"
  git -C "$dir/clone" checkout -q --detach "$rev"
  (cd "$dir/clone" && sh -c "$script") >/dev/null 2>&1
  git -C "$dir/clone" add -A
  git -C "$dir/clone" write-tree
}

# A base with files to modify, delete, rename, re-mode, retype.
rich_repo() {
  new_repo "$1"
  (
    cd "$1"
    seq 1 200 | sed 's/^/line of text number /' >old-name.txt
    printf 'bye\n' >delete-me.txt
    printf 'echo hi\n' >script.sh
    printf '#!/bin/sh\necho tool\n' >tool
    chmod +x tool
    printf 'will become a directory\n' >becomes-dir
    mkdir -p lib
    printf 'a\n' >lib/a.txt
    ln -s lib/a.txt link-changes
    git add -A
    git commit -qm "rich base"
  )
}

CHANGES='
printf "changed\n" >>README
rm delete-me.txt
mv old-name.txt new-name.txt
printf "new\n" >added.txt
mkdir -p deep/er/est && printf "x" >deep/er/est/file
printf "\000\001\002\377binary\000\r\n\n" >blob.bin
chmod +x script.sh
chmod -x tool
ln -s README link-to-readme
ln -s /etc/passwd absolute-link
ln -s does/not/exist dangling-link
rm link-changes && ln -s new-name.txt link-changes
rm -r src && printf "src is a file now\n" >src
rm becomes-dir && mkdir becomes-dir && printf "inner\n" >becomes-dir/inner
mkdir empty-dir
printf "spaces\n" >"name with spaces.txt"
printf "unicode\n" >"ünïcödé.txt"
'

test_result_commit_has_exactly_the_changes() {
  rich_repo repo
  cd repo
  local base
  base="$(git rev-parse HEAD)"
  run_job -m "make many changes" --command "$CHANGES"
  assert_eq "$RUN_CODE" 0 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_matches "$result" '^[0-9a-f]{40}$' "result"
  # The result commit sits directly on the base and nowhere else.
  assert_eq "$(git rev-parse "$result^")" "$base" "result's parent"
  assert_eq "$(git rev-list --count "$base..$result")" 1 "commits on top of the base"
  assert_contains "$(git log -1 --format=%B "$result")" "Mullet-Job: $JOB"
  # Exactly the tree plain git makes of the same changes.
  assert_eq "$(git rev-parse "$result^{tree}")" "$(reference_tree "$PWD" "$base" "$CHANGES")" "result tree"
  # And, spelled out, what that means.
  local status
  status="$(git -c core.quotepath=false diff --name-status -M "$base" "$result")"
  assert_contains "$status" "R100	old-name.txt	new-name.txt"
  assert_contains "$status" "D	delete-me.txt"
  assert_contains "$status" "M	README"
  assert_contains "$status" "A	added.txt"
  assert_contains "$status" "A	deep/er/est/file"
  assert_contains "$status" "A	name with spaces.txt"
  assert_contains "$status" "A	ünïcödé.txt"
  assert_not_contains "$status" "empty-dir"
  assert_eq "$(git ls-tree "$result" script.sh | cut -d' ' -f1)" 100755 "mode of script.sh"
  assert_eq "$(git ls-tree "$result" tool | cut -d' ' -f1)" 100644 "mode of tool"
  assert_eq "$(git diff --raw "$base" "$result" -- script.sh | cut -d' ' -f1,2)" ":100644 100755" "script.sh change"
  for link in link-to-readme absolute-link dangling-link link-changes; do
    assert_eq "$(git ls-tree "$result" "$link" | cut -d' ' -f1)" 120000 "mode of $link"
  done
  assert_eq "$(git cat-file blob "$result:link-to-readme")" README
  assert_eq "$(git cat-file blob "$result:absolute-link")" /etc/passwd
  assert_eq "$(git cat-file blob "$result:dangling-link")" does/not/exist
  assert_eq "$(git cat-file blob "$result:link-changes")" new-name.txt
  assert_eq "$(git cat-file -t "$result:src")" blob "src became a file"
  assert_eq "$(git cat-file -t "$result:becomes-dir")" tree "becomes-dir became a directory"
  assert_eq "$(blob_sha256 "$result:blob.bin")" \
    "$(printf '\000\001\002\377binary\000\r\n\n' | sha256sum | cut -d' ' -f1)" "binary bytes"
  assert_eq "$(git cat-file blob "$result:README")" "$(printf 'hello\nchanged')"
  # The clone's .git file is never part of the result.
  assert_eq "$(git ls-tree "$result" .git)" "" ".git in the result"
  assert_eq "$(json_get "$JOB_JSON" '.snapshot_warnings')" "[]" "snapshot warnings"
}

test_record_commit_links_base_and_result() {
  new_repo repo
  cd repo
  run_job -m "add a file" --command 'echo new >new.txt; echo worker-says-hi'
  local result record
  result="$(json_field "$JOB_JSON" result)"
  record="$(git rev-parse "refs/mullet/jobs/$JOB")"
  assert_eq "$(git rev-parse "$record^1")" "$(git rev-parse HEAD)" "record's first parent"
  assert_eq "$(git rev-parse "$record^2")" "$result" "record's second parent"
  assert_eq "$(git ls-tree --name-only "$record" | LC_ALL=C sort | tr '\n' ' ')" "job.json worker.log " "record tree"
  assert_eq "$(json_field "$(git cat-file blob "$record:job.json")" result)" "$result" "job.json result"
  assert_contains "$(git cat-file blob "$record:worker.log")" worker-says-hi
  # The scratch directories are where the documentation says.
  local dir
  dir="$(job_dir "$JOB")"
  for sub in git work home; do [ -d "$dir/$sub" ] || fail "$dir/$sub missing"; done
  assert_eq "$(cat "$(job_work "$dir")/new.txt")" new "work tree content"
}

test_same_size_rewrite_with_restored_mtime_is_seen() {
  new_repo repo
  cd repo
  # Same size, same mtime, same inode: only the content (and ctime) differ.
  # File times have nanoseconds: the edit needs no wait to differ in ctime.
  run_job -m "sneaky edit" --command 'touch -r README "$TMPDIR/stamp"; printf "HELLO\n" >README; touch -r "$TMPDIR/stamp" README'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):README")" HELLO
}

test_prompt_reaches_stdin_and_environment() {
  new_repo repo
  cd repo
  local prompt
  prompt="$(printf 'First line of the task\n  "quoted" $HOME `not run` \\ back\\slash ünï\ttab\n\nlast line')"
  local save='cat >stdin.txt; printf %s "$MULLET_PROMPT" >env.txt'
  run_job -m "$prompt" --command "$save"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(blob_sha256 "$result:stdin.txt")" "$(printf %s "$prompt" | sha256sum | cut -d' ' -f1)" "stdin"
  assert_eq "$(blob_sha256 "$result:env.txt")" "$(printf %s "$prompt" | sha256sum | cut -d' ' -f1)" "MULLET_PROMPT"
  assert_eq "$(json_field "$JOB_JSON" prompt)" "$prompt" "recorded prompt"
  assert_eq "$(json_field "$JOB_JSON" title)" "First line of the task" "title"
}

test_prompt_from_file_and_from_stdin() {
  new_repo repo
  cd repo
  printf 'task from a file\nsecond line\n' >../task.txt
  run_job -F ../task.txt --command 'cat >stdin.txt; printf %s "$MULLET_PROMPT" >env.txt'
  assert_eq "$RUN_CODE" 0
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(blob_sha256 "$result:stdin.txt")" "$(file_sha256 ../task.txt)" "stdin from -F FILE"
  assert_eq "$(blob_sha256 "$result:env.txt")" "$(file_sha256 ../task.txt)" "MULLET_PROMPT from -F FILE"

  local out
  out="$(printf 'task from stdin\n' | git mullet run --json -q -F - --command 'cat >stdin.txt')"
  assert_eq "$(json_field "$out" state)" succeeded
  assert_eq "$(git cat-file blob "$(json_field "$out" result):stdin.txt")" "task from stdin"
  assert_eq "$(json_field "$out" prompt)" "$(printf 'task from stdin\n')" "prompt from -F -"
}

test_unchanged_tree_is_no_changes() {
  new_repo repo
  cd repo
  printf '*.log\n' >.gitignore
  git add .gitignore
  git commit -qm ignore
  # Reads, touches, creates-and-deletes, writes only ignored files.
  run_job -m "look around" --command 'cat README >/dev/null; touch README; echo tmp >tmp; rm tmp; echo x >debug.log; echo read-only'
  assert_eq "$RUN_CODE" 0 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" no_changes
  assert_eq "$(json_field "$JOB_JSON" result)" null
  assert_eq "$(json_field "$JOB_JSON" error)" null
  # The record commit has only the base as parent.
  assert_eq "$(git rev-list --parents -1 "refs/mullet/jobs/$JOB" | wc -w)" 2 "record parents"
  expect_exit 0 git mullet run -m "nothing" --command true
  assert_contains "$OUT" no_changes
}

test_failing_worker_is_failed_and_keeps_its_changes() {
  new_repo repo
  cd repo
  run_job -m "half done" --command 'echo partial >partial.txt; echo giving up >&2; exit 7'
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_contains "$(json_field "$JOB_JSON" error)" 7
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].exit_code')" 7 "phase exit code"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_matches "$result" '^[0-9a-f]{40}$' "a failed job's result"
  assert_eq "$(git cat-file blob "$result:partial.txt")" partial
  assert_eq "$(git rev-parse "$result^")" "$(git rev-parse HEAD)"

  run_job -m "fails cleanly" --command 'exit 3'
  assert_eq "$RUN_CODE" 1 "exit code without changes"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_field "$JOB_JSON" result)" null

  run_job -m "killed" --command 'echo x >x; kill -9 $$'
  assert_eq "$RUN_CODE" 1 "exit code when killed"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_matches "$(json_field "$JOB_JSON" result)" '^[0-9a-f]{40}$' "a killed job's result"
}

test_user_repository_is_untouched() {
  new_repo repo
  cd repo
  printf '*.o\n' >.gitignore
  git add .gitignore
  git commit -qm ignore
  git checkout -qb feature
  printf 'stashed\n' >>README
  git stash -q
  printf 'staged\n' >staged.txt
  git add staged.txt
  printf 'dirty\n' >>README
  printf 'untracked\n' >untracked.txt
  printf 'ignored\n' >build.o
  local before index_before
  before="$(user_state)"
  index_before="$(file_sha256 .git/index)"
  # The worker sees the base commit only, and changes everything it can.
  run_job -m "rewrite it all" --command 'cat README >seen-readme; ls -A >seen-files; rm -r src; echo new >staged.txt; echo w >>README;
    git checkout -b worker-branch 2>/dev/null; git commit -am x 2>/dev/null; git update-ref refs/heads/main HEAD 2>/dev/null; true'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(file_sha256 .git/index)" "$index_before" "the index file"
  assert_eq "$(user_state)" "$before" "the user's repository"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git cat-file blob "$result:seen-readme")" hello "what the worker saw of README"
  assert_not_contains "$(git cat-file blob "$result:seen-files")" untracked.txt
  assert_not_contains "$(git cat-file blob "$result:seen-files")" build.o
  assert_eq "$(git for-each-ref --format='%(refname)' refs/heads)" "$(printf 'refs/heads/feature\nrefs/heads/main')"
}

test_gitignored_files_are_left_out_but_tracked_ones_kept() {
  new_repo repo
  cd repo
  printf '*.log\nbuild/\n' >.gitignore
  printf 'tracked log\n' >keep.log
  mkdir -p build
  printf 'tracked in an ignored dir\n' >build/tracked.txt
  git add .gitignore
  git add -f keep.log build/tracked.txt
  git commit -qm "ignores"
  local base script
  base="$(git rev-parse HEAD)"
  script='echo more >>keep.log; echo w >>build/tracked.txt; echo x >new.log; echo y >build/new.o;
    mkdir -p sub/build && echo z >sub/build/gen.o; echo v >sub/kept.txt; echo n >notignored.txt;
    mkdir gen && printf "*\n!.gitignore\n" >gen/.gitignore && echo a >gen/a'
  run_job -m "build things" --command "$script"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git diff --name-status "$base" "$result")" "$(printf 'M\tbuild/tracked.txt\nA\tgen/.gitignore\nM\tkeep.log\nA\tnotignored.txt\nA\tsub/kept.txt')" \
    "changed paths"
  assert_eq "$(git rev-parse "$result^{tree}")" "$(reference_tree "$PWD" "$base" "$script")" "result tree"
}

test_base_option_starts_from_another_commit() {
  new_repo repo
  cd repo
  git tag v1
  local first
  first="$(git rev-parse HEAD)"
  printf 'version two\n' >README
  git commit -qam "v2"
  local show='cat README >seen; echo x >new'
  for rev in HEAD~1 v1 "$first" "${first:0:8}"; do
    run_job --base "$rev" -m "from $rev" --command "$show"
    assert_eq "$(json_field "$JOB_JSON" base)" "$first" "base for --base $rev"
    local result
    result="$(json_field "$JOB_JSON" result)"
    assert_eq "$(git rev-parse "$result^")" "$first" "parent for --base $rev"
    assert_eq "$(git cat-file blob "$result:seen")" hello "what the worker saw for --base $rev"
  done
  run_job -m "from HEAD" --command "$show"
  assert_eq "$(json_field "$JOB_JSON" base)" "$(git rev-parse HEAD)"
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):seen")" "version two"
  # A detached HEAD is a base like any other.
  git checkout -q --detach "$first"
  run_job -m "detached" --command "$show"
  assert_eq "$(json_field "$JOB_JSON" base)" "$first" "base from a detached HEAD"
}

test_run_from_a_subdirectory_and_a_linked_worktree() {
  new_repo repo
  cd repo/src
  run_job -m "from a subdirectory" --command 'pwd >where; echo x >y'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):where")" /mullet/work
  cd ..
  git worktree add -q ../linked -b linked
  cd ../linked
  printf 'linked change\n' >README
  git commit -qam "in linked"
  run_job -m "from a linked worktree" --command 'cat README >seen'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):seen")" "linked change"
  # One job store per repository: the main checkout sees both jobs.
  cd ../repo
  assert_eq "$(git mullet list | wc -l)" 2 "jobs listed from the main checkout"
  [ -d "$(job_dir "$JOB")" ] || fail "scratch directory not under the common git dir"
}

test_human_output_of_run() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet run -m "say things" --command 'echo out-line; echo err-line >&2; echo x >x'
  assert_matches "$OUT" '^job [0-9a-f]{10} succeeded: result [0-9a-f]{12}' "run output"
  assert_contains "$OUT" "git mullet diff"
  assert_contains "$OUT" "git mullet merge"
  # Without -q the worker's output is echoed on stderr, with -q it is not.
  assert_contains "$ERR" out-line
  assert_contains "$ERR" err-line
  expect_exit 0 git mullet run -q -m "quiet" --command 'echo out-line; echo x >z'
  assert_not_contains "$ERR" out-line
  expect_exit 1 git mullet run -q -m "fail" --command 'exit 4'
  assert_eq "$OUT" "" "a failed run's stdout"
  assert_matches "$ERR" '^job [0-9a-f]{10} failed' "failed run output"
  assert_contains "$ERR" "  error:   the worker failed" "the error, in the closing lines"
  assert_contains "$ERR" "  go on:   git mullet resume" "the next step"
}

test_unreadable_files_are_not_turned_into_deletions() {
  # The worker may leave files it wrote unreadable (chmod 000). They are
  # still in its work tree, so the result must have them - or, if they
  # cannot be recorded, the job must not claim success. A "succeeded" result
  # that silently deletes them would delete them on merge.
  new_repo repo
  cd repo
  mkdir -p dir
  printf 'inside\n' >dir/file
  git add dir
  git commit -qm dir
  run_job -m "lock things" --command 'printf "locked\n" >>README; chmod 000 README; chmod 000 dir; echo n >new; chmod 000 new'
  local state result
  state="$(json_field "$JOB_JSON" state)"
  result="$(json_field "$JOB_JSON" result)"
  if [ "$state" = succeeded ]; then
    assert_eq "$(git cat-file blob "$result:README" 2>&1)" "$(printf 'hello\nlocked')" "README in a succeeded result"
    assert_eq "$(git cat-file blob "$result:dir/file" 2>&1)" inside "dir/file in a succeeded result"
    assert_eq "$(git cat-file blob "$result:new" 2>&1)" n "new in a succeeded result"
  else
    assert_eq "$state" failed "state"
    assert_contains "$(json_field "$JOB_JSON" error)" README
  fi
}

test_large_files_and_awkward_names_are_stored() {
  new_repo repo
  cd repo
  local script='head -c 9437184 /dev/zero | tr "\000" "a" >big; printf "x" >>big;
    printf "nl" >"$(printf "new\nline")"; printf "d" >-dash; printf "h" >HEAD; printf "q" >"quote\"d";
    mkdir -p sub && git init -q sub/nested && printf "kept" >sub/kept && printf "gitfile" >sub/.git-not-a-git-dir'
  run_job -m "awkward" --command "$script"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git cat-file -s "$result:big")" 9437185 "size of a 9 MiB file"
  assert_eq "$(blob_sha256 "$result:big")" "$( (head -c 9437184 /dev/zero | tr '\000' a; printf x) | sha256sum | cut -d' ' -f1)" "bytes of a 9 MiB file"
  assert_eq "$(git cat-file blob "$result:-dash")" d
  assert_eq "$(git cat-file blob "$result:HEAD")" h
  assert_eq "$(git cat-file blob "$result:quote\"d")" q
  assert_eq "$(git cat-file blob "$result:sub/kept")" kept
  assert_eq "$(git cat-file blob "$result:sub/.git-not-a-git-dir")" gitfile
  assert_eq "$(git ls-tree -r --name-only "$result" sub/nested)" "" "a nested repository's files"
  assert_contains "$(git ls-tree -r -z --name-only "$result" | tr '\0' '|')" "$(printf 'new\nline')|"
  assert_contains "$(json_get "$JOB_JSON" '.snapshot_warnings')" "sub/nested/.git"
}

test_submodule_entries_are_kept() {
  new_repo repo
  cd repo
  local commit
  commit="$(git rev-parse HEAD)"
  git update-index --add --cacheinfo "160000,$commit,vendor/lib"
  git commit -qm "a submodule"
  run_job -m "leave the submodule alone" --command 'echo x >x'
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git ls-tree "$result" vendor/lib)" "$(git ls-tree HEAD vendor/lib)" "gitlink entry"
  assert_eq "$(git diff --name-only HEAD "$result")" x "changed paths"
}

test_worker_can_delete_everything() {
  new_repo repo
  cd repo
  run_job -m "delete all" --command 'rm -rf ./* ./.[!.]* 2>/dev/null; ls -A >&2; true'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git ls-tree -r "$result")" "" "tree of the result"
  assert_eq "$(git rev-parse "$result^")" "$(git rev-parse HEAD)"
}

test_worker_output_that_is_not_utf8_is_recorded() {
  # Compilers and tools print arbitrary bytes; the job must still be
  # recorded as it ended, with its result.
  new_repo repo
  cd repo
  expect_exit 0 git mullet run --json -q -m "binary output" --command 'printf "\377\376 latin-1 caf\351\n"; echo x >x.txt'
  assert_eq "$(json_field "$OUT" state)" succeeded
  local id result
  id="$(json_field "$OUT" id)"
  result="$(json_field "$OUT" result)"
  assert_eq "$(git cat-file blob "$result:x.txt")" x
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$id  succeeded"
  expect_exit 0 git mullet log "$id"
  assert_contains "$OUT" "latin-1 caf"
}

test_snapshot_warning_about_a_name_that_is_not_utf8() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet run --json -q -m "odd fifo" --command 'mkfifo "$(printf "\377fifo")"; printf "n" >"$(printf "caf\351")"; echo x >x.txt'
  assert_eq "$(json_field "$OUT" state)" succeeded
  local id result
  id="$(json_field "$OUT" id)"
  result="$(json_field "$OUT" result)"
  assert_eq "$(git cat-file blob "$result:x.txt")" x
  assert_eq "$(git ls-tree -z --name-only "$result" | tr '\0' '\n' | grep -c fifo)" 0 "FIFOs recorded"
  assert_eq "$(git cat-file blob "$result:$(printf 'caf\351')")" n "a file whose name is not UTF-8"
  assert_contains "$(json_get "$OUT" '.snapshot_warnings')" fifo
  expect_exit 0 git mullet list
  assert_contains "$OUT" "$id  succeeded"
}

test_task_text_that_is_not_utf8() {
  # A task file in Latin-1: either the job runs with the exact bytes on
  # stdin, or it is bad input (exit 2, nothing created) - never an internal
  # error.
  new_repo repo
  cd repo
  printf 'caf\351 cr\350me br\373l\351e\n' >../latin1.txt
  local before
  before="$(mullet_traces)"
  local code=0
  git mullet run --json -q -F ../latin1.txt --command 'cat >stdin.txt' >../out 2>../err || code=$?
  OUT="$(cat ../out)"
  ERR="$(cat ../err)"
  if [ "$code" -eq 2 ]; then
    assert_clear_error
    assert_eq "$(mullet_traces)" "$before" "records after refusing the task file"
  else
    assert_eq "$code" 0 "exit code (stderr: $ERR)"
    assert_eq "$(json_field "$OUT" state)" succeeded
    assert_eq "$(blob_sha256 "$(json_field "$OUT" result):stdin.txt")" "$(file_sha256 ../latin1.txt)" "stdin bytes"
  fi
}

test_large_task_text() {
  # 200 KB of task (a long specification): more than one argument or
  # environment string may hold on Linux (128 KiB). The worker gets all of
  # it on stdin - or the task is refused as bad input before any job exists.
  new_repo repo
  cd repo
  seq 1 40000 | sed 's/^/spec line /' | head -c 200000 >../big-task.txt
  local before
  before="$(mullet_traces)"
  local code=0
  git mullet run --json -q -F ../big-task.txt --command 'cat >stdin.txt; echo ran >ran.txt' >../out 2>../err || code=$?
  OUT="$(cat ../out)"
  ERR="$(cat ../err)"
  if [ "$code" -eq 2 ]; then
    assert_clear_error
    assert_eq "$(mullet_traces)" "$before" "records after refusing the task"
  else
    assert_eq "$code" 0 "exit code (output: $(json_field "$OUT" error 2>/dev/null) $ERR)"
    assert_eq "$(json_field "$OUT" state)" succeeded
    assert_eq "$(blob_sha256 "$(json_field "$OUT" result):stdin.txt")" "$(file_sha256 ../big-task.txt)" "stdin bytes"
  fi
  # A worker that never reads its stdin is not stuck behind a full pipe.
  head -c 100000 ../big-task.txt >../task-100k.txt
  expect_exit 0 timeout 60 git mullet run --json -q -F ../task-100k.txt --command 'echo ignored-stdin >x.txt'
  assert_eq "$(json_field "$OUT" state)" succeeded
}

test_cancelled_by_a_signal() {
  new_repo repo
  cd repo
  local signal
  for signal in TERM INT; do
    git mullet run --json -q -m "cancel with $signal" --command 'echo partial >partial.txt; echo ready; sleep 30.25' >../out 2>/dev/null &
    local started=$!
    wait_until 10 sh -c "git mullet list | grep -q ' running '"
    local id runner
    id="$(git mullet list | awk '$2 == "running" {print $1}')"
    wait_until 10 sh -c "git mullet log $id | grep -q ready"
    runner="$(json_get "$(git mullet show --json "$id")" '.runner.pid')"
    kill -s "$signal" "$runner"
    local code=0
    wait "$started" || code=$?
    assert_eq "$code" 1 "exit code after SIG$signal"
    local json
    json="$(cat ../out)"
    assert_eq "$(json_field "$json" state)" cancelled "state after SIG$signal"
    assert_eq "$(json_get "$json" '.phases[0].ended_by')" cancelled
    assert_eq "$(git cat-file blob "$(json_field "$json" result):partial.txt")" partial "what it wrote before"
    expect_exit 0 git mullet show --json "$id"
    assert_eq "$(json_field "$OUT" state)" cancelled
  done
  wait_until 10 sh -c "! pgrep -f '[e]cho ready; sleep 30.25'"
}

test_background_processes_do_not_outlive_the_worker() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  # Three ways to leave a process behind; the worker ends once all three
  # run (the positive control), and each would write a file if it lived on.
  run_job -m "daemonise" --command "(sleep $m; echo late >late.txt) &
    setsid sh -c 'sleep $m; echo later >later.txt' </dev/null >/dev/null 2>&1 &
    nohup sleep $m >/dev/null 2>&1 &
    i=0; while [ \$(pgrep -c -x sleep) -lt 3 ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
    echo \"running in the background: \$(pgrep -c -x sleep)\"; echo main >main.txt"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_contains "$(git mullet log "$JOB")" "running in the background: 3" "the worker's output"
  # The sandbox's pid namespace ends with its worker: nothing is left by the
  # time the job has ended (the bound is only a failure guard).
  no_process_left "sleep $m"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_absent "$(job_work "$(job_dir "$JOB")")/late.txt"
  assert_absent "$(job_work "$(job_dir "$JOB")")/later.txt"
  assert_eq "$(git ls-tree --name-only "$result" | grep -c late)" 0 "late files in the result"
}

test_limits_from_the_user_config_stop_the_worker() {
  new_repo repo
  cd repo
  mkdir -p "$XDG_CONFIG_HOME/git-mullet"
  printf '[limits]\ntimeout = 2\n' >"$XDG_CONFIG_HOME/git-mullet/config.toml"
  run_job -m "busy forever" --command 'echo started >started.txt; while :; do echo tick; sleep 0.2; done'
  assert_eq "$RUN_CODE" 1 "exit code past the timeout"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" timeout
  assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):started.txt")" started
  printf '[limits]\ninactivity = 1\n' >"$XDG_CONFIG_HOME/git-mullet/config.toml"
  run_job -m "silent forever" --command 'sleep 20; echo late >late.txt'
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" inactivity
  printf '[limits]\nmemory_mb = 100\n' >"$XDG_CONFIG_HOME/git-mullet/config.toml"
  # Whatever holds the limit (the kernel's OOM killer takes only the largest
  # process; the watch the whole sandbox), the sandbox is stopped before the
  # rest of the worker runs on.
  run_job -m "greedy" --command 'python3 -c "import time; x = b\"\\x01\" * (400 * 2**20); time.sleep(5)"; sleep 10; echo survived >survived.txt'
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" memory
  assert_eq "$(json_field "$JOB_JSON" result)" null
  # The control: within its limits the same kind of worker succeeds.
  run_job -m "modest" --command 'python3 -c "x = b\"\\x01\" * (10 * 2**20)"; echo fine >fine.txt'
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
}

test_repository_path_with_spaces_colons_and_unicode() {
  # Paths are data: a colon is not a separator, a space not a word break.
  local dir
  for dir in "with space" "with:colon" "ünï cödé" "quote\"d" "semi;colon"; do
    new_repo "$dir/repo"
    (
      cd "$dir/repo"
      run_job -m "task in $dir" --command 'echo ok >ok.txt'
      assert_eq "$RUN_CODE" 0 "exit code in '$dir' ($(json_field "$JOB_JSON" error))"
      assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state in '$dir'"
      assert_eq "$(git cat-file blob "$(json_field "$JOB_JSON" result):ok.txt")" ok "result in '$dir'"
    ) || exit 1
  done
}

test_the_workers_own_git_works_in_the_clone() {
  # The worker (an agent) uses git in its clone: HEAD is the base, status
  # and diff see its changes.
  new_repo repo
  git clone -q --shared repo shared
  local dir
  for dir in repo shared; do
    (
      cd "$dir"
      run_job -m "use git" --command 'echo change >>README; git rev-parse HEAD >head.txt;
        git status --porcelain >status.txt; git diff --stat >diff.txt; git log --format=%s -1 >log.txt'
      assert_eq "$(json_field "$JOB_JSON" state)" succeeded "state in $dir"
      local result
      result="$(json_field "$JOB_JSON" result)"
      assert_eq "$(git cat-file blob "$result:head.txt")" "$(git rev-parse HEAD)" "the worker's HEAD in $dir"
      assert_eq "$(git cat-file blob "$result:log.txt")" "initial commit" "the worker's git log in $dir"
      assert_contains "$(git cat-file blob "$result:status.txt")" " M README" "the worker's git status in $dir"
      assert_contains "$(git cat-file blob "$result:diff.txt")" "README" "the worker's git diff in $dir"
    ) || exit 1
  done
}

run_tests
