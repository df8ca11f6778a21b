#!/usr/bin/env bash
# The network phases: a phase reaches only what its grants name, through the
# egress proxy (absolute-URI requests and CONNECT tunnels), every decision is
# in the job record, nothing else gets out (no proxy variables, no route, the
# proxy's own socket refuses the same), nothing is left running or listening
# when the job ends, dependency directories setup created are read-only for the
# worker and left out of the result, the repository's .mullet.toml can only
# narrow the grants, to host names (never an address, in any spelling, not
# even under "*" or one the user lists), and --dry-run shows them.
#
# Everything stays on loopback: the servers here bind 127.0.0.1 on an
# ephemeral port, live at most 120 s and are killed when their test ends.
source "$(dirname "$0")/../lib/harness.sh"

# ---------------------------------------------------------------------------
# A loopback server that logs every connection (one JSON line per accept and
# per close, with the exact bytes it received and sent).
#   server.py http PORTFILE LOGFILE DIR   serves DIR's files (one request per connection)
#   server.py echo PORTFILE LOGFILE       echoes bytes until the client closes
cat >"$TEST_ROOT/server.py" <<'PY'
import json, os, socket, sys, threading

mode, port_file, log_file = sys.argv[1:4]
root = sys.argv[4] if len(sys.argv) > 4 else None
lock = threading.Lock()

def log(entry):
    with lock, open(log_file, "a") as out:
        out.write(json.dumps(entry) + "\n")

def echo(conn):
    received = sent = 0
    try:
        conn.settimeout(60)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            received += len(data)
            conn.sendall(data)
            sent += len(data)
    except OSError:
        pass
    finally:
        conn.close()
        log({"event": "close", "received": received, "sent": sent})

def http(conn):
    data = b""
    sent = 0
    line = host = ""
    try:
        conn.settimeout(20)
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        line = lines[0]
        for header in lines[1:]:
            if header.lower().startswith("host:"):
                host = header[5:].strip()
        parts = line.split(" ")
        path = parts[1] if len(parts) > 1 else ""
        body = None
        if path.startswith("/") and ".." not in path:
            candidate = os.path.join(root, path.lstrip("/"))
            if os.path.isfile(candidate):
                with open(candidate, "rb") as f:
                    body = f.read()
        if body is None:
            response = b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        else:
            response = (b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
        conn.sendall(response)
        sent = len(response)
    except OSError:
        pass
    finally:
        conn.close()
        log({"event": "close", "request": line, "host": host, "received": len(data), "sent": sent})

server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
handler = echo if mode == "echo" else http
while True:
    conn, peer = server.accept()
    log({"event": "accept", "peer": peer[0]})
    threading.Thread(target=handler, args=(conn,), daemon=True).start()
PY

# The probes the phases run inside the sandbox (committed into the base, so
# the clone has them). Each prints one line.
#   net.py env                         the proxy variables, or "no proxy variables"
#   net.py get URL OUT                 urllib (honours the proxy variables): "ok BYTES" or "error ..."
#   net.py connect VIA HOST PORT N     CONNECT through the bridge (VIA=tcp) or the proxy's own
#                                      socket (VIA=unix), then N random bytes there and back
#   net.py rawget VIA URL              an absolute-URI GET by hand: "status CODE BYTES"
#   net.py tunnelget HOST PORT PATH    http.client's GET through a CONNECT tunnel (set_tunnel)
#   net.py direct HOST PORT            a plain TCP connection: "connected" or "error ERRNO"
#   net.py linger MARK                 leaves a daemon listening on 127.0.0.1 behind
#   net.py wait PATH SECONDS           waits for PATH to exist
NET_PY='import errno, os, socket, sys, threading, time, urllib.request

def open_via(via):
    if via == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect("/mullet/proxy.sock")
        return s
    return socket.create_connection(("127.0.0.1", 3128), timeout=15)

def read_all(s, data=b""):
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk

def split_head(data):
    head, _, rest = data.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n")[0].decode("latin-1").split(" ")
    return (parts[1] if len(parts) > 1 else "none"), rest

def error_text(e):
    name = errno.errorcode.get(getattr(e, "errno", None) or 0, "")
    return "error %s %s: %s" % (type(e).__name__, name, e)

def env():
    names = [n for n in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy") if n in os.environ]
    return " ".join("%s=%s" % (n, os.environ[n]) for n in names) or "no proxy variables"

def get(url, out):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            body = r.read()
    except Exception as e:
        return error_text(e)
    with open(out, "wb") as f:
        f.write(body)
    return "ok %d" % len(body)

def connect(via, host, port, n):
    n = int(n)
    try:
        s = open_via(via)
        s.sendall(("CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n" % (host, port, host, port)).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        code, rest = split_head(data)
        if code != "200":
            body = read_all(s, rest).decode("latin-1").strip()
            return "status %s %s" % (code, body)
        payload = os.urandom(n)
        sender = threading.Thread(target=s.sendall, args=(payload,))
        sender.start()
        got = bytearray(rest)
        while len(got) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        sender.join()
        s.close()
        return ("ok %d" % len(got)) if bytes(got) == payload else ("mismatch %d" % len(got))
    except Exception as e:
        return error_text(e)

def rawget(via, url):
    try:
        s = open_via(via)
        host = url.split("/")[2]
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, host)).encode())
        code, rest = split_head(read_all(s))
        return "status %s %d %s" % (code, len(rest), rest[:200].decode("latin-1").strip())
    except Exception as e:
        return error_text(e)

def tunnelget(host, port, path):
    import http.client
    try:
        conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=15)
        conn.set_tunnel(host, int(port))
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return "status %d %d %s" % (r.status, len(body), body.decode("latin-1").strip())
    except Exception as e:
        return error_text(e)

