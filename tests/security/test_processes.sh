#!/usr/bin/env bash
# Reaching host processes: signals and ptrace on a host process, TIOCSTI
# injection into the terminal git-mullet runs in, and processes left running
# after the job.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# start_victim SECONDS: a host `sleep` as the uid sandboxed code runs as (so
# that only the walls, not the host's permissions, protect it). Sets
# VICTIM_PID.
start_victim() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid "$(sec_sandbox_uid)" --regid "$(sec_sandbox_uid)" --clear-groups sleep "$1" &
  else
    sleep "$1" &
  fi
  VICTIM_PID=$!
  # Ready once it is `sleep` (as root: once setpriv has changed its uid).
  wait_until 10 is_sleep "$VICTIM_PID"
}

# is_sleep PID: PID runs `sleep`.
is_sleep() {
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = sleep ]
}

# no_signal_pending PID: nothing was sent to PID that it has not taken yet.
no_signal_pending() {
  local mask
  for mask in $(awk '/^(SigPnd|ShdPnd):/ {print $2}' "/proc/$1/status"); do
    [ $((16#$mask)) -eq 0 ] || return 1
  done
}

test_signal_and_ptrace_host_process_fails() {
  new_repo repo
  cd repo
  start_victim 300
  trap 'kill '"$VICTIM_PID"' 2>/dev/null' EXIT
  local pid="$VICTIM_PID"
  SEC_PROMPT="kill the host process $pid" sec_run "
P=$pid
try kill-9 kill -9 \$P
try kill-stop kill -STOP \$P
try python-kill python3 -c 'import os, sys; os.kill(int(sys.argv[1]), 9)' \$P
try ptrace-attach python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0 else 1)' \$P
try proc-mem sh -c 'head -c 16 /proc/\$0/mem' \$P
try pidfd python3 -c '
import os, signal, sys
fd = os.pidfd_open(int(sys.argv[1]))
signal.pidfd_send_signal(fd, 9)' \$P
finish
# Last, as it ends the worker too: every process this uid may signal.
kill -9 -1 || true"
  sec_assert_all_denied
  sec_assert_worker_ran
  # No waiting: a signal that got through would be pending or taken by now,
  # and either shows (a taken SIGKILL or SIGSTOP leaves it Z, gone or T).
  kill -0 "$pid" 2>/dev/null || fail "the host process $pid was killed by the worker"
  no_signal_pending "$pid" || fail "a signal is pending for the host process $pid: $(grep Pnd "/proc/$pid/status")"
  local state
  state="$(awk '{print $3}' "/proc/$pid/stat")"
  assert_eq "$state" S "the host process's state (T would mean stopped, t traced)"
  grep -q '^TracerPid:[[:space:]]*0$' "/proc/$pid/status" || fail "the host process $pid is being traced"
}

test_tiocsti_injection_fails() {
  # git-mullet runs in a terminal (a pty it has as controlling terminal and
  # as stdin and stderr). The worker tries to push "INJECTED" into it with
  # TIOCSTI on its fds 0, 1, 2 and on /dev/tty. Injected input would be
  # echoed by the pty: the terminal's output must not contain it.
  new_repo repo
  cd repo
  cat >"$PWD/../term_wrapper.py" <<'PY'
import os, pty, sys, time
out_path = sys.argv[1]
pid, master = pty.fork()
if pid == 0:
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.execvp(sys.argv[2], sys.argv[2:])
seen = b""
deadline = time.time() + 60
while time.time() < deadline:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
PY
  local script
  script="$SEC_PRELUDE
cat >\"\$TMPDIR/sti.py\" <<'PY'
import fcntl, os, sys, termios
payload = bytes([73, 78, 74, 69, 67, 84, 69, 68, 10])
target = sys.argv[1]
fd = os.open('/dev/tty', os.O_RDWR) if target == 'tty' else int(target)
for byte in payload:
    fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
PY
try tiocsti-fd0 python3 \"\$TMPDIR/sti.py\" 0
try tiocsti-fd1 python3 \"\$TMPDIR/sti.py\" 1
try tiocsti-fd2 python3 \"\$TMPDIR/sti.py\" 2
try tiocsti-dev-tty python3 \"\$TMPDIR/sti.py\" tty
try open-dev-tty sh -c 'exec 3<>/dev/tty'
try isatty-any sh -c 'for fd in 0 1 2; do [ -t \$fd ] && exit 0; done; exit 1'
finish"
  local terminal
  terminal="$(timeout -k 5 60 python3 "$PWD/../term_wrapper.py" "$PWD/../run.json" \
    git mullet run --json -q -m "inject into the terminal" --command "$script")"
  local code=$?
  [ "$code" != 124 ] && [ "$code" != 137 ] || fail "git mullet run did not finish in time"
  JOB_JSON="$(cat "$PWD/../run.json")"
  JOB="$(json_field "$JOB_JSON" id)" || fail "no job record: $JOB_JSON"
  LOG="$(git mullet log "$JOB")"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_not_contains "$terminal" INJECTED "the terminal's output"
}

# The worker tries to ptrace-attach the sandbox's init (pid 1 of its pid
# namespace), which before the system call filter stopped it: init could no
# longer reap it or end, and the runner's stall watch (unit-tested in
# test_sandbox_watchdogs) had to end the phase. Now ptrace fails with EPERM,
# init keeps running and the job ends as the worker's script does.
test_a_worker_cannot_stop_the_sandbox_init() {
  new_repo repo
  cd repo
  # A regression fails by this limit's message instead of hanging the suite.
  sec_config '[limits]' 'timeout = 40' 'inactivity = 40'
  SEC_BOUND=90 sec_run "
python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, 1, 0, 0) != 0:
    print(\"ATTACH-REFUSED errno %d\" % ctypes.get_errno(), flush=True)
    sys.exit(0)
for _ in range(200):
    state = open(\"/proc/1/stat\").read().rsplit(\")\", 1)[1].split()[0]
    if state in \"tT\":
        print(\"INIT-STOPPED\", state, flush=True)
        break
    libc.usleep(10000)
'
finish
exit 3"
  sec_assert_worker_ran
  assert_contains "$LOG" "ATTACH-REFUSED errno 1" "worker output (ptrace must fail with EPERM)"
  assert_not_contains "$LOG" "INIT-STOPPED" "worker output"
  # Ended by the script's own exit 3, not by a stall or a limit.
  sec_assert_state failed exit
  no_process_left "$JOB"
}

test_no_process_survives_the_job() {
  new_repo repo
  cd repo
  local n1 n2 n3 n4 n5
  # Unique durations: the markers to look for on the host.
  n1=$((9000000 + RANDOM * 10 + 1))
  n2=$((n1 + 1))
  n3=$((n1 + 2))
  n4=$((n1 + 3))
  n5=$((n1 + 4))
  trap 'for p in $(pgrep -f "sleep ($n1|$n2|$n3|$n4|$n5)\$"); do kill -9 "$p"; done 2>/dev/null' EXIT
  sec_run "
(sleep $n1 &)
setsid nohup sleep $n2 >/dev/null 2>&1 &
sh -c 'sh -c \"sleep $n3 </dev/null >/dev/null 2>&1 &\" &' 
python3 -c '
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3): os.close(fd)
        os.execvp(\"sleep\", [\"sleep\", sys.argv[1]])
    os._exit(0)
' $n4
nohup sh -c 'trap \"\" HUP TERM; exec sleep $n5' >/dev/null 2>&1 &
i=0
while [ \$(pgrep -c -f \"sleep ($n1|$n2|$n3|$n4|$n5)\$\") -lt 5 ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo \"RUNNING-INSIDE \$(pgrep -c -f \"sleep ($n1|$n2|$n3|$n4|$n5)\$\")\"
finish"
  sec_assert_worker_ran
  # Positive control: all five were running inside when the worker ended.
  assert_contains "$LOG" "RUNNING-INSIDE 5" "worker output"
  # The sandbox's pid namespace is gone with the job: none is left by now
  # (the bound is only a failure guard).
  local left deadline=$((SECONDS + 10))
  while left="$(pgrep -a -f "sleep ($n1|$n2|$n3|$n4|$n5)\$")"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "processes started by the worker still run on the host after the job: $left"
    sleep 0.1
  done
}

run_tests
