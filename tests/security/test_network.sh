#!/usr/bin/env bash
# Reaching out: unix sockets the host listens on (in /tmp, /run, /dev/shm,
# the abstract namespace, SSH_AUTH_SOCK), TCP to the host's loopback, name
# resolution. Each listener lives for a bounded time, listens on 127.0.0.1
# or a unix socket only, and records every connection it gets: after the
# job, it must have seen only the host's own control connection.
source "$(dirname "$0")/../lib/harness.sh"
source "$(dirname "$0")/lib/common.bash"

# Worker-side commands (scripts in the worker's TMPDIR, on its PATH, so that
# `sh -c` children have them too): connect_unix PATH, connect_abstract NAME,
# connect_tcp HOST PORT, query_udp HOST PORT NAME (a DNS query).
NET_HELPERS="$(cat <<'EOF'
cat >"$TMPDIR/net.py" <<'PY'
import socket, struct, sys
kind, target = sys.argv[1], sys.argv[2:]
if kind == "unix":
    s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(target[0])
elif kind == "abstract":
    s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect("\0" + target[0])
elif kind == "tcp":
    s = socket.create_connection((target[0], int(target[1])), timeout=3)
elif kind == "udp":
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in target[2].split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.sendto(q, (target[0], int(target[1])))
    print(s.recvfrom(512)); sys.exit(0)
s.sendall(b"worker")
print(s.recv(100))
PY
for kind in unix abstract tcp udp; do
  printf '#!/bin/sh\nexec python3 "%s/net.py" %s "$@"\n' "$TMPDIR" "$kind" >"$TMPDIR/net-$kind"
  chmod +x "$TMPDIR/net-$kind"
done
ln -s net-unix "$TMPDIR/connect_unix"; ln -s net-abstract "$TMPDIR/connect_abstract"
ln -s net-tcp "$TMPDIR/connect_tcp"; ln -s net-udp "$TMPDIR/query_udp"
export PATH="$TMPDIR:$PATH"
EOF
)"

# assert_only_control LOG COUNT: the listener saw COUNT connections or
# datagrams, all of them the host's control ones.
assert_only_control() {
  local seen control
  seen="$(grep -cE '^(ACCEPT|DATAGRAM) ' "$1" || true)"
  control="$(grep -cE '^(ACCEPT|DATAGRAM) .*control' "$1" || true)"
  if [ "$seen" != "$2" ] || [ "$control" != "$2" ]; then
    echo "    listener log:" >&2
    sed 's/^/      /' "$1" >&2
    fail "the host listener got $seen connection(s), $control of them the $2 control one(s): the worker reached it"
  fi
}

test_unix_sockets_of_the_host_unreachable() {
  new_repo repo
  cd repo
  local r paths spec specs=() log="$PWD/../listener.log"
  r="$(sec_random)"
  paths=("/tmp/mullet-sec-$r.sock" "/dev/shm/mullet-sec-$r.sock" "$TEST_ROOT/h$r.sock")
  if [ -w /run ]; then paths+=("/run/mullet-sec-$r.sock"); fi
  for spec in "${paths[@]}"; do specs+=("unix:$spec"); done
  specs+=("abstract:mullet-sec-$r")
  trap 'rm -f '"${paths[*]}" EXIT
  sec_listen "$log" 60 "${specs[@]}"
  trap 'rm -f '"${paths[*]}"'; kill '"$LISTENER_PID"' 2>/dev/null' EXIT
  for spec in "${specs[@]}"; do sec_connect "$spec" control || fail "control connection to $spec failed"; done
  local tries=""
  for spec in "${paths[@]}"; do tries+="try unix-${spec//\//_} connect_unix '$spec'"$'\n'; done
  sec_run "$NET_HELPERS
$tries
try abstract connect_abstract 'mullet-sec-$r'
try any-abstract-socket sh -c 'for n in \$(awk \"NR > 1 && \\\$8 ~ /^@/ {print substr(\\\$8, 2)}\" /proc/net/unix); do connect_abstract \"\$n\" && exit 0; done; exit 1'
try any-socket-file sh -c 'for f in \$(find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o -type s -print 2>/dev/null); do connect_unix \"\$f\" && exit 0; done; exit 1'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_only_control "$log" "${#specs[@]}"
}