def direct(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return "connected"
    except Exception as e:
        return error_text(e)

def linger(mark):
    if os.fork() > 0:
        return "lingering"
    os.setsid()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    time.sleep(300)
    os._exit(0)

def wait(path, seconds):
    deadline = time.time() + float(seconds)
    while not os.path.exists(path):
        if time.time() > deadline:
            return "timeout"
        time.sleep(0.05)
    return "go"

what = sys.argv[1]
print("%s %s -> %s" % (what, " ".join(sys.argv[2:]), globals()[what](*sys.argv[2:])), flush=True)
'

# net_repo DIR: a repository whose base has net.py and a payload.
net_repo() {
  new_repo "$1"
  printf '%s' "$NET_PY" >"$1/net.py"
  git -C "$1" add net.py
  git -C "$1" commit -qm "network probes"
}

# grant_config SETUP WORKER [EXTRA]: the user config's grants (TOML array
# bodies, e.g. '"127.0.0.1:80"'), a bounded job, and EXTRA lines.
grant_config() {
  mkdir -p "$XDG_CONFIG_HOME/git-mullet"
  printf '[network]\nsetup = [%s]\nworker = [%s]\n\n[limits]\ntimeout = 60\n%s\n' "$1" "$2" "${3:-}" \
    >"$XDG_CONFIG_HOME/git-mullet/config.toml"
}

SERVER_PIDS=()
SERVER_DIR=
stop_servers() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${SERVER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# start_server MODE NAME [DIR]: a loopback server (see server.py) logging to
# $PWD/NAME.log; sets the variable NAME to its port.
start_server() {
  local mode="$1" name="$2" dir="${3:-}"
  if [ "${#SERVER_PIDS[@]}" -eq 0 ]; then
    trap stop_servers EXIT
    SERVER_DIR="$PWD"
  fi
  timeout 120 python3 "$TEST_ROOT/server.py" "$mode" "$SERVER_DIR/$name.port" "$SERVER_DIR/$name.log" $dir &
  SERVER_PIDS+=($!)
  wait_until 20 test -s "$SERVER_DIR/$name.port"
  : >>"$SERVER_DIR/$name.log"
  printf -v "$name" '%s' "$(cat "$SERVER_DIR/$name.port")"
}

# accepts NAME: how many connections server NAME has accepted; closes NAME:
# how many it has finished (and logged the bytes of); server_log NAME.
accepts() { grep -c '"event": "accept"' "$SERVER_DIR/$1.log" || true; }
closes() { grep -c '"event": "close"' "$SERVER_DIR/$1.log" || true; }
server_log() { cat "$SERVER_DIR/$1.log"; }
# wait_closes NAME N: until server NAME has finished N connections.
closes_at_least() { [ "$(closes "$1")" -ge "$2" ]; }
wait_closes() { wait_until 10 closes_at_least "$1" "$2"; }

# probe_from_host NAME: one connection from the host, so the server's log is
# known to work (the positive control for "no connection arrived").
probe_from_host() {
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()' "$1"
  wait_closes "$2" 1
}

# result_file PATH: PATH in the job's result commit.
result_file() {
  local result
  result="$(json_field "$JOB_JSON" result)"
  [ "$result" != null ] || fail "the job made no result commit: $JOB_JSON"
  git show "$result:$1"
}

# decisions PHASE_INDEX: that phase's proxy decisions, one compact JSON each,
# without the time.
decisions() { printf '%s' "$JOB_JSON" | jq -c ".phases[$1].network[] | del(.time)"; }

# ---------------------------------------------------------------------------

test_setup_fetches_a_file_through_the_proxy() {
  mkdir files
  head -c 5000 /dev/urandom >files/pkg.bin
  start_server http HTTP "$PWD/files"
  net_repo repo
  cd repo
  grant_config "\"127.0.0.1:$HTTP\"" ""
  run_job -m fetch --setup "python3 net.py get http://127.0.0.1:$HTTP/pkg.bin fetched.bin" --command 'true'
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  # The file landed in the clone, and so in the result commit, byte for byte.
  assert_eq "$(result_file fetched.bin | sha256sum | cut -d' ' -f1)" "$(file_sha256 ../files/pkg.bin)" "fetched bytes"
  # The record: the setup phase's grants and its one decision.
  assert_eq "$(json_get "$JOB_JSON" '[.phases[].name]')" '["setup","worker"]' "phases"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].grants')" "[\"127.0.0.1:$HTTP\"]" "setup grants"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].network | length')" 1 "setup decisions"
  local d
  d="$(decisions 0)"
  assert_eq "$(json_get "$d" '[.method, .host, .port, .allowed, .reason] | tojson')" \
    "[\"GET\",\"127.0.0.1\",$HTTP,true,\"on the allow list\"]" "the decision"
  assert_matches "$(json_get "$JOB_JSON" '.phases[0].network[0].time')" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "decision time"
  # The server saw one request, in origin form, with its own Host, and the
  # record counts exactly the bytes that went each way.
  wait_closes HTTP 1
  assert_eq "$(accepts HTTP)" 1 "connections to the server"
  local seen
  seen="$(server_log HTTP | grep '"close"')"
  assert_eq "$(json_get "$seen" .request)" "GET /pkg.bin HTTP/1.1" "request line upstream"
  assert_eq "$(json_get "$seen" .host)" "127.0.0.1:$HTTP" "Host upstream"
  assert_eq "$(json_get "$d" .bytes_up)" "$(json_get "$seen" .received)" "bytes_up"
  assert_eq "$(json_get "$d" .bytes_down)" "$(json_get "$seen" .sent)" "bytes_down"
  [ "$(json_get "$d" .bytes_down)" -gt 5000 ] || fail "bytes_down does not cover the file: $d"
  # The worker had no grants: nothing in its record.
  assert_eq "$(json_get "$JOB_JSON" '.phases[1].grants')" '[]' "worker grants"
  assert_eq "$(json_get "$JOB_JSON" '.phases[1].network')" '[]' "worker decisions"
  # The stored record says the same as the printed one.
  assert_eq "$(git mullet show --json "$JOB" | jq -c '.phases[0].network | map(del(.time))')" \
    "$(printf '%s' "$JOB_JSON" | jq -c '.phases[0].network | map(del(.time))')" "stored decisions"
}

test_the_worker_reaches_the_server_only_when_granted() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server http HTTP "$PWD/files"
  net_repo repo
  cd repo
  local url="http://127.0.0.1:$HTTP/data.txt"
  # Setup is granted the server, the worker is not.
  grant_config "\"127.0.0.1:$HTTP\"" ""
  run_job -m no-grant --setup "python3 net.py get $url setup.txt >setup-report" \
    --command "{ python3 net.py env; python3 net.py get $url worker.txt; python3 net.py direct 127.0.0.1 $HTTP; } >worker-report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  assert_contains "$(result_file setup-report)" "-> ok 8" "setup (the positive control)"
  local report
  report="$(result_file worker-report)"
  assert_contains "$report" "env  -> no proxy variables" "worker report"
  assert_matches "$report" "get $url worker.txt -> error URLError.*(refused|ECONNREFUSED)" "worker report"
  assert_matches "$report" "direct 127.0.0.1 $HTTP -> error ConnectionRefusedError ECONNREFUSED" "worker report"
  git cat-file -e "$(json_field "$JOB_JSON" result):worker.txt" 2>/dev/null && fail "the worker fetched the file"
  wait_closes HTTP 1
  assert_eq "$(accepts HTTP)" 1 "connections (setup's only)"
  assert_eq "$(json_get "$JOB_JSON" '.phases[1].network')" '[]' "worker decisions"

  # Now the worker is granted it.
  grant_config "" "\"127.0.0.1:$HTTP\""
  run_job -m grant --command "{ python3 net.py env; python3 net.py get $url worker.txt; } >worker-report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[].name]')" '["worker"]' "phases"
  report="$(result_file worker-report)"
  assert_contains "$report" "HTTP_PROXY=http://127.0.0.1:3128" "worker report"
  assert_contains "$report" "https_proxy=http://127.0.0.1:3128" "worker report"
  assert_contains "$report" "-> ok 8" "worker report"
  assert_eq "$(result_file worker.txt)" payload "fetched file"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].grants')" "[\"127.0.0.1:$HTTP\"]" "worker grants"
  assert_eq "$(decisions 0 | jq -c '[.method, .host, .port, .allowed]')" "[\"GET\",\"127.0.0.1\",$HTTP,true]" "decision"
  wait_closes HTTP 2
  assert_eq "$(accepts HTTP)" 2 "connections"
}

