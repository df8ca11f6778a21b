# Driving the real Claude Code CLI against the scripted Messages API
# (fake_claude_api.py): the script's turns, the server, the configuration and
# what the server saw. Sourced by suites after harness.sh.

FAKE_API="$HARNESS_DIR/fake_claude_api.py"
PINNED_VERSION="$(cat "$HARNESS_DIR/../../scripts/claude-code-version")"

# No Claude Code, no suite: this fails (it does not skip), so a missing
# binary can never pass for a green run.
if [ -z "${MULLET_TEST_CLAUDE:-}" ] || [ ! -f "$MULLET_TEST_CLAUDE" ] || [ ! -x "$MULLET_TEST_CLAUDE" ]; then
  echo "Bail out! MULLET_TEST_CLAUDE ('${MULLET_TEST_CLAUDE:-}') is not an executable Claude Code binary." >&2
  echo "Bail out! Run scripts/test (it installs the pinned Claude Code with scripts/install-claude and configures" >&2
  echo "Bail out! the build with -DMULLET_TEST_CLAUDE=...), or configure that yourself." >&2
  echo "0 passed, 1 failed"
  rm -rf "$TEST_ROOT"
  exit 1
fi

export ANTHROPIC_API_KEY=sk-test-not-a-real-key

# ---------------------------------------------------------------------------
# The script's turns, one compact JSON list each.

# bash_turn ID COMMAND: the model runs COMMAND with the Bash tool; its result
# is tool_result ID.
bash_turn() {
  jq -cn --arg id "$1" --arg command "$2" '[{tool: "Bash", id: $id, input: {command: $command, description: "scripted"}}]'
}

# write_turn ID PATH CONTENT: the model writes a file with the Write tool.
write_turn() {
  jq -cn --arg id "$1" --arg path "$2" --arg content "$3" \
    '[{text: "Writing the file."}, {tool: "Write", id: $id, input: {file_path: $path, content: $content}}]'
}

# done_turn SUMMARY: the model returns its structured result, status done.
done_turn() {
  jq -cn --arg summary "$1" '[{tool: "StructuredOutput", id: "result", input: {status: "done", summary: $summary}}]'
}

# write_script FILE TURN...: a script file for a server.
write_script() {
  local file="$1"
  shift
  printf '%s\n' "$@" | jq -s . >"$file.tmp"
  mv "$file.tmp" "$file"
}

# script TURN...: a new script file (its path is printed).
script() {
  local file
  file="$(mktemp "$S/script.XXXXXX")"
  write_script "$file" "$@"
  echo "$file"
}

# ---------------------------------------------------------------------------
# The server, the configuration and what the server saw.

# scratch: every test starts with it; S is the test's scratch directory.
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

# start_api SCRIPT_FILE [--never-structured]: a fake API server; sets
# API_PORT and API_LOG (its request log).
start_api() {
  local name="api${#API_PIDS[@]}"
  API_LOG="$S/$name.log"
  timeout 120 python3 "$FAKE_API" serve --port-file "$S/$name.port" --log "$API_LOG" --script "$1" "${@:2}" &
  API_PIDS+=($!)
  wait_until 20 test -s "$S/$name.port"
  API_PORT="$(cat "$S/$name.port")"
}

# claude_config ALLOW_BASH [BASE_URL] [ENV]: the user config (TOML array
# bodies for allow_bash and [sandbox] env), pointed at by GIT_MULLET_CONFIG.
# The key stays in our environment: the credential endpoint forwards the
# worker's requests to BASE_URL with it.
claude_config() {
  local base_url="${2:-http://127.0.0.1:$API_PORT}" env="${3-}"
  cat >"$S/config.toml" <<EOF
[claude]
binary = "$MULLET_TEST_CLAUDE"
base_url = "$base_url"
allow_bash = [$1]

[sandbox]
env = [$env]

[limits]
timeout = 90
EOF
  export GIT_MULLET_CONFIG="$S/config.toml"
}

# timed_job ARGS...: run_job (the default executor: claude), and SECONDS_TAKEN.
timed_job() {
  local started
  started="$(date +%s)"
  run_job "$@"
  SECONDS_TAKEN=$(($(date +%s) - started))
}

# tool_results: every tool result Claude Code sent back to the model, one
# JSON object a line: {"id", "is_error", "text"}.
tool_results() { python3 "$FAKE_API" results "$API_LOG"; }

# tool_result ID: the text of that tool use's result; fails the test when
# the model never got one.
tool_result() {
  local line
  line="$(tool_results | jq -c --arg id "toolu_$1" 'select(.id == $id)')"
  [ -n "$line" ] || fail "no tool_result for $1 in the API log; the results were: $(tool_results)"
  json_get "$line" .text
}

tool_is_error() {
  tool_result "$1" >/dev/null
  json_get "$(tool_results | jq -c --arg id "toolu_$1" 'select(.id == $id)')" .is_error
}

# messages_requests: how many /v1/messages requests reached the server.
messages_requests() { jq -r '.path' "$API_LOG" | grep -c '^/v1/messages\(?\|$\)' || true; }

# result_has PATH / result_lacks PATH: in the job's result commit.
result_tree() {
  local result
  result="$(json_field "$JOB_JSON" result)"
  [ "$result" != null ] || return 0
  git ls-tree -r --name-only "$result"
}
result_has() {
  result_tree | grep -xF "$1" >/dev/null || fail "$1 is not in the result (files: $(result_tree | tr '\n' ' ')); job: $JOB_JSON"
}
result_lacks() {
  if result_tree | grep -xF "$1" >/dev/null; then fail "$1 is in the result"; fi
}

# denied_commands: the Bash commands of the report's permission_denials.
denied_commands() {
  git mullet show --json "$JOB" | jq -r '.report.permission_denials[] | select(.tool_name == "Bash") | .tool_input.command'
}

# init_event: the system/init event of the job's record.
init_event() {
  git show "refs/mullet/jobs/$JOB:events.jsonl" | jq -c 'select(.type == "system" and .subtype == "init")'
}

expect_job() {
  [ "$RUN_CODE" = "$1" ] || fail "exit code $RUN_CODE, expected $1: $JOB_JSON"
}

# many_writes N: a script of N turns, each writing file-K with the Write tool,
# then the structured result.
many_writes() {
  local turns=() k
  for k in $(seq 1 "$1"); do turns+=("$(write_turn "w$k" "/mullet/work/file-$k" "$k")"); done
  script "${turns[@]}" "$(done_turn "wrote $1 files")"
}

