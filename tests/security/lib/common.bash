# Shared helpers for the security escape suites (tests/security/test_*.sh).
# Sourced after tests/lib/harness.sh. Not a suite itself (the suite glob is
# tests/security/*.sh; this file lives one directory down).
#
# Conventions:
# - Every attack is a worker script. It starts with $SEC_PRELUDE, which gives
#   it `try NAME CMD...`: runs CMD and prints "ATTACK-OK NAME" when it
#   worked (the wall fell) or "ATTACK-DENIED NAME: <why>" when it failed, and
#   `finish`, which prints "ATTACKS-END <count of tries>" and writes
#   ran.marker into the work tree (the positive control: the worker did run,
#   and its work tree did reach the result commit).
# - Secrets are "SECRET-<random hex>". Workers hunt for the "SECRET-" prefix,
#   so the full secret is never in a worker's script, prompt or record unless
#   the worker really read it.
# - Every `git mullet run` is bounded in time (SEC_BOUND seconds, default 60),
#   and after every one the user's repository (what git-mullet keeps aside)
#   and the real home must be exactly as before.
# - SEC_WORK_TREE is set only by lib/no-sandbox-git-mullet (which has no
#   /mullet/work); SEC_DEBUG=1 prints every job's record and output.

SEC_PRELUDE='
ATTEMPTS=0
try() {
  name="$1"; shift
  ATTEMPTS=$((ATTEMPTS + 1))
  if err="$("$@" 2>&1 >/dev/null)"; then
    echo "ATTACK-OK $name"
  else
    echo "ATTACK-DENIED $name: $(printf "%s" "$err" | tail -n 1)"
  fi
}
# hunt PREFIX: every line in readable files, environments and command lines
# of this sandbox that holds PREFIX. /usr and /opt are the host system, read
# only; /proc and /sys are searched through environ/cmdline below.
hunt() {
  timeout 30 grep -rIasF -e "$1" /etc /home /root /run /tmp /var /mnt /media /srv /mullet /dev/shm 2>/dev/null | head -n 50
  for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
    tr "\000" "\n" <"$f" 2>/dev/null | grep -aF -e "$1" | sed "s|^|$f: |"
  done | head -n 50
}
finish() {
  echo "ATTACKS-END $ATTEMPTS"
  echo ran >"${SEC_WORK_TREE:-/mullet/work}/ran.marker"
}
'

sec_random() {
  od -An -N8 -tx1 /dev/urandom | tr -d ' \n'
}

sec_secret() {
  echo "SECRET-$(sec_random)"
}

# sec_config LINE...: the user config (TOML), replacing any previous one.
sec_config() {
  mkdir -p "$XDG_CONFIG_HOME/git-mullet"
  printf '%s\n' "$@" >"$XDG_CONFIG_HOME/git-mullet/config.toml"
}

# sec_sandbox_uid: the host uid sandboxed code runs as. As root, the first
# of the default [sandbox] uid range: what a job gets while no other job
# of this binary runs.
sec_sandbox_uid() {
  if [ "$(id -u)" -eq 0 ]; then echo 1879048192; else id -u; fi
}

# sec_run SCRIPT [RUN ARGS...]: runs SCRIPT (after $SEC_PRELUDE) as the
# worker of a new job in the current repository, bounded by SEC_BOUND
# seconds. Sets RUN_CODE, JOB_JSON, JOB, LOG (the worker's output) and
# RUN_SECONDS. Fails the test when git-mullet does not finish in time or
# leaves no record.
sec_run() {
  local script="$1"
  shift
  local started=$SECONDS out_file repo_before home_before
  out_file="$(mktemp)"
  repo_before="$(sec_repo_state)"
  home_before="$(sec_tree_state "$HOME")"
  timeout -k 5 "${SEC_BOUND:-60}" git mullet run --json -q -m "${SEC_PROMPT:-security attack}" \
    --command "$SEC_PRELUDE
$script" "$@" >"$out_file"
  RUN_CODE=$?
  RUN_SECONDS=$((SECONDS - started))
  JOB_JSON="$(cat "$out_file")"
  rm -f "$out_file"
  if [ "$RUN_CODE" = 124 ] || [ "$RUN_CODE" = 137 ]; then
    fail "git mullet run did not finish within ${SEC_BOUND:-60}s (it was killed)"
  fi
  JOB="$(json_field "$JOB_JSON" id 2>/dev/null)" || fail "git mullet run left no job record (exit $RUN_CODE): $JOB_JSON"
  LOG="$(git mullet log "$JOB")"
  # Whatever the attack, the user's repository (outside what git-mullet
  # keeps: refs/mullet, .git/mullet, objects) and home are as they were.
  sec_assert_same "the user's repository" "$repo_before" "$(sec_repo_state)"
  sec_assert_same "the real home ($HOME)" "$home_before" "$(sec_tree_state "$HOME")"
  if [ -n "${SEC_DEBUG:-}" ]; then
    echo "    [debug] job $JOB, exit $RUN_CODE, ${RUN_SECONDS}s, state $(sec_jq 'd["state"]')," \
      "ended_by $(sec_jq 'd["phases"][0]["ended_by"] if d["phases"] else None'), warnings $(sec_jq 'd["snapshot_warnings"]')" >&2
    printf '%s\n' "$LOG" | sed 's/^/    [debug] | /' >&2
  fi
}

