#!/usr/bin/env bash
# The key never enters the sandbox (issue 12): the real Claude Code CLI works
# through git-mullet's credential endpoint, which adds the user's credential
# on the host and forwards to an HTTPS upstream (the scripted Messages API,
# with a CA made for this run). Attacks from inside (the worker's Bash and a
# gate) look for the key everywhere they can read and try the endpoint
# without the sentinel; the upstream's log shows what really left.
source "$(dirname "$0")/../lib/harness.sh"
source "$HARNESS_DIR/claude_api.sh"

command -v openssl >/dev/null || { echo "Bail out! openssl is missing (scripts/install-deps installs it)"; echo "0 passed, 1 failed"; exit 1; }

# A CA and a certificate for 127.0.0.1 signed by it, once per suite.
make_ca() {
  CA_DIR="$TEST_ROOT/ca"
  [ -f "$CA_DIR/server.pem" ] && return 0
  mkdir -p "$CA_DIR"
  (
    cd "$CA_DIR"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=mullet test CA" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
      -extfile ext.cnf 2>/dev/null
    chmod 644 ./*.pem ./*.key
  )
}

# tls_api SCRIPT [ARGS...]: the scripted API over HTTPS.
tls_api() {
  make_ca
  start_api "$1" --tls-cert "$CA_DIR/server.pem" --tls-key "$CA_DIR/server.key" "${@:2}"
}

# credential_config ALLOW_BASH [CA_FILE] [EXTRA]: the key comes from
# $MY_VAULT_KEY through a [[credential]] table; nothing in [sandbox] env.
credential_config() {
  local ca="${2-$CA_DIR/ca.pem}"
  cat >"$S/config.toml" <<EOF2
[claude]
binary = "$MULLET_TEST_CLAUDE"
credential = "vault"
allow_bash = [$1]

[[credential]]
name = "vault"
base_url = "https://127.0.0.1:$API_PORT"
env = "MY_VAULT_KEY"
${ca:+ca_file = \"$ca\"}

[limits]
timeout = 90
${3-}
EOF2
  export GIT_MULLET_CONFIG="$S/config.toml"
}

new_key() { echo "sk-ant-real-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"; }

# The search every attacker runs: the key's bytes in any process's
# environment or command line, and in every file under the places a
# sandbox can write or that hold our files for it.
SEARCH_SCRIPT='
import os, sys
needle = (sys.argv[1] + sys.argv[2]).encode()
found = []
for pid in os.listdir("/proc"):
    if not pid.isdigit(): continue
    for name in ("environ", "cmdline"):
        try:
            if needle in open("/proc/%s/%s" % (pid, name), "rb").read(): found.append("/proc/%s/%s" % (pid, name))
        except OSError: pass
# /mullet cannot be listed: its entries are walked by name.
for top in ("/mullet/work", "/mullet/git", "/mullet/etc", "/mullet/bin", "/tmp", os.environ.get("HOME", "/mullet/home"),
            os.environ.get("TMPDIR", "/tmp")):
    for root, dirs, files in os.walk(top):
        for f in files:
            path = os.path.join(root, f)
            try:
                if os.path.islink(path) or not os.path.isfile(path): continue
                with open(path, "rb") as h:
                    if needle in h.read(): found.append(path)
            except OSError: pass
print("searched; found: " + (" ".join(found) if found else "nothing"))
'

# Requests to the endpoint with no key, another job's sentinel, and the
# real key itself (given in two halves): the status of each, one a line.
PROBE_SCRIPT='
import sys, urllib.request as u
for k in (None, "sk-mullet-00000000000000000000000000000000", sys.argv[1] + sys.argv[2]):
    r = u.Request("http://127.0.0.1:3129/v1/messages", data=b"{}", method="POST",
                  headers={"content-type": "application/json", **({"x-api-key": k} if k else {})})
    try:
        print(u.urlopen(r).status)
    except Exception as e:
        print(getattr(e, "code", e))
'

test_the_key_is_nowhere_inside_and_only_the_upstream_gets_it() {
  scratch
  local key
  key="$(new_key)"
  export MY_VAULT_KEY="$key"
  # The needle is given in two halves, so the command line that carries it
  # never holds it whole.
  local half="${#key}"
  half=$((half / 2))
  local a="${key:0:half}" b="${key:half}"
  tls_api "$(script \
    "$(write_turn w /mullet/work/search.py "$SEARCH_SCRIPT")" \
    "$(bash_turn search "python3 search.py $a $b")" \
    "$(write_turn p /mullet/work/probe.py "$PROBE_SCRIPT")" \
    "$(bash_turn nosentinel "python3 probe.py $a $b")" \
    "$(done_turn "searched")")"
  credential_config '"python3:*"'
  new_repo repo
  cd repo
  cat >>"$S/config.toml" <<EOF2
[[gate]]
name = "search"
command = "python3 search.py $a $b | tee /dev/stderr | grep -q 'found: nothing'"
EOF2
  run_job -m "look for the key"
  expect_job 0
  # Inside: not found, by the worker's Bash nor by the gate.
  assert_contains "$(tool_result search)" "found: nothing" "the worker's search"
  assert_eq "$(json_get "$JOB_JSON" '.attempts[0].gates[0].passed')" true "the gate's search"
  # Without the sentinel, with another job's, with the key itself: nothing
  # gets through. Claude Code's Bash runs in its own sandbox, which has no
  # route to the endpoint at all (connection refused); were it to reach it,
  # each would be a 401 (the endpoint's unit tests send these directly).
  local line probes=0
  while IFS= read -r line; do
    probes=$((probes + 1))
    case "$line" in
      401 | *"Connection refused"*) ;;
      *) fail "a request without this job's sentinel got: $line" ;;
    esac
  done < <(tool_result nosentinel)
  assert_eq "$probes" 3 "probes"
  local show
  show="$(git mullet show --json "$JOB")"
  assert_eq "$(json_get "$show" '[.phases[0].api.requests[] | select(.outcome == "forwarded" and .status != 200)] | length')" 0 \
    "forwarded requests that failed"
  # Upstream: the real key on every request, never the sentinel; nothing
  # the refused requests carried.
  local upstream_keys
  upstream_keys="$(jq -rs '[.[].headers[] | select(.[0] | ascii_downcase == "x-api-key") | .[1]] | unique | join(",")' "$API_LOG")"
  assert_eq "$upstream_keys" "$key" "the key upstream"
  # (The probe's made-up sentinel, all zeros, is in the conversation.)
  if grep -oE 'sk-mullet-[0-9a-f]{32}' "$API_LOG" | grep -v 'sk-mullet-0\{32\}' >/dev/null; then
    fail "this job's sentinel reached the upstream"
  fi
  assert_eq "$(jq -s '[.[] | select(.body == {})] | length' "$API_LOG")" 0 "refused requests upstream"
  # The record and the job's files hold neither the key nor the sentinel's use.
  if git mullet show --json "$JOB" | grep -F "$key" >/dev/null; then fail "the key is in the record"; fi
  if grep -rqF "$key" "$(job_dir "$JOB")" 2>/dev/null; then fail "the key is in the job's directory"; fi
  if git show "refs/mullet/jobs/$JOB:events.jsonl" | grep -F "$key" >/dev/null; then fail "the key is in the events"; fi
}

test_the_budget_is_what_the_endpoint_measured() {
  scratch
  export MY_VAULT_KEY="$(new_key)"
  # Each answer reports 100k input and 20k output tokens of claude-haiku-4-5
  # ($1 and $5 a million): $0.20 each. A budget of $0.35 is crossed by the
  # second answer, so nothing after it goes upstream.
  tls_api "$(many_writes 8)" --model claude-haiku-4-5 --usage '{"input_tokens": 100000, "output_tokens": 20000}'
  credential_config "" "$CA_DIR/ca.pem" 'cost_usd = 0.35'
  new_repo repo
  cd repo
  run_job -m "write eight files"
  expect_job 1
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" budget "how the worker ended"
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.cost_usd" "the error names the limit"
  local forwarded messages
  forwarded="$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "forwarded" and .path == "/v1/messages")] | length')"
  messages="$(jq -s '[.[] | select(.path | test("^/v1/messages([?]|$)"))] | length' "$API_LOG")"
  assert_eq "$forwarded" "$messages" "forwarded requests and what the upstream saw"
  assert_eq "$forwarded" 2 "requests forwarded before the budget was spent"
  # The recorded cost is the scripted usage times the price, per request.
  assert_eq "$(json_get "$JOB_JSON" '(.cost_usd * 100 | round)')" 40 "the metered cost in cents ($(json_get "$JOB_JSON" .cost_usd))"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "budget") | .status] | unique')" \
    "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "budget")] | if length > 0 then [402] else [] end')" \
    "refusals past the budget"
  result_lacks file-8
}

# The forwarded /v1/messages requests of the worker's conversation (those
# with tools) in the record, and in the upstream's log, as JSON lists.
conversation_records() {
  json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "forwarded" and .path == "/v1/messages")]'
}
upstream_conversation() {
  jq -s '[.[] | select((.path | test("^/v1/messages([?]|$)")) and .body.tools != null)]' "$API_LOG"
}

test_no_single_request_blows_the_budget() {
  scratch
  export MY_VAULT_KEY="$(new_key)"
  # Ten million output tokens reported by the first answer would cost far
  # more than $1. The endpoint lowers max_tokens to what $1 affords after the
  # request's estimated input, and the honest upstream reports no more than
  # that: the job ends at its budget, not past it.
  tls_api "$(many_writes 8)" --usage '{"output_tokens": 10000000}' --honest
  credential_config "" "$CA_DIR/ca.pem" 'cost_usd = 1'
  new_repo repo
  cd repo
  run_job -m "write eight files"
  expect_job 1
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" budget "how the worker ended"
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.cost_usd" "the error names the limit"
  local records upstream asked forwarded
  records="$(conversation_records)"
  upstream="$(upstream_conversation)"
  assert_eq "$(jq length <<<"$records")" "$(jq length <<<"$upstream")" "forwarded requests and what the upstream saw"
  asked="$(jq '.[0].cap.max_tokens_asked' <<<"$records")"
  forwarded="$(jq '.[0].cap.max_tokens_forwarded' <<<"$records")"
  # What the upstream got is what the record says was forwarded, below what
  # Claude Code asked.
  assert_eq "$(jq '.[0].body.max_tokens' <<<"$upstream")" "$forwarded" "max_tokens upstream"
  [ "$forwarded" -lt "$asked" ] || fail "max_tokens forwarded ($forwarded) is not below what Claude Code asked ($asked)"
  assert_eq "$(jq '.[0].usage.output_tokens' <<<"$records")" "$forwarded" "the first answer's output (honest)"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].api.totals.max_tokens_lowered > 0')" true "requests lowered"
  # The cost: at most the limit, and short of it by less than one answer's
  # capped output.
  local cost largest
  cost="$(json_get "$JOB_JSON" .cost_usd)"
  largest="$(jq '[.[].cap.cost_cap_usd] | max' <<<"$records")"
  assert_eq "$(jq -n --argjson c "$cost" '$c <= 1')" true "the cost ($cost) is within the limit"
  assert_eq "$(jq -n --argjson c "$cost" --argjson l "$largest" '1 - $c < $l')" true \
    "the cost ($cost) is within one capped answer (\$$largest) of the limit"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "budget") | .status] | unique')" \
    '[402]' "the refusal that ended it"
}

test_an_upstream_that_reports_more_than_it_was_allowed_is_still_metered() {
  scratch
  export MY_VAULT_KEY="$(new_key)"
  # A lying (or broken) upstream reports ten million output tokens whatever
  # max_tokens said: that answer cannot be stopped, but it is charged, and
  # nothing goes upstream after it.
  tls_api "$(many_writes 8)" --usage '{"output_tokens": 10000000}'
  credential_config "" "$CA_DIR/ca.pem" 'cost_usd = 1'
  new_repo repo
  cd repo
  run_job -m "write eight files"
  expect_job 1
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" budget "how the worker ended"
  local records upstream
  records="$(conversation_records)"
  upstream="$(upstream_conversation)"
  assert_eq "$(jq length <<<"$upstream")" 1 "conversation requests upstream"
  assert_eq "$(jq length <<<"$records")" 1 "conversation requests forwarded"
  assert_eq "$(jq '.[0].usage.output_tokens' <<<"$records")" 10000000 "the output it reported"
  [ "$(jq '.[0].body.max_tokens' <<<"$upstream")" -lt "$(jq '.[0].cap.max_tokens_asked' <<<"$records")" ] ||
    fail "max_tokens was not lowered: $(jq -c '.[0].cap' <<<"$records")"
  # Charged in full: the meter believes the usage, not the cap.
  assert_eq "$(json_get "$JOB_JSON" '.cost_usd > 1')" true "the cost ($(json_get "$JOB_JSON" .cost_usd)) is what was reported"
  assert_eq "$(json_get "$JOB_JSON" '.cost_usd')" "$(jq '.[0].cost_usd' <<<"$records")" "the job's cost"
  result_lacks file-2
}

test_uploads_through_the_endpoint_stop_at_limits_egress_mb() {
  scratch
  export MY_VAULT_KEY="$(new_key)"
  # Claude Code's Bash cannot reach the endpoint, but every request carries
  # the whole conversation: 60 turns that each add 28 KB of Bash output make
  # the requests add up to about 50 MB, ten times the cap.
  local turns=() k
  for k in $(seq 1 60); do
    turns+=("$(bash_turn "b$k" "python3 -c 'import os; print(os.urandom(14000).hex())'")")
  done
  tls_api "$(script "${turns[@]}" "$(done_turn "pushed")")"
  credential_config '"python3:*"' "$CA_DIR/ca.pem" 'egress_mb = 5'
  new_repo repo
  cd repo
  run_job -m "push 50 MB upstream"
  expect_job 1
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].ended_by')" egress "how the worker ended"
  assert_contains "$(json_field "$JOB_JSON" error)" "limits.egress_mb" "the error names the limit"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].upload.limit_bytes')" 5242880 "the cap in the record"
  local recorded received
  recorded="$(json_get "$JOB_JSON" ".phases[0].upload.bytes_up[\"127.0.0.1:$API_PORT\"]")"
  [ "$recorded" -gt 1048576 ] && [ "$recorded" -le 5242880 ] || fail "bytes up recorded: $recorded"
  assert_eq "$(json_get "$JOB_JSON" '.phases[0].api.totals.bytes_up | add')" "$recorded" "the endpoint's own count"
  # The upstream got the request bodies the record counts (with their heads),
  # no more than the cap, and never the request that would have crossed it.
  received="$(jq -s '[.[] | .body | tojson | length] | add // 0' "$API_LOG")"
  [ "$received" -gt 1048576 ] && [ "$received" -le "$recorded" ] || fail "the upstream received $received bytes of bodies"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | select(.outcome == "egress") | .status] | unique')" \
    '[413]' "the request that would have crossed the cap"
  [ "$(messages_requests)" -lt 40 ] || fail "the conversation went on past the cap: $(messages_requests) requests"
}

test_an_upstream_that_is_down_or_unverified_is_named_fast() {
  scratch
  export MY_VAULT_KEY="$(new_key)"
  new_repo repo
  cd repo
  # Not verified: the system's trust store does not know the test CA.
  tls_api "$(script "$(done_turn "never")")"
  credential_config "" ""
  local started
  started="$(date +%s)"
  run_job -m "unverified upstream"
  expect_job 1
  assert_contains "$(json_field "$JOB_JSON" error)" "could not be reached" "error"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | .outcome] | unique')" '["upstream_certificate"]' "outcomes"
  assert_eq "$(wc -l <"$API_LOG")" 0 "requests the unverified upstream answered"
  [ $(($(date +%s) - started)) -lt 60 ] || fail "took $(($(date +%s) - started)) s"
  # Down: a port nobody listens on.
  API_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  credential_config ""
  run_job -m "upstream down"
  expect_job 1
  assert_contains "$(json_field "$JOB_JSON" error)" "could not be reached" "error"
  assert_eq "$(json_get "$JOB_JSON" '[.phases[0].api.requests[] | .outcome] | unique')" '["upstream_unreachable"]' "outcomes"
}

test_a_credential_command_runs_on_the_host_without_a_shell() {
  scratch
  make_ca
  tls_api "$(script "$(done_turn "done")")"
  local key
  key="$(new_key)"
  printf '#!/bin/sh\n[ "$1" = "show; echo" ] && printf "%%s\\nnotes on a second line\\n" %s\n' "$key" >"$S/vault"
  chmod 755 "$S/vault"
  credential_config ""
  sed -i 's|^env = "MY_VAULT_KEY"$|command = ["'"$S"'/vault", "show; echo"]|' "$S/config.toml"
  new_repo repo
  cd repo
  run_job -m "through a command"
  expect_job 0
  assert_eq "$(jq -rs '[.[].headers[] | select(.[0] | ascii_downcase == "x-api-key") | .[1]] | unique | join(",")' "$API_LOG")" \
    "$key" "the key upstream (its first line)"
  # A failing command refuses before any job exists.
  printf '#!/bin/sh\nexit 3\n' >"$S/vault"
  local code=0 err
  err="$(git mullet run -q -m "vault locked" 2>&1 >/dev/null)" || code=$?
  assert_eq "$code" 2 "exit code when the command fails"
  assert_contains "$err" "failed" "the refusal"
}

run_tests
