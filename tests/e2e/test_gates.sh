#!/usr/bin/env bash
# Gates and attempts: after the worker, each gate (`--gate CMD`, `[[gate]]` in
# the user file or in the base commit's .mullet.toml) runs in its own sandbox,
# without any network, in a fresh checkout of exactly the attempt's snapshot
# commit; nothing it writes reaches the result. A failed gate sends the worker
# back (while `--attempts` remain) with the gate's name and output in its
# prompt, and each attempt's snapshot is a commit on top of the previous one.
# The job succeeds only when every gate passes; `merge` refuses a job whose
# gate failed unless --force.
source "$(dirname "$0")/../lib/harness.sh"

# Every job of this suite is bounded: a limit that fails must not hang it.
RUN_JOB_BOUND=60

# gate_field ATTEMPT GATE FIELD: one field of one gate record of $JOB_JSON.
gate_field() {
  json_get "$JOB_JSON" ".attempts[$1].gates[$2].$3"
}

# result_file PATH: a file of the job's result commit.
result_file() {
  git cat-file blob "$(json_field "$JOB_JSON" result):$1"
}

# The worker counts its runs in `counter`, and keeps the prompt it got (from
# $MULLET_PROMPT and from stdin) per run; the gate wants two runs.
COUNTING_WORKER='n=$(cat counter 2>/dev/null || echo 0); n=$((n + 1)); echo $n >counter;
  cat >stdin-$n.txt; printf %s "$MULLET_PROMPT" >prompt-$n.txt'
COUNTER_GATE='c=$(cat counter); if [ "$c" -lt 2 ]; then echo "COUNTER-TOO-LOW-$c (want 2)"; exit 5; fi; echo counter-ok'

test_a_failed_gate_sends_the_worker_back_with_its_output() {
  new_repo repo
  cd repo
  local base
  base="$(git rev-parse HEAD)"
  user_config '[[gate]]' 'name = "counter-check"' "command = '$COUNTER_GATE'"
  run_job -m "count to two" --attempts 2 --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].number]')" '[1,2]' "attempt numbers"
  local first second
  first="$(json_get "$JOB_JSON" '.attempts[0].result')"
  second="$(json_get "$JOB_JSON" '.attempts[1].result')"
  assert_matches "$first" '^[0-9a-f]{40}$' "attempt 1's result"
  assert_eq "$second" "$(json_field "$JOB_JSON" result)" "the job's result is the last attempt's"
  # Two commits, one on top of the other, on top of the base.
  assert_eq "$(git rev-parse "$second^")" "$first" "attempt 2's parent"
  assert_eq "$(git rev-parse "$first^")" "$base" "attempt 1's parent"
  assert_eq "$(git rev-list --count "$base..$second")" 2 "commits on the base"
  assert_eq "$(git cat-file blob "$first:counter")" 1 "counter after attempt 1"
  assert_eq "$(git cat-file blob "$second:counter")" 2 "counter after attempt 2 (same clone)"
  assert_contains "$(git log -1 --format=%B "$second")" "Mullet-Attempt: 2"
  # The gates ran on exactly each attempt's snapshot.
  assert_eq "$(gate_field 0 0 name)" counter-check
  assert_eq "$(gate_field 0 0 passed)" false "attempt 1's gate"
  assert_eq "$(gate_field 0 0 exit_code)" 5
  assert_eq "$(gate_field 0 0 ended_by)" exit
  assert_eq "$(gate_field 0 0 commit)" "$first" "attempt 1's gate commit"
  assert_contains "$(gate_field 0 0 output_tail)" "COUNTER-TOO-LOW-1"
  assert_eq "$(gate_field 1 0 passed)" true "attempt 2's gate"
  assert_eq "$(gate_field 1 0 commit)" "$second" "attempt 2's gate commit"
  assert_contains "$(gate_field 1 0 output_tail)" "counter-ok"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[] | [.name, .ended_by]]')" \
    '[["worker","exit"],["gate:counter-check","exit"],["worker (attempt 2)","exit"],["gate:counter-check","exit"]]' "phases"
  # The first attempt got the task as it was; the second, the task and what
  # the gate said, in $MULLET_PROMPT and on stdin alike.
  assert_eq "$(git cat-file blob "$second:prompt-1.txt")" "count to two" "attempt 1's prompt"
  assert_eq "$(git cat-file blob "$second:stdin-1.txt")" "count to two" "attempt 1's stdin"
  local prompt
  prompt="$(git cat-file blob "$second:prompt-2.txt")"
  assert_contains "$prompt" "count to two" "attempt 2's prompt"
  assert_contains "$prompt" "counter-check" "attempt 2's prompt"
  assert_contains "$prompt" "COUNTER-TOO-LOW-1 (want 2)" "attempt 2's prompt"
  assert_eq "$(git cat-file blob "$second:stdin-2.txt")" "$prompt" "attempt 2's stdin"
  # show prints the attempts and their gates.
  expect_exit 0 git mullet show "$JOB"
  assert_matches "$OUT" "FAIL +counter-check" "show"
  assert_matches "$OUT" "pass +counter-check" "show"
  assert_contains "$OUT" "COUNTER-TOO-LOW-1" "show"
  expect_exit 0 git mullet show --json "$JOB"
  assert_eq "$(json_get "$OUT" '.attempts')" "$(json_get "$JOB_JSON" '.attempts')" "show --json attempts"

  # The control: a gate that passes at once leaves one attempt.
  user_config '[[gate]]' 'name = "always"' 'command = "true"'
  run_job -m "once" --attempts 3 --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 0
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 1 "attempts when the gate passes"
  assert_eq "$(result_file counter)" 1 "worker runs when the gate passes"
}

