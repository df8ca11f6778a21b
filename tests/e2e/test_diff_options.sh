#!/usr/bin/env bash
# `git mullet diff JOB [git diff options] [-- paths]` passes options and paths
# through to git diff, still hardened: an option that writes a file, runs a
# program or leaves the job is refused, and a diff driver named by the
# worker's .gitattributes never runs, whatever options are given.
source "$(dirname "$0")/../lib/harness.sh"

# A job that changes README and src/main.c and adds docs/new.txt.
job_with_three_changes() {
  new_repo repo
  cd repo
  run_job -m task --command 'echo more >>README; echo "int x;" >>src/main.c; mkdir docs; echo new >docs/new.txt'
}

test_options_and_paths_are_passed_through() {
  job_with_three_changes
  expect_exit 0 git mullet diff "$JOB"
  assert_contains "$OUT" "3 files changed"
  assert_contains "$OUT" "+more"
  expect_exit 0 git mullet diff "$JOB" --name-only
  assert_eq "$OUT" $'README\ndocs/new.txt\nsrc/main.c'
  expect_exit 0 git mullet diff "$JOB" --stat
  assert_contains "$OUT" "3 files changed"
  assert_not_contains "$OUT" "+more" "--stat output"
  expect_exit 0 git mullet diff "$JOB" --name-only -- src/
  assert_eq "$OUT" "src/main.c"
  expect_exit 0 git mullet diff "$JOB" --stat -- src/ docs/
  assert_contains "$OUT" "2 files changed"
  expect_exit 0 git mullet diff "$JOB" --name-status --diff-filter=A
  assert_eq "$OUT" $'A\tdocs/new.txt'
  expect_exit 0 git mullet diff "$JOB" -U0 -- README
  assert_contains "$OUT" "@@ -1,0 +2 @@"
  # A path that looks like an option is a path after --.
  expect_exit 0 git mullet diff "$JOB" --name-only -- --output=x
  assert_eq "$OUT" ""
  assert_absent x
  # The same as plain git diff of the two commits, for what was passed.
  local base result
  base="$(json_field "$JOB_JSON" base)"
  result="$(json_field "$JOB_JSON" result)"
  expect_exit 0 git mullet diff "$JOB" --numstat -- src/
  assert_eq "$OUT" "$(git diff --numstat "$base" "$result" -- src/)"
}

test_dangerous_options_are_refused() {
  job_with_three_changes
  local option
  for option in --output=../written --out=../written --ext-diff --ext --textconv --textc --no-index -O../order \
    --bogus -c -pw --unified; do
    refused_cleanly 2 git mullet diff "$JOB" "$option"
    assert_clear_error
    assert_contains "$ERR" "diff: $option"
  done
  git mullet diff "$JOB" --output=../written >/dev/null 2>&1 || true
  assert_absent ../written
  refused_cleanly 2 git mullet diff "$JOB" --output=../written
  assert_contains "$ERR" "writes only to standard output"
  refused_cleanly 2 git mullet diff "$JOB" --ext-diff
  assert_contains "$ERR" "run a program"
  refused_cleanly 2 git mullet diff "$JOB" --stat --textconv -- src/
  assert_contains "$ERR" "run a program"
  # Before the job is even looked up.
  refused_cleanly 2 git mullet diff 0123456789 --output=../written
  assert_contains "$ERR" "standard output"
}

test_a_diff_driver_in_the_workers_attributes_never_runs() {
  CANARY="$TEST_ROOT/canary-$RANDOM"
  new_repo repo
  cd repo
  # The user's repository defines drivers (its own config, which the
  # hardened git reads); the worker's tree names them for every file.
  git config diff.evil.command "echo command >>'$CANARY'; true"
  git config diff.evil.textconv "echo textconv >>'$CANARY'; cat"
  run_job -m task --command 'printf "* diff=evil\n" >.gitattributes; echo changed >>README'
  local option
  for option in "" --stat --name-only --patch --color-words --word-diff --numstat "--stat -- README" "-- README"; do
    # shellcheck disable=SC2086
    expect_exit 0 git mullet diff "$JOB" $option
    [ ! -e "$CANARY" ] || fail "a diff driver ran for 'diff $option': $(cat "$CANARY")"
  done
  expect_exit 0 git mullet diff "$JOB" --patch
  assert_contains "$OUT" "+changed"
  # The control: plain git, with the worker's attributes in force, runs it.
  git checkout -q "$(json_field "$JOB_JSON" result)"
  git diff "$(json_field "$JOB_JSON" base)" HEAD >/dev/null
  [ -e "$CANARY" ] || fail "the planted driver did not run even for plain git: the test proves nothing"
}

run_tests
