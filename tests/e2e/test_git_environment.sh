#!/usr/bin/env bash
# The caller's git environment, one rule per variable (README "Git
# environment variables", git-mullet(1) ENVIRONMENT):
# - GIT_DIR, GIT_CEILING_DIRECTORIES and GIT_DISCOVERY_ACROSS_FILESYSTEM
#   choose the repository, and are honoured by libgit2 and every git we run
#   alike; GIT_WORK_TREE has no effect (no work tree is ever used);
# - variables that move objects, refs, the index or history elsewhere are
#   refused with exit 2 before anything is read or written;
# - every other git variable (config, trace, pager...) has no effect.
source "$(dirname "$0")/../lib/harness.sh"

REFUSED="GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_INDEX_FILE GIT_COMMON_DIR GIT_NAMESPACE
GIT_REPLACE_REF_BASE GIT_GRAFT_FILE GIT_SHALLOW_FILE GIT_QUARANTINE_PATH"

# repo_is_whole: fsck and gc pass, and every job ref names a record commit
# that is in this repository's own object store.
repo_is_whole() {
  git fsck --no-progress --strict 2>&1 || fail "git fsck failed"
  git gc --quiet 2>&1 || fail "git gc failed"
  local ref
  for ref in $(git for-each-ref --format='%(refname)' refs/mullet/jobs); do
    git cat-file -e "$ref^{commit}" || fail "$ref names a missing object"
  done
}

test_variables_that_redirect_storage_are_refused_before_anything_is_written() {
  new_repo repo
  cd repo
  run_job -m "a first job" --command 'echo one >one.txt'
  assert_eq "$RUN_CODE" 0 "the first job"
  local first="$JOB" name before other
  other="$TEST_ROOT/elsewhere"
  for name in $REFUSED; do
    rm -rf "$other"
    mkdir -p "$other/objects/info" "$other/objects/pack" "$other/refs"
    before="$(mullet_traces; user_state)"
    local value="$other/objects"
    case "$name" in
      GIT_INDEX_FILE | GIT_GRAFT_FILE | GIT_SHALLOW_FILE) value="$other/file" ;;
      GIT_COMMON_DIR) value="$other" ;;
      GIT_NAMESPACE) value="ns" ;;
      GIT_REPLACE_REF_BASE) value="refs/other-replace/" ;;
    esac
    for command in "run -q -m task --command true" "run -q --detach -m task --command true" "list" "show $first" \
      "diff $first" "merge $first" "discard $first"; do
      # shellcheck disable=SC2086
      expect_exit 2 env "$name=$value" git mullet $command
      assert_clear_error
      assert_contains "$ERR" "$name is set" "git mullet $command with $name"
      assert_contains "$ERR" "hint: unset $name" "git mullet $command with $name"
    done
    # Set but empty is refused too: git and libgit2 disagree on what it means.
    expect_exit 2 env "$name=" git mullet run -q -m task --command true
    assert_contains "$ERR" "$name is set"
    assert_eq "$(mullet_traces; user_state)" "$before" "the repository after refusals with $name"
    assert_eq "$(find "$other" -type f | wc -l)" 0 "files written under $other with $name"
  done
  repo_is_whole
  expect_exit 0 git mullet show "$first"
}

test_git_dir_is_honoured_by_libgit2_and_git_alike() {
  new_repo repo
  mkdir elsewhere
  cd elsewhere
  # GIT_WORK_TREE names a directory that must stay empty: it has no effect.
  mkdir "$TEST_ROOT/not-a-work-tree"
  export GIT_DIR="$TEST_ROOT/${FUNCNAME[0]}/repo/.git" GIT_WORK_TREE="$TEST_ROOT/not-a-work-tree"
  run_job -m "from outside" --command 'echo hi >hi.txt'
  assert_eq "$RUN_CODE" 0 "run with GIT_DIR"
  local result
  result="$(json_field "$JOB_JSON" result)"
  # diff runs git: it must see the same repository libgit2 wrote to.
  expect_exit 0 git mullet diff "$JOB"
  assert_contains "$OUT" "hi.txt"
  expect_exit 0 git mullet merge "$JOB"
  assert_eq "$(git rev-parse "mullet/$JOB")" "$result" "the merged branch"
  unset GIT_DIR GIT_WORK_TREE
  cd ../repo
  assert_eq "$(git for-each-ref --format='%(refname)' refs/mullet/jobs)" "refs/mullet/jobs/$JOB" "the job's ref"
  repo_is_whole
  assert_eq "$(ls ../elsewhere)" "" "files written in the current directory"
  assert_eq "$(ls "$TEST_ROOT/not-a-work-tree")" "" "files written in GIT_WORK_TREE"
}

