#!/usr/bin/env bash
# [run] notify: the user's program runs on the host when a job ends, with the
# job's record as JSON on stdin and its id and state in the environment; a
# failing one costs a warning, not the job; a repository cannot set it; the
# README's desktop notification works as written.
source "$(dirname "$0")/../lib/harness.sh"

SOURCE_DIR="$(cd "$HARNESS_DIR/../.." && pwd)"

# A notifier that keeps what it was given, in $TEST_ROOT (outside every sandbox).
keeping_notifier() {
  NOTIFIED="$PWD/notified"
  cat >"$TEST_ROOT/bin/keep-notice" <<EOF
#!/bin/sh
mkdir -p "$NOTIFIED"
n=\$(ls "$NOTIFIED" | grep -c "\\.env\$")
cat >"$NOTIFIED/\$n.json"
printf '%s %s\n' "\$MULLET_JOB_ID" "\$MULLET_JOB_STATE" >"$NOTIFIED/\$n.env"
EOF
  chmod +x "$TEST_ROOT/bin/keep-notice"
}

test_the_program_gets_the_record_and_the_job_is_unchanged() {
  new_repo repo
  cd repo
  keeping_notifier
  user_config '[run]' 'notify = ["keep-notice"]'
  run_job -m "write it" --command 'echo done >out.txt'
  assert_eq "$RUN_CODE" 0
  assert_exists "$NOTIFIED/0.json"
  local notice
  notice="$(cat "$NOTIFIED/0.json")"
  assert_eq "$(json_field "$notice" id)" "$JOB" "the record's id"
  assert_eq "$(json_field "$notice" state)" succeeded "the record's state"
  assert_eq "$(json_field "$notice" result)" "$(json_field "$JOB_JSON" result)" "the record's result"
  assert_eq "$(json_get "$notice" .progress)" null "an ended job's record"
  assert_eq "$(cat "$NOTIFIED/0.env")" "$JOB succeeded" "the environment"

  # A failed job is announced too, as failed; and so is a continued one.
  run_job -m "fail" --command 'exit 3'
  assert_eq "$RUN_CODE" 1
  assert_eq "$(cat "$NOTIFIED/1.env")" "$JOB failed"
  expect_exit 1 git mullet run --continue "$JOB" -m "now succeed" --json -q
  assert_eq "$(cat "$NOTIFIED/2.env")" "$JOB failed" "the continued job's command still fails"
  assert_eq "$(ls "$NOTIFIED" | wc -l)" 6 "one notice per ended run"
}

test_a_detached_job_is_announced_when_it_ends() {
  new_repo repo
  cd repo
  keeping_notifier
  user_config '[run]' 'notify = ["keep-notice"]'
  expect_exit 0 timeout -k 5 60 git mullet run --detach -m "later" --command 'echo later >later.txt'
  local job="$OUT"
  expect_exit 0 timeout -k 5 120 git mullet wait -q "$job"
  # The runner announces the job once its record is stored, so after wait saw it end.
  wait_until 60 test -e "$NOTIFIED/0.env"
  assert_eq "$(cat "$NOTIFIED/0.env")" "$job succeeded"
}

test_a_failing_or_missing_program_is_one_warning() {
  new_repo repo
  cd repo
  user_config '[run]' 'notify = ["sh", "-c", "printf \"bad\\033[31m news\\n\" >&2; exit 7"]'
  expect_exit 0 git mullet run -q -m "write it" --command 'echo x >x.txt'
  assert_contains "$ERR" "git mullet: warning: [run] notify (sh -c" "the warning"
  assert_contains "$ERR" "exit code 7: bad" "what it said"
  assert_not_contains "$ERR" $'\033' "an escape from the program"
  assert_contains "$OUT" "succeeded" "the job"

  user_config '[run]' 'notify = ["no-such-notifier-here"]'
  expect_exit 0 git mullet run -q -m "write it" --command 'echo x >x.txt'
  assert_contains "$ERR" "no-such-notifier-here is not found on PATH"
  assert_eq "$(printf '%s\n' "$ERR" | grep -c warning)" 1 "one warning"
}

test_a_repository_cannot_set_it() {
  new_repo repo
  cd repo
  printf '[run]\nnotify = ["sh", "-c", "touch %s/pwned"]\n' "$PWD" >.mullet.toml
  git add .mullet.toml
  git commit -qm "a repository that wants to run something on the host"
  expect_exit 3 git mullet run -q -m "hi" --command true
  assert_contains "$ERR" "run.notify"
  assert_contains "$ERR" "only your user config can"
  assert_absent pwned
}

test_the_readme_desktop_notification_works_as_written() {
  new_repo repo
  cd repo
  # The README's block, as it stands; notify-send is a stand-in that keeps its arguments.
  sed -n '/^notify = \["sh", "-c", '"'''"'$/,/^'"'''"'\]$/p' "$SOURCE_DIR/README.md" >block.toml
  assert_eq "$(wc -l <block.toml)" 4 "the README block found"
  user_config '[run]' "$(cat block.toml)"
  cat >"$TEST_ROOT/bin/notify-send" <<EOF
#!/bin/sh
printf '%s\n' "\$@" >"$PWD/shown"
EOF
  chmod +x "$TEST_ROOT/bin/notify-send"
  run_job -m "Fix the leap year" --command 'echo 1 >a.txt; echo 2 >b.txt'
  assert_eq "$RUN_CODE" 0
  assert_eq "$(cat shown)" "--app-name=git-mullet
git mullet: job $JOB succeeded
Fix the leap year
succeeded, 2 files changed" "what notify-send was given"
}

run_tests