test_ssh_auth_sock_unreachable() {
  new_repo repo
  cd repo
  local log="$PWD/../listener.log" sock="$TEST_ROOT/agent-ssh/agent.sock"
  mkdir -p "$TEST_ROOT/agent-ssh"
  sec_listen "$log" 60 "unix:$sock"
  trap 'kill '"$LISTENER_PID"' 2>/dev/null' EXIT
  sec_connect "unix:$sock" control || fail "control connection failed"
  # The user lets the variable in: the worker knows the path.
  sec_config '[sandbox]' 'env = ["SSH_AUTH_SOCK"]'
  SSH_AUTH_SOCK="$sock" sec_run "$NET_HELPERS
[ -n \"\$SSH_AUTH_SOCK\" ] && echo HAS-SSH_AUTH_SOCK
try connect-agent connect_unix \"\$SSH_AUTH_SOCK\"
try ssh-add sh -c 'ssh-add -l; [ \$? -ne 2 ]'
try connect-by-path connect_unix '$sock'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_contains "$LOG" HAS-SSH_AUTH_SOCK "worker output"
  assert_only_control "$log" 1
}

test_ssh_auth_sock_under_system_dir_masked() {
  # A socket named by SSH_AUTH_SOCK inside a directory the sandbox binds
  # read-only (here /opt) would be reachable through that bind: the plan
  # masks it. Only root can create one there.
  if [ ! -w /opt ]; then
    echo "    # skipped: /opt is not writable by $(id -un); this case needs root" >&2
    return 0
  fi
  new_repo repo
  cd repo
  local dir log="$PWD/../listener.log"
  dir="/opt/mullet-sec-$(sec_random)"
  mkdir -m 755 "$dir"
  trap 'rm -rf '"'$dir'" EXIT
  sec_listen "$log" 60 "unix:$dir/agent.sock"
  trap 'rm -rf '"'$dir'"'; kill '"$LISTENER_PID"' 2>/dev/null' EXIT
  sec_connect "unix:$dir/agent.sock" control || fail "control connection failed"
  SSH_AUTH_SOCK="$dir/agent.sock" sec_run "$NET_HELPERS
[ -e '$dir' ] && echo SEES-THE-DIR
try connect-agent connect_unix '$dir/agent.sock'
try any-socket-in-opt sh -c 'for f in \$(find /opt -type s 2>/dev/null); do connect_unix \"\$f\" && exit 0; done; exit 1'
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_only_control "$log" 1
}

test_tcp_to_host_loopback_unreachable() {
  new_repo repo
  cd repo
  local log="$PWD/../listener.log" portfile="$PWD/../port" port
  sec_listen "$log" 60 "tcp:$portfile"
  trap 'kill '"$LISTENER_PID"' 2>/dev/null' EXIT
  port="$(cat "$portfile")"
  sec_connect "tcp:$portfile" control || fail "control connection failed"
  sec_run "$NET_HELPERS
try tcp-127.0.0.1 connect_tcp 127.0.0.1 $port
try tcp-localhost connect_tcp localhost $port
try tcp-127.1.2.3 connect_tcp 127.1.2.3 $port
try tcp-ipv6-mapped connect_tcp ::ffff:127.0.0.1 $port
try bash-dev-tcp bash -c 'exec 3<>/dev/tcp/127.0.0.1/$port && echo worker >&3'
try curl curl -sS -m 3 http://127.0.0.1:$port/
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_only_control "$log" 1
}

test_name_resolution_fails() {
  # Nothing on this machine resolves example.com even outside the sandbox,
  # so besides the resolver itself the worker also sends DNS queries
  # straight to the nameservers it can find and to a UDP responder on the
  # host's loopback, which records every datagram (and answers the host's
  # control query).
  new_repo repo
  cd repo
  local log="$PWD/../listener.log" portfile="$PWD/../port" port
  sec_listen "$log" 60 "udp:$portfile"
  trap 'kill '"$LISTENER_PID"' 2>/dev/null' EXIT
  port="$(cat "$portfile")"
  sec_connect "udp:$portfile" control || fail "control query failed"
  sec_run "$NET_HELPERS
try getent-hosts getent hosts example.com
try getent-ahosts getent ahosts example.com
try python-getaddrinfo python3 -c 'import socket; print(socket.getaddrinfo(\"example.com\", 443))'
try query-host-responder query_udp 127.0.0.1 $port example.com
try query-resolv-conf sh -c 'for ns in \$(awk \"/^nameserver/ {print \\\$2}\" /etc/resolv.conf); do query_udp \"\$ns\" 53 example.com && exit 0; done; exit 1'
try query-public-resolver query_udp 8.8.8.8 53 example.com
finish"
  sec_assert_all_denied
  sec_assert_worker_ran
  assert_only_control "$log" 1
}

run_tests