# From the second attempt on the work tree's .git file is the one the
# snapshot rewrote: it must name the git dir as the sandbox sees it, so git
# works inside and the host's paths stay out of the sandbox.
test_the_second_attempt_runs_git_in_its_clone_without_seeing_host_paths() {
  new_repo repo
  cd repo
  user_config '[[gate]]' 'name = "counter-check"' "command = '$COUNTER_GATE'"
  run_job -m "git in attempt 2" --attempts 2 --command "$COUNTING_WORKER"'; n=$(cat counter);
    cat .git >dotgit-$n.txt 2>&1; git status --porcelain >status-$n.txt 2>&1; echo "status exit $?" >>status-$n.txt'
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 2 "attempts"
  local common n seen
  common="$(cd "$(git rev-parse --git-common-dir)" && pwd -P)"
  for n in 1 2; do
    seen="$(result_file dotgit-$n.txt; result_file status-$n.txt)"
    assert_eq "$(result_file dotgit-$n.txt)" "gitdir: /mullet/git" "attempt $n's .git file"
    assert_contains "$(result_file status-$n.txt)" "status exit 0" "attempt $n's git status"
    assert_not_contains "$seen" "$common" "what attempt $n saw"
    assert_not_contains "$seen" "$PWD" "what attempt $n saw"
    assert_not_contains "$seen" ".git/mullet" "what attempt $n saw"
    assert_not_contains "$seen" "fatal" "what attempt $n saw"
  done
}

test_the_feedback_carries_the_end_of_a_long_gate_output() {
  new_repo repo
  cd repo
  user_config '[[gate]]' 'name = "verbose"' \
    'command = "echo THE-FIRST-$((1 + 1)); seq 1 50000 | sed s/^/filler-line-/; echo THE-LAST-$((2 + 2)); test $(cat counter) -ge 2"'
  run_job -m "be verbose" --attempts 2 --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  local prompt size tail
  prompt="$(result_file prompt-2.txt)"
  size="$(git cat-file -s "$(json_field "$JOB_JSON" result):prompt-2.txt")"
  assert_contains "$prompt" "be verbose" "attempt 2's prompt"
  assert_contains "$prompt" verbose "attempt 2's prompt"
  assert_contains "$prompt" THE-LAST-4 "attempt 2's prompt"
  assert_contains "$prompt" filler-line-50000 "attempt 2's prompt"
  assert_not_contains "$prompt" THE-FIRST-2 "attempt 2's prompt"
  [ "$size" -le 16384 ] || fail "attempt 2's prompt is $size bytes: the gate's output is not cut"
  tail="$(gate_field 0 0 output_tail)"
  assert_contains "$tail" THE-LAST-4 "the recorded output tail"
  [ "${#tail}" -le 16384 ] || fail "the recorded output tail is ${#tail} characters"
  # The whole output is in the job's log.
  assert_contains "$(git mullet log "$JOB")" THE-FIRST-2 "the log"
}