test_uploads_stop_at_limits_egress_mb() {
  start_server echo ECHO
  net_repo repo
  cd repo
  # 50 MB through a granted tunnel with a cap of 5 MiB. The worker would
  # wait for the phase's timeout afterwards: only the cap can end it early.
  grant_config "" "\"127.0.0.1:$ECHO\"" 'egress_mb = 5'
  run_job -m upload --command "python3 net.py connect tcp 127.0.0.1 $ECHO 52428800; exec sleep 600"
  [ "$RUN_CODE" = 1 ] || fail "the job did not fail ($RUN_CODE): $JOB_JSON"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" egress "how the worker ended"
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.egress_mb" "the error names the limit"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].upload.limit_bytes')" 5242880 "the cap in the record"
  local recorded
  recorded="$(json_get "$JOB_JSON" ".phases[0].upload.bytes_up[\"127.0.0.1:$ECHO\"]")"
  [ "$recorded" -gt 0 ] && [ "$recorded" -le 5242880 ] || fail "bytes up recorded: $recorded"
  assert_contains "$(decisions 0)" "cut at the upload limit (limits.egress_mb)" "the decision"
  # What the server received: no more than the record says went out (the
  # cut resets the connection, which may drop what the server had not read).
  wait_closes ECHO 1
  local received
  received="$(server_log ECHO | grep '"close"' | jq -s 'map(.received) | add')"
  [ "$received" -gt 0 ] && [ "$received" -le "$recorded" ] || fail "the server received $received bytes (recorded $recorded)"
}

# free_port: a loopback port nothing listens on (bound, then closed).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

test_connect_tunnels_only_to_granted_destinations() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server echo ECHO
  start_server echo OTHER
  start_server http HTTP "$PWD/files"
  probe_from_host "$OTHER" OTHER
  local dead
  dead="$(free_port)"
  net_repo repo
  cd repo
  grant_config "" "\"127.0.0.1:$ECHO\", \"127.0.0.1:$HTTP\", \"127.0.0.1:$dead\""
  run_job -m tunnel --command "{ python3 net.py connect tcp 127.0.0.1 $ECHO 300000
    python3 net.py connect tcp 127.0.0.1 $OTHER 10
    python3 net.py tunnelget 127.0.0.1 $HTTP /data.txt
    python3 net.py connect tcp 127.0.0.1 $dead 10; } >report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local report
  report="$(result_file report)"
  assert_contains "$report" "connect tcp 127.0.0.1 $ECHO 300000 -> ok 300000" "round trip"
  assert_contains "$report" "connect tcp 127.0.0.1 $OTHER 10 -> status 403" "non-granted port"
  assert_contains "$report" "CONNECT 127.0.0.1:$OTHER: not on the allow list" "the refusal's body"
  assert_contains "$report" "tunnelget 127.0.0.1 $HTTP /data.txt -> status 200 8 payload" "http.client through a tunnel"
  assert_contains "$report" "connect tcp 127.0.0.1 $dead 10 -> status 502" "granted but nothing listening"
  # The echo server saw the bytes once each way; the other one nothing.
  wait_closes ECHO 1
  wait_closes HTTP 1
  assert_eq "$(accepts ECHO)" 1 "connections to the granted server"
  assert_eq "$(json_get "$(server_log ECHO | grep '"close"')" '[.received, .sent] | tojson')" '[300000,300000]' "echoed"
  assert_eq "$(accepts OTHER)" 1 "connections to the other server (the host's probe only)"
  assert_eq "$(json_get "$(server_log HTTP | grep '"close"')" .request)" "GET /data.txt HTTP/1.1" "the tunnelled request"
  # Every decision in the record, with the bytes of the tunnels.
  local http_seen
  http_seen="$(server_log HTTP | grep '"close"')"
  assert_eq "$(decisions 0 | jq -sc 'map([.method, .host, .port, .allowed, .reason, .bytes_up, .bytes_down])')" \
    "[[\"CONNECT\",\"127.0.0.1\",$ECHO,true,\"on the allow list\",300000,300000],[\"CONNECT\",\"127.0.0.1\",$OTHER,false,\"not on the allow list\",0,0],[\"CONNECT\",\"127.0.0.1\",$HTTP,true,\"on the allow list\",$(json_get "$http_seen" .received),$(json_get "$http_seen" .sent)],[\"CONNECT\",\"127.0.0.1\",$dead,true,\"upstream unreachable: Connection refused\",0,0]]" \
    "decisions"
}

test_loopback_by_name_is_refused_even_when_granted() {
  start_server echo ECHO
  start_server echo CONTROL
  net_repo repo
  cd repo
  # Another name /etc/hosts maps to 127.0.0.1, when the host has one: refused
  # because of the address it resolves to, not because of its name.
  local alias
  alias="$(awk '$1 == "127.0.0.1" { for (i = 2; i <= NF; i++) if ($i !~ /^localhost/) { print $i; exit } }' /etc/hosts)"
  local grants="\"localhost:$ECHO\", \"127.0.0.1:$CONTROL\"" cmd="python3 net.py connect tcp localhost $ECHO 10"
  if [ -n "$alias" ]; then
    grants="$grants, \"$alias:$ECHO\""
    cmd="$cmd; python3 net.py connect tcp $alias $ECHO 10"
  fi
  grant_config "" "$grants"
  run_job -m loopback --command "{ $cmd; python3 net.py connect tcp 127.0.0.1 $CONTROL 1000; } >report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local report
  report="$(result_file report)"
  assert_contains "$report" "connect tcp localhost $ECHO 10 -> status 403" "localhost"
  assert_contains "$report" "connect tcp 127.0.0.1 $CONTROL 1000 -> ok 1000" "the exact address (the positive control)"
  assert_eq "$(decisions 0 | jq -c 'select(.host == "localhost") | [.method, .port, .allowed, .reason]')" \
    "[\"CONNECT\",$ECHO,false,\"localhost is a loopback name\"]" "the localhost decision"
  if [ -n "$alias" ]; then
    assert_contains "$report" "connect tcp $alias $ECHO 10 -> status 403" "$alias"
    assert_eq "$(decisions 0 | jq -c --arg h "$alias" 'select(.host == $h) | [.allowed, .reason]')" \
      '[false,"resolves to a loopback address 127.0.0.1"]' "the $alias decision"
  fi
  wait_closes CONTROL 1
  assert_eq "$(accepts CONTROL)" 1 "connections to the exact address"
  assert_eq "$(accepts ECHO)" 0 "connections to the server granted by name"
}

