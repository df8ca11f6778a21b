#!/usr/bin/env bash
# `git mullet shell`: the shell a person opens on a job is a sandbox like
# the worker's, with no network, and it never holds the user's terminal.
# - Walls: from inside the shell, the real home, the user's repository and
#   the network are out of reach (the attack script is piped in, as a
#   person would type it), and the user's repository and home are unchanged.
# - TIOCSTI: run under a real pseudo-terminal that is the command's
#   controlling terminal (lib/tiocsti_outer.py plays the user's terminal and,
#   afterwards, the user's shell reading it), the sandboxed program tries to
#   type "touch /tmp/pwned-by-tiocsti" into every terminal it holds. Nothing
#   may reach the outer terminal's input, and no descriptor the sandbox got
#   is the outer terminal (its st_dev/st_rdev), which holds on a kernel that
#   refuses TIOCSTI too. The positive control: where the kernel allows
#   TIOCSTI (dev.tty.legacy_tiocsti = 1), the injection into the sandbox's
#   own pty works, so the outer one was really tried.
#   Tried by hand: given the outer terminal as its stdin/stdout/stderr
#   without a session of its own, the sandbox typed four commands into it
#   (the test failed on `injected`); with bwrap's --new-session kept, TIOCSTI
#   was refused but the test failed on the st_dev/st_rdev check.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

LIB="$(cd "$(dirname "$0")" && pwd)/lib"

# A finished job to open shells on.
a_job() {
  new_repo repo
  cd repo
  run_job -m "a job" --command 'echo one >one.txt'
  assert_eq "$RUN_CODE" 0 "run's exit code"
}

test_the_shell_cannot_reach_the_home_the_repository_or_the_network() {
  local secret
  secret="$(sec_secret)"
  printf '%s\n' "$secret" >"$HOME/secret.txt"
  sec_open_up "$HOME"
  a_job
  sec_open_up_dir "$TEST_ROOT" "$PWD/.."
  printf '%s\n' "$secret" >repo-secret.txt
  local repo_before home_before
  repo_before="$(sec_repo_state)"
  home_before="$(sec_tree_state "$HOME")"
  local script="$SEC_PRELUDE
try read-home cat '$HOME/secret.txt'
try list-home ls '$HOME'
try read-repo cat '$PWD/repo-secret.txt'
try write-repo sh -c 'echo x >\"\$0/pwned\"' '$PWD'
try write-repo-git sh -c 'echo x >\"\$0/.git/pwned\"' '$PWD'
try hunt-secret sh -c 'hunt SECRET- | grep SECRET-'
try tcp-out python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=5)'
try dns-out python3 -c 'import socket; socket.getaddrinfo(\"example.com\", 80)'
try host-loopback python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 22), timeout=5)'
try interfaces sh -c 'test \$(ls /sys/class/net | grep -vx lo | wc -l) -gt 0'
finish
"
  expect_exit 0 timeout -k 5 60 sh -c 'printf "%s\n" "$1" | git mullet shell "$2"' _ "$script" "$JOB"
  LOG="$OUT"
  sec_assert_all_denied
  assert_contains "$OUT" "ATTACKS-END 10"
  assert_not_contains "$OUT" "$secret" "the shell's output"
  sec_assert_same "the user's repository" "$repo_before" "$(sec_repo_state)"
  sec_assert_same "the real home ($HOME)" "$home_before" "$(sec_tree_state "$HOME")"
  assert_absent "$PWD/pwned"
}

test_tiocsti_from_the_shell_never_reaches_the_users_terminal() {
  a_job
  rm -f /tmp/pwned-by-tiocsti 2>/dev/null || true
  python3 "$LIB/tiocsti_outer.py" "$PWD/../report.json" \
    timeout -k 5 60 git mullet shell "$JOB" -- python3 -c "$(cat "$LIB/tiocsti_inner.py")"
  local report
  report="$(cat "$PWD/../report.json")"
  assert_eq "$(json_get "$report" .code)" 0 "git mullet shell's exit code (output: $(json_get "$report" .output))"
  assert_eq "$(json_get "$report" .marker_seen)" true "the user's shell read its terminal to the marker"
  local output
  output="$(json_get "$report" .output | tr -d '\r')"
  assert_contains "$output" "INNER-DONE" "what the sandboxed program printed"
  # Nothing was typed into the user's terminal.
  assert_eq "$(json_get "$report" .injected)" "" "what reached the user's terminal's input"
  assert_absent /tmp/pwned-by-tiocsti
  # No descriptor in the sandbox was the user's terminal.
  local tty_dev tty_rdev
  tty_dev="$(json_get "$report" '.tty[0]')"
  tty_rdev="$(json_get "$report" '.tty[1]')"
  local fds
  fds="$(printf '%s\n' "$output" | grep '^FD ')"
  assert_contains "$fds" "FD 0 " "the sandbox's stdin report"
  assert_contains "$fds" "FD tty " "the sandbox's /dev/tty report"
  if printf '%s\n' "$fds" | awk -v d="$tty_dev" -v r="$tty_rdev" '$3 == d && $4 == r {found = 1} END {exit !found}'; then
    fail "the sandbox held the user's terminal ($(json_get "$report" .tty_name)): $fds"
  fi
  # TIOCSTI is refused even on the sandbox's own terminal: the system call
  # filter (security/test_syscall_filter) denies it with EPERM.
  assert_matches "$fds" 'FD 0 [0-9]+ [0-9]+ denied:Operation not permitted' "TIOCSTI on the sandbox's own terminal"
}