test_attempts_exhausted_fail_the_job_and_merge_needs_force() {
  new_repo repo
  cd repo
  local base
  base="$(git rev-parse HEAD)"
  user_config '[[gate]]' 'name = "never-happy"' 'command = "echo NEVER-HAPPY-OUTPUT; exit 9"'
  run_job -m "try hard" --attempts 3 --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  local error
  error="$(json_field "$JOB_JSON" error)"
  assert_contains "$error" "never-happy" "error"
  assert_contains "$error" "exit code 9" "error"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].number]')" '[1,2,3]' "attempts"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].gates[0].passed]')" '[false,false,false]' "gate verdicts"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[].name] | map(select(startswith("worker"))) | length')" 3 "worker phases"
  # The failed job keeps its result: three commits in a row.
  local result
  result="$(json_field "$JOB_JSON" result)"
  assert_eq "$(git rev-list --count "$base..$result")" 3 "commits on the base"
  assert_eq "$(git cat-file blob "$result:counter")" 3
  assert_eq "$(git rev-parse "$result^")" "$(json_get "$JOB_JSON" '.attempts[1].result')" "attempt 3's parent"
  # merge refuses it, changing nothing, and takes it with --force.
  local before
  before="$(git for-each-ref)"
  expect_exit 2 git mullet merge "$JOB"
  assert_clear_error
  assert_contains "$ERR" "never-happy" "merge's refusal"
  assert_eq "$(git for-each-ref)" "$before" "refs after the refused merge"
  expect_exit 0 git mullet merge --force "$JOB"
  assert_eq "$(git rev-parse "refs/heads/mullet/$JOB")" "$result" "the merged branch"

  # Without --attempts there is one attempt.
  run_job -m "try once" --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 1
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 1 "attempts by default"
  assert_contains "$(json_field "$JOB_JSON" error)" "never-happy"
  # [run] attempts in the user file counts like --attempts.
  user_config '[run]' 'attempts = 2' '[[gate]]' 'name = "never-happy"' 'command = "exit 9"'
  run_job -m "try twice" --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 1
  assert_eq "$(json_get "$JOB_JSON" '.attempts | length')" 2 "attempts from [run] attempts"
  assert_eq "$(result_file counter)" 2
}