test_a_star_grant_never_reaches_the_host() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server http HTTP "$PWD/files"
  start_server echo CONTROL
  net_repo repo
  cd repo
  # "*" is any destination but the host's and its networks': every spelling
  # of loopback (by name, by address, IPv6, mapped, numeric forms), private,
  # link-local (cloud metadata) and unspecified addresses is refused before
  # any connection is tried.
  grant_config "" '"*", "127.0.0.1:'"$CONTROL"'"'
  local targets=(127.0.0.1 "[::1]" "[::ffff:127.0.0.1]" "[::127.0.0.1]" "[64:ff9b::7f00:1]" "[2002:7f00:1::]"
    0.0.0.0 127.0.0.2 localhost LOCALHOST localhost. sub.localhost 10.0.0.1 172.16.0.1 192.168.0.1 169.254.169.254
    100.64.0.1 "[fe80::1]")
  # Spellings that are no host at all (net/grant.hpp): malformed requests.
  local malformed=(127.1 2130706433 0x7f000001 017700000001 ::ffff:127.0.0.1)
  local cmd="" target
  for target in "${targets[@]}" "${malformed[@]}"; do cmd="$cmd python3 net.py connect tcp $target $HTTP 10;"; done
  run_job -m star --command "{ $cmd
    python3 net.py get http://127.0.0.1:$HTTP/data.txt got.txt
    python3 net.py connect tcp 127.0.0.1 $CONTROL 100; } >report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local report
  report="$(result_file report)"
  assert_contains "$report" "connect tcp 127.0.0.1 $CONTROL 100 -> ok 100" "the exact grant (the positive control)"
  for target in "${targets[@]}"; do
    assert_contains "$report" "connect tcp $target $HTTP 10 -> status 403 " "$target"
  done
  for target in "${malformed[@]}"; do
    assert_contains "$report" "connect tcp $target $HTTP 10 -> status 400 " "$target"
  done
  assert_matches "$report" "get http://127.0.0.1:$HTTP/data.txt got.txt -> error HTTPError.*403" "absolute-URI GET"
  assert_eq "$(decisions 0 | jq -s 'map(select(.allowed == false)) | length')" \
    "$((${#targets[@]} + ${#malformed[@]} + 1))" "refusals in the record"
  assert_eq "$(decisions 0 | jq -c 'select(.host == "169.254.169.254") | [.allowed, .reason]')" \
    '[false,"resolves to a link-local address 169.254.169.254"]' "the metadata address's decision"
  wait_closes CONTROL 1
  assert_eq "$(accepts HTTP)" 0 "connections to the server"
}

test_each_phase_gets_its_own_grants() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server http HTTP "$PWD/files"
  start_server echo ECHO
  net_repo repo
  cd repo
  local url="http://127.0.0.1:$HTTP/data.txt"
  grant_config "\"127.0.0.1:$HTTP\"" "\"127.0.0.1:$ECHO\""
  run_job -m phases \
    --setup "{ python3 net.py get $url setup.txt; python3 net.py connect tcp 127.0.0.1 $ECHO 10; } >setup-report" \
    --command "{ python3 net.py get $url worker.txt; python3 net.py connect tcp 127.0.0.1 $ECHO 10; } >worker-report"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local setup worker
  setup="$(result_file setup-report)"
  worker="$(result_file worker-report)"
  assert_contains "$setup" "get $url setup.txt -> ok 8" "setup report"
  assert_contains "$setup" "connect tcp 127.0.0.1 $ECHO 10 -> status 403" "setup report"
  assert_matches "$worker" "get $url worker.txt -> error HTTPError.*403" "worker report"
  assert_contains "$worker" "connect tcp 127.0.0.1 $ECHO 10 -> ok 10" "worker report"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[] | [.name, .grants]]')" \
    "[[\"setup\",[\"127.0.0.1:$HTTP\"]],[\"worker\",[\"127.0.0.1:$ECHO\"]]]" "grants"
  assert_eq "$(decisions 0 | jq -sc 'map([.method, .port, .allowed])')" \
    "[[\"GET\",$HTTP,true],[\"CONNECT\",$ECHO,false]]" "setup decisions"
  assert_eq "$(decisions 1 | jq -sc 'map([.method, .port, .allowed])')" \
    "[[\"GET\",$HTTP,false],[\"CONNECT\",$ECHO,true]]" "worker decisions"
  wait_closes HTTP 1
  wait_closes ECHO 1
  assert_eq "$(accepts HTTP) $(accepts ECHO)" "1 1" "connections"
}

test_a_failing_setup_keeps_its_decisions_and_the_worker_never_runs() {
  start_server echo ECHO
  net_repo repo
  cd repo
  grant_config "\"127.0.0.1:$ECHO\"" "\"127.0.0.1:$ECHO\""
  run_job -m failing --setup "python3 net.py connect tcp 127.0.0.1 $ECHO 10; python3 net.py connect tcp 127.0.0.1 1 10; exit 7" \
    --command "python3 net.py connect tcp 127.0.0.1 $ECHO 10" 2>../stderr
  assert_contains "$(cat ../stderr)" "the setup phase failed (exit code 7)" "stderr"
  [ "$RUN_CODE" != 0 ] || fail "the job succeeded: $JOB_JSON"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_contains "$(json_field "$JOB_JSON" error)" "setup phase failed"
  assert_eq "$(json_field "$JOB_JSON" result)" null
  assert_eq "$(json_get "$JOB_JSON" '[.phases[].name]')" '["setup"]' "phases"
  assert_eq "$(decisions 0 | jq -sc 'map([.method, .port, .allowed, .reason, .bytes_up])')" \
    "[[\"CONNECT\",$ECHO,true,\"on the allow list\",10],[\"CONNECT\",1,false,\"not on the allow list\",0]]" "setup decisions"
  wait_closes ECHO 1
  assert_eq "$(accepts ECHO)" 1 "connections (the setup's only)"
}