# sec_jq EXPR: a Python expression over the job record `d` (from JOB_JSON).
sec_jq() {
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
v = eval(sys.argv[2])
print("null" if v is None else v)' "$JOB_JSON" "$1"
}

sec_show() {
  echo "    job $JOB: state $(sec_jq 'd["state"]'), ended_by $(sec_jq 'd["phases"][0]["ended_by"] if d["phases"] else None')," \
    "error $(sec_jq 'd["error"]')" >&2
  echo "    worker output (tail):" >&2
  printf '%s\n' "$LOG" | tail -n 40 | sed 's/^/      | /' >&2
}

# sec_assert_all_denied: every `try` of the worker failed, and the worker got
# to the end of its script.
sec_assert_all_denied() {
  local end count denied
  end="$(printf '%s\n' "$LOG" | sed -n 's/^ATTACKS-END //p' | tail -n 1)"
  if [ -z "$end" ]; then
    sec_show
    fail "the worker never reached the end of its attack script"
  fi
  if printf '%s\n' "$LOG" | grep '^ATTACK-OK ' >/dev/null; then
    sec_show
    fail "attack(s) succeeded: $(printf '%s\n' "$LOG" | grep '^ATTACK-OK ' | tr '\n' ';')"
  fi
  denied="$(printf '%s\n' "$LOG" | grep -c '^ATTACK-DENIED ' || true)"
  count="${1:-$end}"
  [ "$denied" -eq "$count" ] || {
    sec_show
    fail "$denied attempts reported as denied, expected $count"
  }
}

# sec_assert_worker_ran: the positive control. The worker ran to its end and
# what it wrote in its work tree reached the result commit.
sec_assert_worker_ran() {
  assert_contains "$LOG" "ATTACKS-END" "worker output"
  local result
  result="$(sec_jq 'd["result"]')"
  [ "$result" != null ] || {
    sec_show
    fail "job $JOB has no result commit (the worker's ran.marker should be in it)"
  }
  assert_eq "$(git cat-file blob "$result:ran.marker" 2>/dev/null)" ran "ran.marker in the result commit"
}

# sec_assert_state STATE [ENDED_BY]
sec_assert_state() {
  local state ended
  state="$(sec_jq 'd["state"]')"
  ended="$(sec_jq 'd["phases"][0]["ended_by"] if d["phases"] else None')"
  if [ "$state" != "$1" ] || { [ -n "${2:-}" ] && [ "$ended" != "$2" ]; }; then
    sec_show
    fail "job state '$state' ended_by '$ended', expected '$1'${2:+ ended_by '$2'}"
  fi
}

# sec_job_dir [ID]: the job's scratch directory on the host.
sec_job_dir() {
  local common
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  echo "$common/mullet/jobs/${1:-$JOB}"
}

# sec_assert_secret_nowhere SECRET: not in the worker's output, the job
# record, any object of the repository (the result commit, the record
# commits, everything), nor the job's scratch directory (work tree, home,
# log).
sec_assert_secret_nowhere() {
  local secret="$1"
  if printf '%s' "$LOG" | grep -F -- "$secret" >/dev/null; then
    sec_show
    fail "the secret is in the worker's output (git mullet log $JOB)"
  fi
  assert_not_contains "$JOB_JSON" "$secret" "the job record"
  assert_not_contains "$(git mullet show --json "$JOB")" "$secret" "git mullet show"
  if git cat-file --batch-all-objects --batch --unordered 2>/dev/null | grep -aF -- "$secret" >/dev/null; then
    fail "the secret is in an object of the repository (result or record of job $JOB)"
  fi
  local dir
  dir="$(sec_job_dir)"
  if [ -d "$dir" ] && grep -rqaF -- "$secret" "$dir" 2>/dev/null; then
    fail "the secret is in job $JOB's scratch directory: $(grep -rlaF -- "$secret" "$dir" | head -n 3 | tr '\n' ' ')"
  fi
}