test_a_gate_cannot_change_the_result_or_the_next_attempt() {
  new_repo repo
  cd repo
  local base
  base="$(git rev-parse HEAD)"
  # The first gate vandalises its checkout (and passes); the second must not
  # see any of it, and asks for a second attempt, which must not either.
  user_config '[[gate]]' 'name = "vandal"' \
    "command = '''echo vandal >vandal.txt; rm -f README; echo vandal >work.txt; mkdir -p newdir && echo x >newdir/f;
      git add -A; git commit -qm vandal; git update-ref refs/heads/main HEAD; echo vandal-done'''" \
    '[[gate]]' 'name = "fresh"' \
    "command = '''if [ -e vandal.txt ] || [ ! -e README ] || [ \"\$(cat work.txt)\" != worker ]; then echo SAW-VANDAL; exit 1; fi;
      [ \"\$(cat counter)\" -ge 2 ] || { echo NEED-SECOND-ATTEMPT; exit 1; }'''"
  run_job -m "work" --attempts 2 --command "$COUNTING_WORKER; echo worker >work.txt; { ls -A; cat README; } >seen-\$n.txt"
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error); $(json_get "$JOB_JSON" '[.attempts[].gates[].output_tail]'))"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].gates[] | [.name, .passed]]')" \
    '[["vandal",true],["fresh",false],["vandal",true],["fresh",true]]' "gate verdicts"
  assert_contains "$(gate_field 0 0 output_tail)" vandal-done "the vandal ran"
  assert_contains "$(gate_field 0 1 output_tail)" NEED-SECOND-ATTEMPT "what the second gate saw"
  local result first
  result="$(json_field "$JOB_JSON" result)"
  first="$(json_get "$JOB_JSON" '.attempts[0].result')"
  # Exactly what the worker wrote, in both attempts' commits.
  assert_eq "$(git ls-tree -r --name-only "$first" | tr '\n' ' ')" \
    "README counter prompt-1.txt seen-1.txt src/main.c stdin-1.txt work.txt " "attempt 1's files"
  assert_eq "$(git ls-tree -r --name-only "$result" | tr '\n' ' ')" \
    "README counter prompt-1.txt prompt-2.txt seen-1.txt seen-2.txt src/main.c stdin-1.txt stdin-2.txt work.txt " "the result's files"
  assert_eq "$(git rev-parse "$result:README")" "$(git rev-parse "$base:README")" "README"
  assert_eq "$(git cat-file blob "$result:work.txt")" worker "work.txt"
  assert_eq "$(git rev-list --count "$base..$result")" 2 "commits on the base (no gate commit)"
  # The second attempt's worker found its own work tree, not the gate's.
  local seen
  seen="$(git cat-file blob "$result:seen-2.txt")"
  assert_not_contains "$seen" vandal "what attempt 2 saw"
  assert_contains "$seen" hello "what attempt 2 saw"
  assert_absent "$(job_work "$(job_dir "$JOB")")/vandal.txt"
  assert_eq "$(git rev-parse refs/heads/main)" "$base" "the user's branch"
}

test_a_gate_has_no_network_even_when_the_worker_has() {
  new_repo repo
  cd repo
  cat >net.py <<'PY'
import os, socket, sys
who, port = sys.argv[1], int(sys.argv[2])
connected = False
def attempt(what, fn):
    global connected
    try:
        print(who, what, "-> connected:", fn())
        connected = True
    except Exception as e:
        print(who, what, "-> error", type(e).__name__, e)
def direct():
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"direct-" + who.encode())
    return s.recv(100)
def through(host, proxy_port):
    s = socket.create_connection((host, proxy_port), timeout=3)
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))
    answer = s.recv(200)
    if b" 200" not in answer.split(b"\r\n")[0]:
        raise RuntimeError("the proxy answered %r" % answer[:60])
    s.sendall(b"proxied-" + who.encode())
    return s.recv(100)
def unix_socket():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect("/mullet/proxy.sock")
    return "unix socket open"
print(who, "HTTP_PROXY", os.environ.get("HTTP_PROXY"), "http_proxy", os.environ.get("http_proxy"))
attempt("direct", direct)
attempt("proxy 127.0.0.1:3128", lambda: through("127.0.0.1", 3128))
for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY"):
    value = os.environ.get(name)
    if value:
        host, _, p = value.split("//")[-1].rstrip("/").rpartition(":")
        attempt("proxy from " + name, lambda: through(host, int(p)))
attempt("/mullet/proxy.sock", unix_socket)
sys.exit(0 if connected else 1)
PY
  git add net.py
  git commit -qm "net.py"
  cat >../listener.py <<'PY'
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
s.settimeout(0.2)
log = open(sys.argv[2], "a", buffering=1)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.time() + 60
while time.time() < deadline:
    try:
        conn, _ = s.accept()
    except socket.timeout:
        continue
    conn.settimeout(2)
    try:
        data = conn.recv(200)
    except OSError:
        data = b""
    log.write("ACCEPT %r\n" % data)
    try:
        conn.sendall(b"hello from the host\n")
    except OSError:
        pass
    conn.close()