test_no_way_around_the_proxy() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server http HTTP "$PWD/files"
  start_server echo ECHO
  start_server echo OTHER
  probe_from_host "$OTHER" OTHER
  net_repo repo
  cd repo
  local url="http://127.0.0.1:$HTTP/data.txt"
  grant_config "" "\"127.0.0.1:$HTTP\", \"127.0.0.1:$ECHO\""
  run_job -m around --command "{
    python3 net.py get $url via-proxy.txt
    env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy python3 net.py get $url direct.txt
    python3 net.py direct 127.0.0.1 $HTTP
    python3 net.py direct 127.0.0.1 $OTHER
    python3 net.py direct 192.0.2.1 80
    python3 net.py direct 127.0.0.1 3128
    grep -v -e '|' -e '^ *lo:' /proc/net/dev | sed 's/^/netdev /'
    python3 net.py connect unix 127.0.0.1 $ECHO 100
    python3 net.py connect unix 127.0.0.1 $OTHER 10
    python3 net.py connect unix localhost $HTTP 10
    python3 net.py rawget unix http://127.0.0.1:$OTHER/data.txt
    python3 net.py rawget unix $url
  } >report 2>&1"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local report
  report="$(result_file report)"
  # Through the proxy it works (the positive control) ...
  assert_contains "$report" "get $url via-proxy.txt -> ok 8" "via the proxy"
  assert_contains "$report" "direct 127.0.0.1 3128 -> connected" "the bridge"
  # ... around it there is no route.
  assert_matches "$report" "get $url direct.txt -> error URLError.*(refused|ECONNREFUSED)" "without proxy variables"
  assert_contains "$report" "direct 127.0.0.1 $HTTP -> error ConnectionRefusedError ECONNREFUSED" "direct"
  assert_contains "$report" "direct 127.0.0.1 $OTHER -> error ConnectionRefusedError ECONNREFUSED" "direct"
  assert_matches "$report" "direct 192.0.2.1 80 -> error OSError ENETUNREACH" "off the host"
  assert_not_contains "$report" "netdev " "interfaces other than lo"
  # The proxy's own socket makes the same decisions as the bridge.
  assert_contains "$report" "connect unix 127.0.0.1 $ECHO 100 -> ok 100" "the socket, granted (positive control)"
  assert_contains "$report" "connect unix 127.0.0.1 $OTHER 10 -> status 403" "the socket, not granted"
  assert_contains "$report" "connect unix localhost $HTTP 10 -> status 403" "the socket, localhost"
  assert_contains "$report" "rawget unix http://127.0.0.1:$OTHER/data.txt -> status 403" "the socket, GET not granted"
  assert_contains "$report" "rawget unix $url -> status 200 8 payload" "the socket, GET granted"
  # The servers got the proxied requests only (the GET and the raw GET; the
  # tunnel); the other server only the host's probe.
  wait_closes HTTP 2
  assert_eq "$(accepts HTTP)" 2 "connections to the granted HTTP server"
  assert_eq "$(accepts ECHO)" 1 "connections to the granted echo server"
  assert_eq "$(accepts OTHER)" 1 "connections to the other server"
  assert_eq "$(decisions 0 | jq -sc 'map(select(.allowed == false) | [.method, .host, .port, .reason])')" \
    "[[\"CONNECT\",\"127.0.0.1\",$OTHER,\"not on the allow list\"],[\"CONNECT\",\"localhost\",$HTTP,\"not on the allow list\"],[\"GET\",\"127.0.0.1\",$OTHER,\"not on the allow list\"]]" \
    "refusals"
  assert_eq "$(decisions 0 | jq -s 'map(select(.allowed)) | length')" 3 "allowed decisions"
}

# proc_table [TEXT]: "PID PPID STARTTIME ARGV0 ARGV1 ..." for every process
# we can see (with TEXT in its command line: the search itself left out).
proc_table() {
  PROC_MATCH="${1:-}" python3 - <<'PY'
import os
match = os.environ["PROC_MATCH"]
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        with open("/proc/%s/stat" % pid) as f:
            stat = f.read()
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        continue
    fields = stat[stat.rindex(")") + 2:].split()
    line = " ".join(a.decode("utf-8", "replace") for a in argv if a)
    if match in line and int(pid) != os.getpid():
        print(pid, fields[1], fields[19], line)
PY
}

# descendants PID: the proc_table lines of PID's descendants.
descendants() {
  proc_table | awk -v root="$1" '
    { line[$1] = $0; parent[$1] = $2 }
    END { for (p in line) { q = parent[p]; n = 0
            while (q != "" && q != root && n++ < 64) q = parent[q]
            if (q == root) print line[p] } }'
}