test_the_users_terminal_modes_are_restored() {
  a_job
  # stty -a of the terminal before and after, from inside the outer program's
  # command: one shell that runs git mullet shell between two stty calls.
  # --foreground: timeout would otherwise run git-mullet in a process group
  # of its own, in the terminal's background, where changing the terminal's
  # modes stops it (SIGTTOU), as it would any program.
  python3 "$LIB/tiocsti_outer.py" "$PWD/../report.json" \
    sh -c 'stty -g >"$1/before"; timeout --foreground -k 5 60 git mullet shell "$2" -- sh -c "stty -a; exit 0"
      echo $? >"$1/code"; stty -g >"$1/after"' _ "$PWD/.." "$JOB"
  local report
  report="$(cat "$PWD/../report.json")"
  assert_eq "$(json_get "$report" .code)" 0 "exit code"
  assert_eq "$(cat "$PWD/../code")" 0 "git mullet shell's exit code (output: $(json_get "$report" .output))"
  # Inside, a terminal with its usual modes (the pty's own, not raw).
  assert_contains "$(json_get "$report" .output)" "icanon" "stty -a inside"
  assert_eq "$(cat "$PWD/../after")" "$(cat "$PWD/../before")" "the terminal's modes after the shell"
}

test_what_the_session_switched_on_in_the_terminal_is_switched_off() {
  a_job
  # Mouse reporting, the alternate screen and a hidden cursor, left on by
  # the session's output (a worker-planted file the user cats, say).
  python3 "$LIB/tiocsti_outer.py" "$PWD/../report.json" \
    timeout --foreground -k 5 60 git mullet shell "$JOB" -- printf 'SWITCHED\033[?1000h\033[?1047h\033[?25l'
  local output
  output="$(json_get "$(cat "$PWD/../report.json")" .output)"
  assert_contains "$output" "SWITCHED" "the session's output"
  local after="${output#*SWITCHED}"
  for off in $'\033[?1000l' $'\033[?1047l' $'\033[?25h'; do
    assert_contains "$after" "$off" "switched off after the session: $(printf '%q' "$off")"
  done
}

test_an_interactive_shell_on_a_terminal_is_typed_into_and_recorded() {
  a_job
  # Typed at once; the terminal keeps it until the shell reads it.
  OUTER_INPUT=$'echo typed >typed.txt; tty; exit\n' python3 "$LIB/tiocsti_outer.py" "$PWD/../report.json" \
    timeout -k 5 60 git mullet shell --record "$JOB"
  local report output
  report="$(cat "$PWD/../report.json")"
  output="$(json_get "$report" .output | tr -d '\r')"
  assert_eq "$(json_get "$report" .code)" 0 "exit code (output: $output)"
  assert_contains "$output" "recorded as attempt 2 of job $JOB"
  assert_eq "$(json_get "$report" .injected)" "" "what reached the user's terminal's input"
  local result
  result="$(json_field "$(git mullet show --json "$JOB")" result)"
  assert_eq "$(git show "$result:typed.txt")" typed "typed.txt in the recorded attempt"
}

test_the_window_size_reaches_the_shell_and_follows_the_terminal() {
  a_job
  # The program inside says its size, waits for SIGWINCH, then says its size
  # again. The signal is blocked before it says READY and taken with sigwait:
  # one that comes before the wait stays pending (with pause() it was lost,
  # and the test hung, when the resize came between READY and the pause).
  local inner='import os, signal
signal.signal(signal.SIGWINCH, lambda *a: None)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])
print("FIRST", os.get_terminal_size(0).lines, os.get_terminal_size(0).columns, flush=True)
print("READY", flush=True)
signal.sigwait([signal.SIGWINCH])
print("THEN", os.get_terminal_size(0).lines, os.get_terminal_size(0).columns, flush=True)'
  OUTER_SIZE=31x97 OUTER_RESIZE=READY:42x123 python3 "$LIB/tiocsti_outer.py" "$PWD/../report.json" \
    timeout -k 5 60 git mullet shell "$JOB" -- python3 -c "$inner"
  local report output
  report="$(cat "$PWD/../report.json")"
  output="$(json_get "$report" .output | tr -d '\r')"
  assert_eq "$(json_get "$report" .code)" 0 "exit code (output: $output)"
  assert_contains "$output" "FIRST 31 97" "the size at the start"
  assert_contains "$output" "THEN 42 123" "the size after the terminal's changed"
}

run_tests