PY
  : >../connections
  timeout 60 python3 ../listener.py ../port ../connections >/dev/null 2>&1 &
  local listener=$!
  trap 'kill '"$listener"' 2>/dev/null || true' EXIT
  wait_until 10 test -s ../port
  local port
  port="$(cat ../port)"
  user_config '[network]' "worker = [\"127.0.0.1:$port\"]" \
    '[[gate]]' 'name = "online"' "command = 'python3 net.py gate $port'"
  # Proxy variables in our own environment must not reach the gate either.
  HTTP_PROXY="http://127.0.0.1:$port" http_proxy="http://127.0.0.1:$port" HTTPS_PROXY="http://127.0.0.1:$port" \
    run_job -m "go online" --command "python3 net.py worker $port >worker-report"
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_contains "$(json_field "$JOB_JSON" error)" online "error"
  # The positive control: the worker reached the listener through its proxy.
  assert_contains "$(result_file worker-report)" "worker proxy 127.0.0.1:3128 -> connected: b'hello from the host" "worker report"
  # The gate reached nothing.
  local report
  report="$(gate_field 0 0 output_tail)"
  assert_contains "$report" "gate HTTP_PROXY None http_proxy None" "gate report"
  assert_contains "$report" "gate direct -> error" "gate report"
  assert_contains "$report" "gate proxy 127.0.0.1:3128 -> error" "gate report"
  assert_contains "$report" "gate /mullet/proxy.sock -> error" "gate report"
  assert_not_contains "$report" "connected" "gate report"
  assert_eq "$(gate_field 0 0 exit_code)" 1 "the gate's exit code"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[] | select(.name == "gate:online") | [.grants, .network]]')" '[[[],[]]]' "gate grants and decisions"
  sleep 0.5
  assert_contains "$(cat ../connections)" "ACCEPT b'proxied-worker'" "connections the listener got"
  assert_not_contains "$(cat ../connections)" gate "connections the listener got"
}

test_a_gate_that_never_ends_is_stopped_by_its_timeout() {
  new_repo repo
  cd repo
  local m
  m="$(marker)"
  user_config '[[gate]]' 'name = "forever"' "command = 'echo gate-started; sleep $m; echo NOT-STOPPED'" 'timeout = 2'
  local started=$SECONDS
  run_job -m "quick work" --command 'echo done >done.txt'
  local took=$((SECONDS - started))
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  [ "$took" -le 10 ] || fail "the job took ${took}s with a 2 s gate timeout"
  assert_eq "$(gate_field 0 0 ended_by)" timeout "the gate's ended_by"
  assert_eq "$(gate_field 0 0 passed)" false
  assert_contains "$(gate_field 0 0 output_tail)" gate-started
  assert_not_contains "$(gate_field 0 0 output_tail)" NOT-STOPPED
  local ms
  ms="$(gate_field 0 0 duration_ms)"
  [ "$ms" -ge 1900 ] && [ "$ms" -le 6000 ] || fail "the gate ran ${ms} ms, expected about 2000"
  assert_eq "$(json_get "$JOB_JSON" '.phases[1] | [.name, .ended_by]')" '["gate:forever","timeout"]' "the gate's phase"
  local error
  error="$(json_field "$JOB_JSON" error)"
  assert_contains "$error" forever "error"
  assert_contains "$error" timeout "error"
  # What the worker did is still the result.
  assert_eq "$(result_file done.txt)" done
  no_process_left "sleep $m"
  assert_absent "$(job_dir "$JOB")/gate"
}

