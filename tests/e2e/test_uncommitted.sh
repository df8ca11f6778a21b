#!/usr/bin/env bash
# `git mullet run` in a work tree with uncommitted changes: a note says the
# job starts from HEAD without them; --include-uncommitted makes the base a
# commit of HEAD plus the tracked changes and the untracked files that are not
# ignored, and leaves the user's index, HEAD, work tree, stash and refs as
# they were.
source "$(dirname "$0")/../lib/harness.sh"

# The worker (a command) writes what it sees of each file into seen.txt.
SEE='for f in tracked.txt staged.txt untracked.txt ignored.txt secret.env deleted.txt link; do
  if [ -L "$f" ]; then echo "$f: -> $(readlink "$f")";
  elif [ -e "$f" ]; then echo "$f: $(cat "$f")";
  else echo "$f: absent"; fi
done >seen.txt'

# A repository with a stash entry and every kind of uncommitted change.
dirty_repo() {
  new_repo repo
  cd repo
  printf 'ignored.txt\n' >.gitignore
  printf 'tracked\n' >tracked.txt
  printf 'gone\n' >deleted.txt
  git add -A
  git commit -qm "base"
  printf 'stashed\n' >>README
  git stash -q
  printf 'changed\n' >>tracked.txt
  printf 'staged\n' >staged.txt
  git add staged.txt
  printf 'untracked\n' >untracked.txt
  printf 'secret\n' >ignored.txt
  # Ignored by the user's own ignore file (core.excludesFile), not the tree's.
  printf 'secret.env\n' >../my-ignore
  git config core.excludesFile "$(cd .. && pwd)/my-ignore"
  printf 'TOKEN=1\n' >secret.env
  rm deleted.txt
  ln -s tracked.txt link
}

# The user's state, as bytes: index file, HEAD, refs, stash, status.
user_state() {
  sha256sum .git/index
  git rev-parse HEAD
  git for-each-ref --format='%(refname) %(objectname)' | grep -v '^refs/mullet/' || true
  git stash list --format='%H %gs'
  GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=all
  find . -path ./.git -prune -o -print | sort
}

test_a_dirty_work_tree_gets_a_note_and_the_job_starts_from_head() {
  dirty_repo
  expect_exit 0 git mullet run --json -q --command "$SEE" -m "look"
  local notes
  notes="$(printf '%s\n' "$ERR" | grep -c '^note: ' || true)"
  assert_eq "$notes" 1 "note lines on stderr: $ERR"
  assert_contains "$ERR" "note: the job starts from HEAD ($(git rev-parse HEAD | cut -c1-12))" "the note"
  assert_contains "$ERR" "--include-uncommitted" "the note"
  # stdout is the record alone.
  assert_eq "$(json_field "$OUT" base)" "$(git rev-parse HEAD)" "base"
  assert_eq "$(json_field "$OUT" base_uncommitted)" False "base_uncommitted"
  assert_eq "$(json_field "$OUT" base_head)" null "base_head"
  local result
  result="$(json_field "$OUT" result)"
  assert_eq "$(git show "$result:seen.txt")" "tracked.txt: tracked
staged.txt: absent
untracked.txt: absent
ignored.txt: absent
secret.env: absent
deleted.txt: gone
link: absent" "what the worker saw"
  # --dry-run says it too; an explicit base, or a clean tree, gets no note.
  expect_exit 0 git mullet run --dry-run --command true -m "plan"
  assert_contains "$ERR" "note: the job starts from HEAD" "the dry run's note"
  expect_exit 0 git mullet run --json -q --base HEAD --command true -m "explicit"
  assert_not_contains "$ERR" "note:" "with --base"
  git stash -q -u
  expect_exit 0 git mullet run --json -q --command true -m "clean"
  assert_not_contains "$ERR" "note:" "a clean tree"
}

test_include_uncommitted_makes_a_base_of_the_changes_and_touches_nothing() {
  dirty_repo
  local head before after
  head="$(git rev-parse HEAD)"
  before="$(user_state)"
  expect_exit 0 git mullet run --json -q --include-uncommitted --command "$SEE" -m "look"
  assert_not_contains "$ERR" "note:" "stderr"
  after="$(user_state)"
  assert_eq "$after" "$before" "the user's index, HEAD, refs, stash and work tree"
  local job base result
  job="$(json_field "$OUT" id)"
  base="$(json_field "$OUT" base)"
  result="$(json_field "$OUT" result)"
  assert_eq "$(json_field "$OUT" base_uncommitted)" True "base_uncommitted"
  assert_eq "$(json_field "$OUT" base_head)" "$head" "base_head"
  [ "$base" != "$head" ] || fail "the base is HEAD"
  assert_eq "$(git rev-parse "$base^@")" "$head" "the base's only parent"
  # The worker saw the changed, staged and untracked files and the symlink,
  # not the ignored file, and not the deleted one.
  assert_eq "$(git show "$result:seen.txt")" "tracked.txt: tracked
changed
staged.txt: staged
untracked.txt: untracked
ignored.txt: absent
secret.env: absent
deleted.txt: absent
link: -> tracked.txt" "what the worker saw"
  assert_eq "$(git ls-tree "$base" link | cut -c1-6)" 120000 "the symlink is a symlink"
  assert_eq "$(git diff --name-status "$head" "$base" | tr "\t" " " | sort -k2)" "D deleted.txt
A link
A staged.txt
M tracked.txt
A untracked.txt" "the base's changes"
  # The record follows the JSON schema, keeps the base, show says so, and the
  # result merges with it.
  printf '%s' "$OUT" | python3 "$HARNESS_DIR/validate_json.py" \
    "$HARNESS_DIR/../../docs/json-schema/git-mullet.schema.json" job || fail "run --json does not follow the schema"
  assert_eq "$(git rev-parse "refs/mullet/jobs/$job^1")" "$base" "the record commit's first parent"
  assert_contains "$(git mullet show "$job")" "uncommitted changes on $(git rev-parse HEAD | cut -c1-12)" "show"
  assert_eq "$(json_get "$(git mullet show --json "$job")" .base_head)" "$head" "show --json"
  expect_exit 0 git mullet merge --branch with-changes "$job"
  assert_eq "$(git show with-changes:untracked.txt)" untracked "the merged branch has the untracked file"
  assert_eq "$(git show with-changes:staged.txt)" staged "and the staged one"
  git cat-file -e with-changes:deleted.txt 2>/dev/null && fail "the merged branch has the deleted file"
  git cat-file -e with-changes:ignored.txt 2>/dev/null && fail "the merged branch has the ignored file"
  git cat-file -e with-changes:secret.env 2>/dev/null && fail "the merged branch has the user-ignored file"
  assert_eq "$(user_state | grep -v '^refs/heads/with-changes ')" "$before" "nothing else moved"
}