# still_running "PID STARTTIME": whether that very process still exists and
# is not a zombie (one whose parent left it to init to reap holds nothing).
still_running() {
  local pid="${1%% *}" start="${1#* }" now
  now="$(awk '{ sub(/^.*\) /, ""); print $1, $20 }' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [ -n "$now" ] && [ "${now#* }" = "$start" ] && [ "${now%% *}" != Z ]
}

# listening_unix_paths PID: the paths of the unix sockets PID listens on.
listening_unix_paths() {
  local inodes
  inodes="$(find "/proc/$1/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n')"
  awk -v inodes="$inodes" 'BEGIN { n = split(inodes, list, "\n"); for (i = 1; i <= n; i++) mine[list[i]] = 1 }
    NR > 1 && ($7 in mine) && $4 == "00010000" && $8 != "" { print $8 }' /proc/net/unix
}

# job_file NAME: NAME in the work tree of the (only) job running in this
# repository, once it exists.
# (As root with a disk image, the running phase's upper dir is seen through
# job_live; the path printed is then the upper dir's on the host.)
job_file() {
  compgen -G ".git/mullet/jobs/*/work/$1" || compgen -G ".git/mullet/jobs/*/upper/$1" || {
    local dir
    for dir in .git/mullet/jobs/*/; do
      dir="$(cd "$dir" && pwd -P)"
      if job_live "$dir" upper "$1"; then
        echo "$dir/upper/$1"
        return 0
      fi
    done
    return 1
  }
}

# phase_processes PID: sets TREE (the processes under PID), BRIDGE (the
# bridge among them) and SOCKET (the unix socket PID listens on).
phase_processes() {
  TREE="$(descendants "$1")"
  BRIDGE="$(printf '%s\n' "$TREE" | awk '$4 == "/mullet/bin/git-mullet" && $5 == "__wall-check" && / --bridge 3128:\/mullet\/proxy.sock /')"
  [ -n "$BRIDGE" ] || fail "no bridge among the job's processes: $TREE"
  SOCKET="$(listening_unix_paths "$1")"
  assert_matches "$SOCKET" '^/tmp/mullet-proxy-[^/]+/proxy\.sock$' "the proxy's listening socket"
  [ -S "$SOCKET" ] || fail "$SOCKET is not a socket"
  # Only the job's own user can reach the socket from the host.
  assert_eq "$(stat -c '%a %u' "$(dirname "$SOCKET")")" "700 $(id -u)" "the socket directory's mode and owner"
  if command -v ss >/dev/null; then assert_contains "$(ss -Hxl)" "$SOCKET" "ss -xl"; fi
}

# assert_gone TREE: none of these processes (proc_table lines) is running.
assert_gone() {
  local line
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    if still_running "$(awk '{ print $1, $3 }' <<<"$line")"; then fail "still running: $line"; fi
  done <<<"$1"
}

assert_socket_gone() {
  assert_absent "$1"
  assert_absent "$(dirname "$1")"
  if command -v ss >/dev/null; then assert_not_contains "$(ss -Hxl)" "$1" "ss -xl"; fi
}

test_nothing_is_left_running_or_listening() {
  start_server echo ECHO
  net_repo repo
  cd repo
  grant_config "\"127.0.0.1:$ECHO\"" "\"127.0.0.1:$ECHO\""
  local mark="lingering-$RANDOM$RANDOM"
  ss -Htln >../tcp-before 2>/dev/null || true
  # Each phase leaves a daemon listening on its loopback, uses the proxy, and
  # waits for the go-ahead while the test looks at it from the host.
  git-mullet run --json -q -m linger \
    --setup "python3 net.py linger setup-$mark </dev/null >/dev/null 2>&1
      python3 net.py connect tcp 127.0.0.1 $ECHO 100 >setup-report
      touch setup-started
      python3 net.py wait \$HOME/setup-go 60 >>setup-report" \
    --command "python3 net.py linger $mark </dev/null >/dev/null 2>&1
      { python3 net.py direct 127.0.0.1 3128; python3 net.py connect tcp 127.0.0.1 $ECHO 100; } >report
      touch started
      python3 net.py wait \$HOME/go 60 >>report" >../job.json 2>../job.err &
  local mullet=$!
  # Should this test fail half-way, the job is let go rather than left waiting.
  trap 'stop_servers; for f in .git/mullet/jobs/*/home; do touch "$f/setup-go" "$f/go" 2>/dev/null || true; done
    wait '"$mullet"' 2>/dev/null || true' EXIT

  # The setup phase: its processes, bridge and socket.
  wait_until 60 job_file setup-started
  phase_processes "$mullet"
  local setup_tree="$TREE" setup_bridge="$BRIDGE" setup_socket="$SOCKET"
  assert_contains "$setup_tree" "net.py linger setup-$mark" "the setup's processes"
  touch "$(job_home "$(cd "$(dirname "$(dirname "$(job_file setup-started)")")" && pwd -P)")/setup-go"

  # The worker phase: setup's are all gone by now; its own are new.
  wait_until 60 job_file started
  phase_processes "$mullet"
  local worker_tree="$TREE" worker_bridge="$BRIDGE" worker_socket="$SOCKET"
  assert_gone "$setup_tree"
  assert_socket_gone "$setup_socket"
  [ "$worker_socket" != "$setup_socket" ] || fail "the worker reuses the setup's proxy socket"
  [ "$worker_bridge" != "$setup_bridge" ] || fail "the worker reuses the setup's bridge"
  assert_contains "$worker_tree" "net.py linger $mark" "the worker's processes"

  # The end of the job.
  touch "$(job_home "$(cd "$(dirname "$(dirname "$(job_file started)")")" && pwd -P)")/go"
  local code=0
  wait "$mullet" || code=$?
  [ "$code" = 0 ] || fail "the job failed ($code): $(cat ../job.err)"
  JOB_JSON="$(cat ../job.json)"
  local report
  report="$(result_file report)"
  assert_contains "$report" "direct 127.0.0.1 3128 -> connected" "the bridge inside"
  assert_contains "$report" "connect tcp 127.0.0.1 $ECHO 100 -> ok 100" "the tunnel"
  assert_contains "$report" "wait /mullet/home/go 60 -> go" "the worker's end"
  assert_contains "$(result_file setup-report)" "connect tcp 127.0.0.1 $ECHO 100 -> ok 100" "the setup's tunnel"
  # Nothing of the job is left: no process, no socket, no socket directory.
  assert_gone "$worker_tree"
  assert_socket_gone "$worker_socket"
  local survivors
  survivors="$(proc_table "$mark")"
  [ -z "$survivors" ] || fail "a process of the job survived: $survivors"
  # (The positive control: the same search finds a process that has it.)
  python3 -c 'import time; time.sleep(30)' "$mark" &
  local sleeper=$!
  assert_contains "$(proc_table "$mark")" "time.sleep(30) $mark" "the process search"
  kill "$sleeper"
  if command -v ss >/dev/null; then
    # No TCP listener appeared on the host (the bridges lived in the
    # sandboxes' own network namespaces, and died with them).
    ss -Htln >../tcp-after
    local new
    new="$(comm -13 <(sort ../tcp-before) <(sort ../tcp-after) | grep -v ":$ECHO " || true)"
    assert_not_contains "$new" ":3128 " "new TCP listeners"
    assert_not_contains "$(ss -Htln)" "127.0.0.1:3128 " "TCP listeners"
  fi
}

test_a_cancelled_job_leaves_nothing_behind_either() {
  start_server echo ECHO
  net_repo repo
  cd repo
  grant_config "" "\"127.0.0.1:$ECHO\""
  git-mullet run --json -q -m cancel --command "python3 net.py connect tcp 127.0.0.1 $ECHO 10 >report; touch started; sleep 50" \
    >../job.json 2>../job.err &
  local mullet=$!
  # Should this test fail half-way, the job is cancelled (once only: the pid
  # is not ours any more once waited for).
  trap 'stop_servers; if [ ! -e ../job.done ]; then kill -TERM '"$mullet"' 2>/dev/null || true; wait '"$mullet"' 2>/dev/null || true; fi' EXIT
  wait_until 60 job_file started
  phase_processes "$mullet"
  local tree="$TREE" socket="$SOCKET"
  kill -TERM "$mullet"
  local code=0
  wait "$mullet" || code=$?
  touch ../job.done
  [ "$code" != 0 ] || fail "the cancelled job exited 0"
  JOB_JSON="$(cat ../job.json)"
  assert_eq "$(json_field "$JOB_JSON" state)" cancelled
  assert_eq "$(decisions 0 | jq -c '[.method, .port, .allowed, .bytes_up, .bytes_down]')" "[\"CONNECT\",$ECHO,true,10,10]" "decisions"
  assert_gone "$tree"
  assert_socket_gone "$socket"
}

test_dependency_dirs_are_read_only_and_left_out() {
  new_repo repo
  mkdir -p repo/vendor
  printf 'vendored at base\n' >repo/vendor/lib.txt
  git -C repo add vendor
  git -C repo commit -qm vendor
  cd repo
  grant_config "" ""
  run_job -m deps --setup 'mkdir -p node_modules/x && echo "module" >node_modules/x/index.js' \
    --command '{
      echo changed >node_modules/x/index.js && echo "overwrote index.js"
      touch node_modules/new && echo "created node_modules/new"
      rm -f node_modules/x/index.js && echo "removed index.js"
      mkdir node_modules/y && echo "created node_modules/y"
      echo "read: $(cat node_modules/x/index.js)"
      mkdir -p out && echo built >out/built.txt && echo "wrote out/built.txt"
      echo added >vendor/added.txt && echo "wrote vendor/added.txt"
    } >report 2>/dev/null'
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local report result
  report="$(result_file report)"
  result="$(json_field "$JOB_JSON" result)"
  # Writable elsewhere (the positive control), read-only in node_modules.
  assert_contains "$report" "wrote out/built.txt" "worker report"
  assert_contains "$report" "read: module" "worker report"
  assert_not_contains "$report" "overwrote" "worker report"
  assert_not_contains "$report" "created node_modules" "worker report"
  assert_not_contains "$report" "removed" "worker report"
  assert_eq "$(result_file out/built.txt)" built "out/built.txt"
  # The result has no node_modules; the tracked vendor/ (which setup did
  # not create) is an ordinary directory: base content kept, worker's addition in.
  git cat-file -e "$result:node_modules" 2>/dev/null && fail "node_modules is in the result: $(git ls-tree -r --name-only "$result")"
  assert_eq "$(git rev-parse "$result:vendor/lib.txt")" "$(git rev-parse HEAD:vendor/lib.txt)" "vendor/lib.txt"
  assert_contains "$report" "wrote vendor/added.txt" "worker report"
  assert_eq "$(result_file vendor/added.txt)" added "vendor/added.txt"
  assert_eq "$(git ls-tree -r --name-only "$result" | LC_ALL=C sort | tr '\n' ' ')" \
    "README out/built.txt report src/main.c vendor/added.txt vendor/lib.txt " "result files"
}

test_a_tracked_path_setup_turns_into_a_dependency_dir_keeps_the_base_content() {
  new_repo repo
  printf 'a tracked file named build\n' >repo/build
  git -C repo add build
  git -C repo commit -qm "build is a file"
  cd repo
  # (Setup from the config this time, not --setup.)
  grant_config "" "" $'[run]\nsetup = "rm build && mkdir build && echo artefact >build/out.o"'
  run_job -m deps --command 'echo "read: $(cat build/out.o)" >report; echo x >build/more 2>/dev/null && echo wrote >>report; true'
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(result_file report)" "read: artefact" "worker report"
  assert_eq "$(git cat-file -t "$result:build")" blob "build in the result"
  assert_eq "$(git rev-parse "$result:build")" "$(git rev-parse HEAD:build)" "build in the result"
}

test_the_repository_may_only_narrow_the_grants() {
  mkdir files
  printf 'payload\n' >files/data.txt
  start_server http HTTP "$PWD/files"
  start_server echo ECHO
  net_repo repo
  cd repo
  grant_config "" "\"127.0.0.1:$HTTP\", \"127.0.0.1:$ECHO\""
  local cmd="{ python3 net.py env; python3 net.py get http://127.0.0.1:$HTTP/data.txt got.txt
    python3 net.py connect tcp 127.0.0.1 $ECHO 10; } >report; touch ran"
  # Widening: refused before anything runs.
  printf '[network]\nworker = ["127.0.0.1:%s", "127.0.0.1:1"]\n' "$HTTP" >.mullet.toml
  git add .mullet.toml
  git commit -qm widen
  expect_exit 3 git mullet run -q -m widen --command "$cmd"
  assert_contains "$ERR" "may only narrow"
  assert_contains "$ERR" "127.0.0.1:1"
  assert_eq "$(git for-each-ref refs/mullet | wc -l)" 0 "jobs created"
  [ -z "$(ls -A .git/mullet/jobs 2>/dev/null)" ] || fail "a job directory was created: $(ls -A .git/mullet/jobs)"
  assert_eq "$(accepts HTTP)$(accepts ECHO)" 00 "connections"
  # Also the setup list.
  printf '[network]\nsetup = ["*"]\n' >.mullet.toml
  git commit -qam "widen setup"
  expect_exit 3 git mullet run -q -m widen --setup 'touch setup-ran' --command "$cmd"
  assert_contains "$ERR" "may only narrow"
  assert_eq "$(git for-each-ref refs/mullet | wc -l)" 0 "jobs created"
  # Naming one of the user's addresses exactly is refused too: a repository
  # may name host names only.
  printf '[network]\nworker = ["127.0.0.1:%s"]\n' "$HTTP" >.mullet.toml
  git commit -qam "an address"
  expect_exit 3 git mullet run -q -m address --command "$cmd"
  assert_contains "$ERR" "'127.0.0.1:$HTTP' names an address"
  assert_eq "$(git for-each-ref refs/mullet | wc -l)" 0 "jobs created"
  # Narrowing to one host name of the user's: only that one is granted (it
  # does not resolve here, so the proxy lets it through and then fails).
  grant_config "" "\"127.0.0.1:$HTTP\", \"127.0.0.1:$ECHO\", \"mullet-test.invalid:$ECHO\""
  printf '[network]\nworker = ["Mullet-Test.invalid.:%s"]\n' "$ECHO" >.mullet.toml
  git commit -qam narrow
  run_job -m narrow --command "$cmd; python3 net.py connect tcp mullet-test.invalid $ECHO 10 >>report"
  [ "$RUN_CODE" = 0 ] || fail "the narrowed job failed ($RUN_CODE): $JOB_JSON"
  result_file ran >/dev/null
  local report
  report="$(result_file report)"
  assert_matches "$report" "get http://127.0.0.1:$HTTP/data.txt got.txt -> error HTTPError.*403" "a dropped grant"
  assert_contains "$report" "connect tcp 127.0.0.1 $ECHO 10 -> status 403" "a dropped grant"
  assert_contains "$report" "connect tcp mullet-test.invalid $ECHO 10 -> status 502" "the kept grant"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].grants')" "[\"Mullet-Test.invalid.:$ECHO\"]" "grants in the record"
  assert_eq "$(decisions 0 | jq -sc 'map([.host, .port, .allowed, (.reason | split(":")[0])])')" \
    "[[\"127.0.0.1\",$HTTP,false,\"not on the allow list\"],[\"127.0.0.1\",$ECHO,false,\"not on the allow list\"],[\"mullet-test.invalid\",$ECHO,true,\"cannot resolve\"]]" \
    "the decisions"
  assert_eq "$(accepts HTTP)$(accepts ECHO)" 00 "connections"
  # Narrowing to nothing: no proxy at all.
  printf '[network]\nworker = []\n' >.mullet.toml
  git commit -qam "no network"
  run_job -m nothing --command "$cmd"
  [ "$RUN_CODE" = 0 ] || fail "the job failed ($RUN_CODE): $JOB_JSON"
  assert_contains "$(result_file report)" "env  -> no proxy variables" "worker report"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].grants')" '[]' "grants in the record"
}

