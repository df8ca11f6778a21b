#!/usr/bin/env bash
# The command line answers mistakes as git does: an unknown command is named
# with the most similar one (exit 2); every parse error is one `git mullet:`
# line naming the offending arguments in the order given, with a did-you-mean
# from the parser's own option names; `help [COMMAND]` works; `-h` shows
# meaningful placeholders and the exit codes the command can return.
source "$(dirname "$0")/../lib/harness.sh"

test_unknown_command_is_answered_like_git() {
  new_repo repo
  cd repo
  refused_cleanly 2 git mullet lst
  assert_eq "$(printf '%s\n' "$ERR" | head -n 1)" \
    "git mullet: 'lst' is not a git mullet command. See 'git mullet --help'."
  assert_contains "$ERR" $'The most similar command is\n\tlist'
  refused_cleanly 2 git mullet lsit
  assert_contains "$ERR" $'\tlist'
  refused_cleanly 2 git mullet ru -m task --command true
  assert_contains "$ERR" $'\trun'
  # Nothing similar: no suggestion, still git's first line.
  refused_cleanly 2 git mullet frobnicate
  assert_eq "$ERR" "git mullet: 'frobnicate' is not a git mullet command. See 'git mullet --help'."
  # The word is quoted safely whatever it holds.
  refused_cleanly 2 git mullet $'x\e[31mred'
  assert_not_contains "$ERR" $'\e'
  assert_contains "$ERR" 'x\x1b[31mred'
  refused_cleanly 2 git mullet
  assert_clear_error
  assert_contains "$ERR" "no command given"
  assert_contains "$ERR" "run, list"
}

test_parse_errors_are_one_line_naming_the_arguments_in_order() {
  new_repo repo
  cd repo
  refused_cleanly 2 git mullet run --comand true -m task
  assert_clear_error
  assert_eq "$ERR" "git mullet: run: unknown option '--comand' (did you mean '--command'?), unexpected argument 'true' (see 'git mullet run -h')"
  refused_cleanly 2 git mullet run first second --bogus -m task --command true
  assert_clear_error
  assert_contains "$ERR" "unexpected argument 'first', unexpected argument 'second', unknown option '--bogus'"
  refused_cleanly 2 git mullet run --comand=true -m task
  assert_contains "$ERR" "unknown option '--comand' (did you mean '--command'?)"
  refused_cleanly 2 git mullet list --jsn
  assert_clear_error
  assert_contains "$ERR" "list: unknown option '--jsn' (did you mean '--json'?)"
  refused_cleanly 2 git mullet run --dry -m task --command true
  assert_contains "$ERR" "(did you mean '--dry-run'?)"
  refused_cleanly 2 git mullet --versio
  assert_clear_error
  assert_contains "$ERR" "unknown option '--versio' (did you mean '--version'?)"
  refused_cleanly 2 git mullet show
  assert_clear_error
  assert_contains "$ERR" "show: JOB is required"
  refused_cleanly 2 git mullet show abc def
  assert_clear_error
  assert_contains "$ERR" "unexpected argument 'def'"
  refused_cleanly 2 git mullet run -m
  assert_clear_error
  assert_contains "$ERR" "option '--message' needs a value (MESSAGE)"
  refused_cleanly 2 git mullet run -m one -m two --command true
  assert_clear_error
  assert_contains "$ERR" "run: option '--message' is given more than once"
  refused_cleanly 2 git mullet run -m task --command true --attempts many
  assert_clear_error
  assert_contains "$ERR" "'many' is not a valid N for '--attempts'"
  refused_cleanly 2 git mullet wait --timeout -1 abc
  assert_clear_error
  assert_contains "$ERR" "SECONDS may not be negative"
  refused_cleanly 2 git mullet wait --timeout soon abc
  assert_clear_error
  assert_contains "$ERR" "'soon' is not a number of SECONDS"
  # The control: the same commands spelt right get past the parser.
  expect_exit 0 git mullet list --json
  expect_exit 0 git mullet run -m task --command true --attempts 1 --dry-run
}

test_help_command() {
  expect_exit 0 git mullet help
  assert_contains "$OUT" "Usage: git mullet [OPTIONS] COMMAND"
  assert_contains "$OUT" "list"
  local command
  for command in run list show diff log merge discard config doctor resume wait; do
    expect_exit 0 git mullet help "$command"
    local via_help="$OUT"
    expect_exit 0 git mullet "$command" --help
    assert_eq "$via_help" "$OUT" "help $command"
    assert_contains "$OUT" "Usage: git mullet $command"
  done
  expect_exit 2 git mullet help lst
  assert_contains "$ERR" "'lst' is not a git mullet command"
  assert_contains "$ERR" $'\tlist'
}

test_help_shows_placeholders_and_the_exit_codes_of_the_command() {
  expect_exit 0 git mullet run -h
  assert_contains "$OUT" "-m,--message MESSAGE"
  assert_contains "$OUT" "-F,--file FILE"
  assert_contains "$OUT" "--base COMMIT"
  assert_contains "$OUT" "--attempts N"
  assert_contains "$OUT" "3  refused by policy or by the sandbox"
  expect_exit 0 git mullet wait -h
  assert_contains "$OUT" "--timeout SECONDS "
  assert_contains "$OUT" "Usage: git mullet wait [OPTIONS] JOB"
  expect_exit 0 git mullet config -h
  assert_contains "$OUT" "--base COMMIT"
  # list never runs or refuses a job: no 1 or 3 of its own.
  expect_exit 0 git mullet list -h
  assert_contains "$OUT" "Exit codes:"
  assert_contains "$OUT" "  0  success"
  assert_not_contains "$OUT" "  3  "
  assert_not_contains "$OUT" "  1  "
  local command
  for command in run list show diff log merge discard config doctor resume wait help; do
    expect_exit 0 git mullet "$command" -h
    assert_contains "$OUT" "Exit codes:" "$command -h"
    # CLI11's own placeholders say nothing.
    assert_not_contains "$OUT" " TEXT" "$command -h"
    assert_not_contains "$OUT" " INT" "$command -h"
    assert_not_contains "$OUT" "REQUIRED" "$command -h"
  done
}

run_tests