test_a_gate_sees_exactly_the_snapshot_and_the_dependencies() {
  new_repo repo
  cd repo
  printf '*.log\n' >.gitignore
  git add .gitignore
  git commit -qm ignore
  user_config '[limits]' 'file_mb = 1' '[[gate]]' 'name = "look"' 'command = """
echo "head $(git rev-parse HEAD)"
for f in tracked.txt new.txt; do echo "$f: $(cat $f)"; done
for f in ignored.log big.bin $HOME/worker-home.txt; do if [ -e $f ]; then echo "SAW $f"; fi; done
echo "dep: $(cat node_modules/dep/index.js)"
if echo x >node_modules/dep/index.js 2>/dev/null; then echo "WROTE node_modules"; fi
if touch node_modules/added 2>/dev/null; then echo "CREATED in node_modules"; fi
echo README: $(cat README)
"""'
  run_job -m "snapshot" --setup 'mkdir -p node_modules/dep && echo dep-from-setup >node_modules/dep/index.js' \
    --command 'echo secret >ignored.log; echo tracked >tracked.txt; echo new >new.txt; echo more >>README; echo h >$HOME/worker-home.txt;
      head -c 2000000 /dev/zero >big.bin; cat node_modules/dep/index.js >worker-saw-dep'
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  local result report
  result="$(json_field "$JOB_JSON" result)"
  report="$(gate_field 0 0 output_tail)"
  assert_eq "$(gate_field 0 0 commit)" "$result" "the gate's commit"
  assert_contains "$report" "head $result" "the gate's HEAD"
  # What the snapshot has, the gate has.
  assert_contains "$report" "tracked.txt: tracked" "gate report"
  assert_contains "$report" "new.txt: new" "gate report"
  assert_contains "$report" "README: hello more" "gate report"
  # What it does not (ignored, too large, outside the work tree), the gate
  # does not see.
  assert_not_contains "$report" "SAW" "gate report"
  git cat-file -e "$result:ignored.log" 2>/dev/null && fail "ignored.log is in the result"
  git cat-file -e "$result:big.bin" 2>/dev/null && fail "big.bin is in the result"
  assert_contains "$(json_get "$JOB_JSON" '.snapshot_warnings')" big.bin "snapshot warnings"
  # The dependencies setup made are there, read-only, as the worker had them.
  assert_eq "$(result_file worker-saw-dep)" dep-from-setup "the worker's dependency"
  assert_contains "$report" "dep: dep-from-setup" "gate report"
  assert_not_contains "$report" "WROTE" "gate report"
  assert_not_contains "$report" "CREATED" "gate report"
  assert_eq "$(cat "$(job_work "$(job_dir "$JOB")")/node_modules/dep/index.js")" dep-from-setup "node_modules after the gate"
  assert_absent "$(job_work "$(job_dir "$JOB")")/node_modules/added"
  git cat-file -e "$result:node_modules" 2>/dev/null && fail "node_modules is in the result"
  return 0
}

# A project asks for one retry on failing tests in its .mullet.toml; the
# user's [run] max_attempts decides how far a repository may raise attempts.
test_a_repository_asks_for_a_retry_up_to_the_users_cap() {
  new_repo repo
  cd repo
  printf "[run]\nattempts = 2\n\n[[gate]]\nname = \"tests\"\ncommand = '%s'\n" "$COUNTER_GATE" >.mullet.toml
  git add .mullet.toml
  git commit -qm "one retry when the tests fail"
  # No cap (the default): a repository may only lower attempts; the job is
  # refused before it exists, the error naming the key that would allow it.
  user_config '# no max_attempts'
  refused_cleanly 3 git mullet run -q -m "count" --command "$COUNTING_WORKER"
  assert_contains "$ERR" "run.attempts: the repository's .mullet.toml may only lower this limit (yours is 1)"
  assert_contains "$ERR" "[run] max_attempts"

  # Cap 3: the repository's 2 stands; the gate fails the first time, so two
  # attempts ran and the job succeeded.
  user_config '[run]' 'max_attempts = 3'
  run_job -m "count" --command "$COUNTING_WORKER"
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].number]')" '[1,2]' "attempts"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[].gates[0].passed]')" '[false,true]' "the gate's verdicts"
  assert_eq "$(result_file counter)" 2 "worker runs"
  expect_exit 0 git mullet config
  assert_matches "$OUT" 'attempts = 2  # \.mullet\.toml@[0-9a-f]+:2' "config"
  assert_contains "$OUT" "max_attempts = 3  # $USER_CONFIG:2" "config"

  # Asking for more than the cap gets the cap, with a warning; the gate
  # never passes here, so every allowed attempt runs.
  printf "[run]\nattempts = 5\n\n[[gate]]\nname = \"tests\"\ncommand = 'exit 7'\n" >.mullet.toml
  git commit -qam "four retries"
  expect_exit 1 git mullet run --json -m "count again" --command "$COUNTING_WORKER"
  assert_eq "$(json_get "$OUT" '.attempts | length')" 3 "attempts, capped"
  assert_contains "$ERR" "run.attempts: the repository's .mullet.toml asks for 5; your [run] max_attempts caps it at 3"
  expect_exit 0 git mullet config
  assert_contains "$OUT" "(asks 5; capped by your [run] max_attempts)" "config"
  # The cap is the repository's only: --attempts is yours.
  expect_exit 1 git mullet run --json -m "count more" --attempts 4 --command "$COUNTING_WORKER"
  assert_eq "$(json_get "$OUT" '.attempts | length')" 4 "attempts from --attempts"
}

test_gates_from_the_repository_the_user_and_flags_all_run() {
  new_repo repo
  cd repo
  printf '[[gate]]\nname = "repo-gate"\ncommand = "echo REPO-GATE-RAN; test -e required.txt"\n' >.mullet.toml
  git add .mullet.toml
  git commit -qm "a gate of the repository's"
  # Not committed: not a gate.
  printf '[[gate]]\nname = "uncommitted-gate"\ncommand = "echo UNCOMMITTED-RAN"\n' >>.mullet.toml
  user_config '[[gate]]' 'name = "user-gate"' 'command = "echo USER-GATE-RAN"'
  # The worker rewrites .mullet.toml in its clone: gates come from the base.
  run_job -m "all gates" --command 'echo r >required.txt; printf "[[gate]]\nname = \"repo-gate\"\ncommand = \"exit 0\"\n" >.mullet.toml' \
    --gate 'echo FLAG-ONE-RAN' --gate 'echo FLAG-TWO-RAN; : a flag gate whose first line is longer than forty'
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  assert_eq "$(json_field "$JOB_JSON" state)" succeeded
  # A gate named by its command keeps the command's whole first line.
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[0].gates[] | .name]')" \
    '["user-gate","repo-gate","echo FLAG-ONE-RAN","echo FLAG-TWO-RAN; : a flag gate whose first line is longer than forty"]' \
    "the gates that ran"
  assert_eq "$(json_get "$JOB_JSON" '[.attempts[0].gates[] | .passed] | all')" true "verdicts"
  assert_eq "$(gate_field 0 0 output_tail)" USER-GATE-RAN
  assert_eq "$(gate_field 0 1 output_tail)" REPO-GATE-RAN
  assert_eq "$(gate_field 0 2 output_tail)" FLAG-ONE-RAN
  assert_eq "$(gate_field 0 3 output_tail)" FLAG-TWO-RAN
  assert_eq "$(gate_field 0 1 command)" "echo REPO-GATE-RAN; test -e required.txt" "the repository gate's command"
  assert_not_contains "$(git mullet log "$JOB")" UNCOMMITTED-RAN "the log"

  # The repository's gate holds even when the worker removes it.
  run_job -m "skip the gate" --command 'rm .mullet.toml; echo x >x'
  assert_eq "$RUN_CODE" 1 "exit code"
  assert_eq "$(json_field "$JOB_JSON" state)" failed
  assert_contains "$(json_field "$JOB_JSON" error)" repo-gate "error"
  assert_eq "$(gate_field 0 1 name)" repo-gate
  assert_eq "$(gate_field 0 1 passed)" false
  expect_exit 2 git mullet merge "$JOB"
}

test_stdin_of_the_worker_and_gates_ends() {
  new_repo repo
  cd repo
  # Our own stdin is a pipe that stays open: no sandbox may inherit it.
  mkfifo ../stdin
  sleep 60 >../stdin 2>/dev/null &
  local holder=$!
  trap 'kill '"$holder"' 2>/dev/null || true' EXIT
  local started=$SECONDS
  run_job -m "the task" --command 'cat >got-stdin; echo done >done.txt' --gate 'cat; echo gate-got-eof' \
    --gate 'if read -r line; then echo "READ $line"; fi; echo second-gate-done' <../stdin
  local took=$((SECONDS - started))
  assert_eq "$RUN_CODE" 0 "exit code ($(json_field "$JOB_JSON" error))"
  [ "$took" -le 20 ] || fail "the job took ${took}s"
  assert_eq "$(result_file got-stdin)" "the task" "the worker's stdin"
  assert_eq "$(result_file done.txt)" done
  assert_eq "$(gate_field 0 0 output_tail)" gate-got-eof "the first gate's output"
  assert_eq "$(gate_field 0 1 output_tail)" second-gate-done "the second gate's output"
}

run_tests