test_a_repository_never_names_an_address() {
  start_server echo ECHO
  probe_from_host "$ECHO" ECHO
  net_repo repo
  cd repo
  # "*" is any destination *but* loopback, private and link-local ones; only a
  # grant naming such an address exactly reaches it. So a repository naming
  # an address, in any spelling, would widen the user's grants: each is
  # refused before a job exists, and the server on loopback never hears from
  # the worker (which tries exactly what its grant names).
  grant_config '"*"' '"*"'
  # The positive control: narrowing "*" to a host name is fine.
  printf '[network]\nworker = ["example.com:443"]\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm narrow
  expect_exit 0 git mullet run --dry-run --json -m x --command true
  assert_eq "$(json_get "$OUT" '.phases[0].network.grants')" '["example.com:443"]' "narrowed grants"
  # key grant CONNECT-target, one per line.
  local cases="worker ::ffff:127.0.0.1:$ECHO [::ffff:127.0.0.1]
setup ::ffff:127.0.0.1:$ECHO [::ffff:127.0.0.1]
worker [::ffff:127.0.0.1]:$ECHO [::ffff:127.0.0.1]
worker [::127.0.0.1]:$ECHO [::127.0.0.1]
worker [64:ff9b::7f00:1]:$ECHO [64:ff9b::7f00:1]
worker [2002:7f00:1::]:$ECHO [2002:7f00:1::]
worker 127.1:$ECHO 127.1
worker 2130706433:$ECHO 2130706433
worker 0x7f000001:$ECHO 0x7f000001
worker localhost.:$ECHO localhost.
worker 127.0.0.1:$ECHO 127.0.0.1
worker 169.254.169.254:80 169.254.169.254
worker [::1]:22 [::1]
worker 10.0.0.1:5432 10.0.0.1"
  local problems="" key grant target setup
  while read -r key grant target; do
    printf '[network]\n%s = ["%s"]\n' "$key" "$grant" >.mullet.toml
    git commit -qam "$grant"
    setup=()
    [ "$key" = setup ] && setup=(--setup "python3 net.py connect tcp $target ${grant##*:} 10 >setup-report")
    run_job -m widen "${setup[@]}" --command "python3 net.py connect tcp $target ${grant##*:} 10 >report" 2>../err
    if [ "$RUN_CODE" != 3 ] || ! grep -qF "'$grant' names" ../err; then
      problems="$problems
  - $key = [\"$grant\"] under the user's [\"*\"]: exit $RUN_CODE (expected 3), grants $(json_get "$JOB_JSON" '.phases | map(.grants)' 2>/dev/null), worker: $(result_file report 2>/dev/null) $(head -c 300 ../err)"
    fi
    [ "$(git for-each-ref refs/mullet | wc -l)" = 0 ] || problems="$problems
  - $key = [\"$grant\"]: a job was created"
    git for-each-ref --format='%(refname)' refs/mullet | xargs -r -n1 git update-ref -d
  done <<<"$cases"
  # The same for an address the user grants exactly, next to "*".
  grant_config '' "\"127.0.0.1:$ECHO\", \"*\""
  printf '[network]\nworker = ["127.0.0.1:%s"]\n' "$ECHO" >.mullet.toml
  git commit -qam exact
  run_job -m widen --command "python3 net.py connect tcp 127.0.0.1 $ECHO 10 >report" 2>../err
  [ "$RUN_CODE" = 3 ] || problems="$problems
  - worker = [\"127.0.0.1:$ECHO\"] under the user's [\"127.0.0.1:$ECHO\", \"*\"]: exit $RUN_CODE (expected 3)"
  # Only the host's own probe ever reached the server.
  [ "$(accepts ECHO)" = 1 ] || problems="$problems
  - the loopback server got $(($(accepts ECHO) - 1)) connection(s) from the jobs"
  [ -z "$problems" ] || fail "the repository's .mullet.toml named an address:$problems"
}

test_dry_run_shows_the_grants() {
  net_repo repo
  cd repo
  grant_config '"127.0.0.1:4001"' '"127.0.0.1:4002", "*"'
  expect_exit 0 git mullet run --dry-run -m "$PWD/../canary" --setup 'touch "$MULLET_PROMPT"' --command 'touch "$MULLET_PROMPT"'
  local setup worker
  setup="$(printf '%s\n' "$OUT" | sed -n '/^phase setup/,/^phase worker/p')"
  worker="$(printf '%s\n' "$OUT" | sed -n '/^phase worker/,$p')"
  [ -n "$setup" ] && [ -n "$worker" ] || fail "the plan lacks a phase: $OUT"
  assert_contains "$setup" "network:     through the egress proxy to 127.0.0.1:4001" "setup plan"
  assert_not_contains "$setup" "4002" "setup plan"
  assert_contains "$worker" "network:     through the egress proxy to 127.0.0.1:4002, *" "worker plan"
  local phase
  for phase in "$setup" "$worker"; do
    assert_contains "$phase" "HTTP_PROXY" "plan environment"
    assert_contains "$phase" "https_proxy" "plan environment"
    assert_contains "$phase" "/mullet/proxy.sock" "plan mounts"
  done
  expect_exit 0 git mullet run --dry-run --json -m x --setup true --command true
  assert_eq "$(json_get "$OUT" '[.phases[] | [.phase, .network.grants]]')" \
    '[["setup",["127.0.0.1:4001"]],["worker",["127.0.0.1:4002","*"]]]' "JSON plan grants"
  assert_eq "$(json_get "$OUT" '[.phases[] | (.env | index("HTTP_PROXY") != null)]')" '[true,true]' "JSON plan env"
  # The positive control: without grants the worker's plan has no way out.
  grant_config '"127.0.0.1:4001"' ''
  expect_exit 0 git mullet run --dry-run -m x --setup true --command true
  assert_contains "$(printf '%s\n' "$OUT" | sed -n '/^phase worker/,$p')" "network:     none" "worker plan"
  assert_not_contains "$(printf '%s\n' "$OUT" | sed -n '/^phase worker/,$p')" "HTTP_PROXY" "worker plan"
  expect_exit 0 git mullet run --dry-run --json -m x --setup true --command true
  assert_eq "$(json_get "$OUT" '[.phases[] | .network.grants]')" '[["127.0.0.1:4001"],[]]' "JSON plan grants"
  # Nothing ran, nothing was created.
  assert_absent ../canary
  assert_absent .git/mullet
  assert_eq "$(git for-each-ref refs/mullet | wc -l)" 0 "refs created"
}

run_tests