# The user's global ignore file where git looks for it without core.excludesFile:
# $XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore. What it hides never
# reaches the worker.
test_include_uncommitted_honours_the_default_global_ignore_file() {
  new_repo repo
  cd repo
  local ignore_file
  for where in xdg home; do
    if [ "$where" = xdg ]; then
      export XDG_CONFIG_HOME="$TEST_ROOT/xdg-$RANDOM"
      ignore_file="$XDG_CONFIG_HOME/git/ignore"
    else
      unset XDG_CONFIG_HOME
      ignore_file="$HOME/.config/git/ignore"
    fi
    mkdir -p "$(dirname "$ignore_file")"
    printf 'secret.env\n*.pem\n' >"$ignore_file"
    printf 'TOKEN=1\n' >secret.env
    printf 'key\n' >id.pem
    printf 'visible\n' >notes.txt
    # The user's git agrees: only notes.txt is untracked.
    assert_eq "$(git status --porcelain --untracked-files=all)" "?? notes.txt" "git status ($where)"
    expect_exit 0 git mullet run --json -q --include-uncommitted --command 'ls >seen.txt' -m "look"
    local base
    base="$(json_field "$OUT" base)"
    assert_eq "$(git ls-tree --name-only "$base" | tr '\n' ' ')" "README notes.txt src " "the base's files ($where)"
    assert_not_contains "$(git show "$(json_field "$OUT" result):seen.txt")" "secret.env" "what the worker saw ($where)"
    rm -f "$ignore_file" secret.env id.pem notes.txt
  done
}

test_include_uncommitted_with_nothing_to_include_or_another_base() {
  new_repo repo
  cd repo
  expect_exit 0 git mullet run --json -q --include-uncommitted --command true -m "clean"
  assert_contains "$ERR" "note: the work tree has no uncommitted changes" "the note"
  assert_eq "$(json_field "$OUT" base)" "$(git rev-parse HEAD)" "base"
  assert_eq "$(json_field "$OUT" base_uncommitted)" False "base_uncommitted"
  printf 'more\n' >>README
  git commit -qam second
  printf 'dirty\n' >>README
  expect_exit 2 git mullet run --json -q --include-uncommitted --base HEAD~1 --command true -m "elsewhere"
  assert_contains "$ERR" "--include-uncommitted" "the error"
  assert_eq "$OUT" "" "stdout"
  # --base naming HEAD itself is HEAD.
  expect_exit 0 git mullet run --json -q --include-uncommitted --base HEAD --command true -m "here"
  assert_eq "$(json_field "$OUT" base_uncommitted)" True "base_uncommitted with --base HEAD"
}

test_a_file_too_large_to_include_is_refused_by_name() {
  new_repo repo
  cd repo
  user_config '[limits]' 'file_mb = 1'
  head -c 2000000 /dev/zero >big.bin
  local before
  before="$(user_state)"
  expect_exit 2 git mullet run --json -q --include-uncommitted --command true -m "big"
  assert_contains "$ERR" "big.bin" "the error"
  assert_contains "$ERR" "limits.file_mb" "the error"
  assert_eq "$(git for-each-ref refs/mullet/jobs | wc -l)" 0 "jobs"
  assert_eq "$(user_state)" "$before" "the user's state"
}

test_a_job_on_uncommitted_changes_resumes_and_continues_from_its_snapshot() {
  dirty_repo
  # Fails the first time (leaving a marker in its snapshot), succeeds the next.
  expect_exit 1 git mullet run --json -q --include-uncommitted \
    --command 'if [ -e marker ]; then cat untracked.txt >done.txt; else touch marker; exit 1; fi' -m "twice"
  local job base
  job="$(json_field "$OUT" id)"
  base="$(json_field "$OUT" base)"
  expect_exit 0 git mullet resume --json -q "$job"
  assert_eq "$(json_field "$OUT" state)" succeeded "state after resume"
  assert_eq "$(json_field "$OUT" base)" "$base" "the base stays"
  assert_eq "$(json_field "$OUT" base_uncommitted)" True "base_uncommitted stays"
  assert_eq "$(git show "$(json_field "$OUT" result):done.txt")" untracked "the resumed worker's work tree"
  # Continued, it keeps its base too; --include-uncommitted does not go with --continue.
  expect_exit 2 git mullet run --json -q --continue "$job" --include-uncommitted -m "more"
  expect_exit 0 git mullet run --json -q --continue "$job" -m "more"
  assert_eq "$(json_field "$OUT" base)" "$base" "the base stays when continued"
  assert_eq "$(json_field "$OUT" base_uncommitted)" True "base_uncommitted stays when continued"
}

run_tests
