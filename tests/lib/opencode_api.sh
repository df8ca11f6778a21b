# Driving the real opencode CLI against the scripted OpenAI-compatible API
# (fake_openai_api.py) behind git-mullet's credential endpoint: the script's
# turns, the server, the configuration and what the server saw. Sourced by
# suites after harness.sh.

FAKE_OPENAI_API="$HARNESS_DIR/fake_openai_api.py"
PINNED_OPENCODE_VERSION="$(cat "$HARNESS_DIR/../../scripts/opencode-version")"

# No opencode, no suite: this fails (it does not skip), so a missing binary
# can never pass for a green run.
if [ -z "${MULLET_TEST_OPENCODE:-}" ] || [ ! -f "$MULLET_TEST_OPENCODE" ] || [ ! -x "$MULLET_TEST_OPENCODE" ]; then
  echo "Bail out! MULLET_TEST_OPENCODE ('${MULLET_TEST_OPENCODE:-}') is not an executable opencode binary." >&2
  echo "Bail out! Run scripts/test (it installs the pinned opencode with scripts/install-opencode and configures" >&2
  echo "Bail out! the build with -DMULLET_TEST_OPENCODE=...), or configure that yourself." >&2
  echo "0 passed, 1 failed"
  rm -rf "$TEST_ROOT"
  exit 1
fi

# The upstream key, in git-mullet's environment only (the [[credential]]
# below names it); the worker gets a sentinel.
export MULLET_TEST_OPENAI_KEY="sk-test-openai-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

# ---------------------------------------------------------------------------
# The script's turns, one compact JSON list each (opencode's tool names and
# arguments: docs/opencode-probe.md).

# oc_bash_turn ID COMMAND: the model runs COMMAND with the bash tool.
oc_bash_turn() {
  jq -cn --arg id "$1" --arg command "$2" '[{tool: "bash", id: $id, input: {command: $command, description: "scripted"}}]'
}

# oc_write_turn ID PATH CONTENT: the model writes a file with the write tool.
oc_write_turn() {
  jq -cn --arg id "$1" --arg path "$2" --arg content "$3" \
    '[{text: "Writing the file."}, {tool: "write", id: $id, input: {filePath: $path, content: $content}}]'
}

# oc_done_turn SUMMARY [STATUS]: the model's last message, with the result line.
oc_done_turn() {
  jq -cn --arg summary "$1" --arg status "${2:-done}" \
    '[{text: ("Finished.\nMULLET-RESULT " + ({status: $status, summary: $summary} | tojson))}]'
}

# oc_script TURN...: a new script file (its path is printed).
oc_script() {
  local file
  file="$(mktemp "$S/script.XXXXXX")"
  printf '%s\n' "$@" | jq -s . >"$file"
  echo "$file"
}

# ---------------------------------------------------------------------------
# The server, the configuration and what the server saw.

scratch() {
  S="$PWD"
  API_PIDS=()
  trap stop_api EXIT
}

stop_api() {
  local pid
  for pid in "${API_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${API_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# start_openai_api SCRIPT_FILE [ARGS...]: a fake API server; sets API_PORT and API_LOG.
start_openai_api() {
  local name="api${#API_PIDS[@]}"
  API_LOG="$S/$name.log"
  timeout 180 python3 "$FAKE_OPENAI_API" serve --port-file "$S/$name.port" --log "$API_LOG" --script "$1" "${@:2}" &
  API_PIDS+=($!)
  wait_until 20 test -s "$S/$name.port"
  API_PORT="$(cat "$S/$name.port")"
}

# opencode_config ALLOW_BASH [EXTRA] [MODEL] [HEADER FORMAT VARIABLE]: the
# user config (allow_bash: a TOML array body), pointed at by
# GIT_MULLET_CONFIG. The credential endpoint forwards the worker's requests
# to the fake server with the key of MULLET_TEST_OPENAI_KEY as a bearer token
# (or in HEADER, as FORMAT, from VARIABLE). OPENCODE_BINARY overrides the
# binary.
opencode_config() {
  local model="${3:-local/test-model}" header="${4:-authorization}" format="${5:-}" variable="${6:-MULLET_TEST_OPENAI_KEY}"
  [ -n "$format" ] || format='Bearer {}'
  cat >"$S/config.toml" <<EOF2
[run]
executor = "opencode"

[opencode]
binary = "${OPENCODE_BINARY:-$MULLET_TEST_OPENCODE}"
model = "$model"
allow_bash = [$1]
credential = "local"

[[credential]]
name = "local"
base_url = "http://127.0.0.1:$API_PORT"
header = "$header"
format = "$format"
env = "$variable"

[limits]
timeout = 120
${2-}
EOF2
  export GIT_MULLET_CONFIG="$S/config.toml"
}

# oc_tool_result ID: what opencode sent back to the model for tool call ID.
oc_tool_result() {
  local line
  line="$(python3 "$FAKE_OPENAI_API" results "$API_LOG" | jq -c --arg id "call_$1" 'select(.id == $id)')"
  [ -n "$line" ] || fail "no tool result for $1 in the API log"
  json_get "$line" .text
}

expect_job() {
  [ "$RUN_CODE" = "$1" ] || fail "exit code $RUN_CODE, expected $1: $JOB_JSON"
}