test_ceiling_and_discovery_variables_are_honoured() {
  new_repo repo
  mkdir -p repo/sub
  cd repo/sub
  # The repository is above the ceiling: git does not find it, nor do we.
  GIT_CEILING_DIRECTORIES="$TEST_ROOT/${FUNCNAME[0]}/repo" git rev-parse --git-dir >/dev/null 2>&1 &&
    fail "git found the repository above the ceiling"
  expect_exit 2 env GIT_CEILING_DIRECTORIES="$TEST_ROOT/${FUNCNAME[0]}/repo" git mullet run -q -m task --command true
  assert_contains "$ERR" "not a git repository"
  assert_eq "$(git for-each-ref refs/mullet)" "" "refs after the ceiling refusal"
  # A ceiling above the repository changes nothing.
  GIT_CEILING_DIRECTORIES="$TEST_ROOT" run_job -m task --command 'echo x >x.txt'
  assert_eq "$RUN_CODE" 0 "run under a ceiling above the repository"
  GIT_DISCOVERY_ACROSS_FILESYSTEM=1 run_job -m task --command 'echo y >y.txt'
  assert_eq "$RUN_CODE" 0 "run with GIT_DISCOVERY_ACROSS_FILESYSTEM"
  repo_is_whole
}

test_config_trace_and_pager_variables_have_no_effect() {
  new_repo repo
  cd repo
  local trace="$TEST_ROOT/trace" hooks="$TEST_ROOT/hooks"
  mkdir -p "$hooks"
  printf '#!/bin/sh\ntouch %s/hook-ran\n' "$TEST_ROOT" >"$hooks/post-checkout"
  chmod +x "$hooks/post-checkout"
  printf '[core]\n\thooksPath = %s\n[diff]\n\texternal = touch %s/diff-ran\n' "$hooks" "$TEST_ROOT" >"$TEST_ROOT/gitconfig"
  # Straight to the binary: `git mullet` would trace the outer git itself.
  local vars=(GIT_TRACE="$trace" GIT_TRACE2="$trace" GIT_TRACE_PACKET="$trace"
    GIT_CONFIG_PARAMETERS="'core.hookspath'='$hooks' 'diff.external'='touch $TEST_ROOT/diff-ran'"
    GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0="$hooks"
    GIT_CONFIG_GLOBAL="$TEST_ROOT/gitconfig" GIT_CONFIG_SYSTEM="$TEST_ROOT/gitconfig" GIT_CONFIG_NOSYSTEM=
    GIT_PAGER="touch $TEST_ROOT/pager-ran" PAGER="touch $TEST_ROOT/pager-ran" GIT_EXTERNAL_DIFF="touch $TEST_ROOT/diff-ran"
    GIT_NO_REPLACE_OBJECTS=1)
  local out
  out="$(env "${vars[@]}" timeout 60 "$MULLET_BIN" run --json -q -m task --command 'echo z >z.txt')" ||
    fail "run with config and trace variables"
  JOB="$(json_field "$out" id)"
  expect_exit 0 env "${vars[@]}" "$MULLET_BIN" diff "$JOB"
  assert_contains "$OUT" "z.txt"
  expect_exit 0 env "${vars[@]}" "$MULLET_BIN" merge "$JOB"
  assert_absent "$trace"
  assert_absent "$TEST_ROOT/hook-ran"
  assert_absent "$TEST_ROOT/diff-ran"
  assert_absent "$TEST_ROOT/pager-ran"
  repo_is_whole
}

run_tests