# sec_repo_state: what the user has in the current repository, outside what
# git-mullet itself keeps (refs/mullet, .git/mullet, new objects).
sec_repo_state() {
  local top common
  top="$(git rev-parse --show-toplevel)"
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  echo "HEAD: $(git symbolic-ref -q HEAD || echo detached) $(git rev-parse -q --verify HEAD || echo unborn)"
  git for-each-ref --format='%(refname) %(objectname)' | grep -v '^refs/mullet/' || true
  echo "index:"
  git ls-files --stage
  echo "work tree:"
  (cd "$top" && find . -path ./.git -prune -o -printf '%p %y %m %s %l\n' | LC_ALL=C sort)
  (cd "$top" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
  echo "git dir:"
  (cd "$common" && find . \( -path ./objects -o -path ./mullet -o -path ./refs/mullet -o -path ./logs/refs/mullet \) -prune \
    -o ! -name index -printf '%p %y %m %s\n' | LC_ALL=C sort)
  (cd "$common" && find . \( -path ./objects -o -path ./mullet -o -path ./refs/mullet -o -path ./logs/refs/mullet \) -prune \
    -o -type f ! -name index ! -name packed-refs ! -name ORIG_HEAD -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
  echo "objects dir top level:"
  (cd "$common/objects" && find . -maxdepth 2 ! -path './??/*' ! -path './??' -printf '%p %y %m\n' | LC_ALL=C sort)
}

# sec_tree_state DIR: every entry under DIR with type, mode, size, link
# target, and every regular file's hash.
sec_tree_state() {
  (cd "$1" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort)
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}

# sec_assert_same WHAT BEFORE AFTER
sec_assert_same() {
  if [ "$2" != "$3" ]; then
    echo "    $1 changed:" >&2
    diff <(printf '%s\n' "$2") <(printf '%s\n' "$3") | head -n 40 | sed 's/^/      /' >&2
    fail "$1 changed"
  fi
}

# sec_wait_for_file PATH SECONDS
sec_wait_for_file() {
  local deadline=$((SECONDS + $2))
  until [ -e "$1" ]; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# sec_open_up PATH...: as root the sandbox runs as an unprivileged uid, which the
# host's permissions alone would keep out of root's files. So that a test
# proves the mount walls and not just those permissions, its targets are
# opened to everyone (recursively) when the suite runs as root.
sec_open_up() {
  [ "$(id -u)" -eq 0 ] || return 0
  chmod -R a+rwX "$@"
}

# sec_open_up_dir DIR...: the same, for the directories only, not below.
sec_open_up_dir() {
  [ "$(id -u)" -eq 0 ] || return 0
  chmod a+rwx "$@"
}

# sec_listen LOG SECONDS SPEC...: starts a listener on the host for at most
# SECONDS, recording every connection and datagram it gets in LOG, and waits
# until it is ready. SPEC is unix:PATH, abstract:NAME, tcp:PORTFILE or
# udp:PORTFILE (the port it got is written to PORTFILE; it listens on
# 127.0.0.1 only). Unix sockets are mode 0777 so that, as root, the sandbox's uid
# would be allowed to connect were the socket visible. Sets LISTENER_PID.
sec_listen() {
  local log="$1" seconds="$2"
  shift 2
  cat >"$TEST_ROOT/listener.py" <<'PY'
import os, select, socket, sys, time
log = open(sys.argv[1], "a", buffering=1)
deadline = time.time() + float(sys.argv[2])
socks = {}
for spec in sys.argv[3:]:
    kind, _, arg = spec.partition(":")
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(arg)
        os.chmod(arg, 0o777)
        s.listen(16)
    elif kind == "abstract":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0" + arg)
        s.listen(16)
    elif kind in ("tcp", "udp"):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        if kind == "tcp":
            s.listen(16)
        with open(arg + ".tmp", "w") as f:
            f.write(str(s.getsockname()[1]))
        os.rename(arg + ".tmp", arg)
    socks[s] = spec
log.write("READY\n")
while time.time() < deadline:
    ready, _, _ = select.select(list(socks), [], [], 0.2)
    for s in ready:
        if s.type == socket.SOCK_DGRAM:
            data, addr = s.recvfrom(4096)
            log.write("DATAGRAM %s %r\n" % (socks[s], data[:80]))
            s.sendto(data[:2] + b"\x81\x80" + data[4:], addr)
            continue
        conn, _ = s.accept()
        conn.settimeout(1)
        try:
            data = conn.recv(200)
        except OSError:
            data = b""
        log.write("ACCEPT %s %r\n" % (socks[s], data))
        try:
            conn.sendall(b"hello from the host\n")
        except OSError:
            pass
        conn.close()
PY
  : >"$log"
  timeout -k 2 "$seconds" python3 "$TEST_ROOT/listener.py" "$log" "$seconds" "$@" &
  LISTENER_PID=$!
  local deadline=$((SECONDS + 10))
  until grep -q READY "$log" 2>/dev/null; do
    kill -0 "$LISTENER_PID" 2>/dev/null || fail "the listener did not start"
    [ "$SECONDS" -lt "$deadline" ] || fail "the listener did not get ready"
    sleep 0.1
  done
}

# sec_connect SPEC MESSAGE: one connection from the host (the positive
# control that the listener works), sending MESSAGE.
sec_connect() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
kind, _, arg = sys.argv[1].partition(":")
if kind == "unix":
    s = socket.socket(socket.AF_UNIX); s.connect(arg)
elif kind == "abstract":
    s = socket.socket(socket.AF_UNIX); s.connect("\0" + arg)
elif kind == "tcp":
    s = socket.create_connection(("127.0.0.1", int(open(arg).read())))
elif kind == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.sendto(sys.argv[2].encode(), ("127.0.0.1", int(open(arg).read())))
    s.recvfrom(512)
    sys.exit(0)
s.settimeout(3)
s.sendall(sys.argv[2].encode())
assert s.recv(100).startswith(b"hello")
PY
}
