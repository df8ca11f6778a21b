// Unit tests for the Claude Code executor's pure parts: the worker's command
// line, settings, schema, prompt and endpoint (claude_args), the stream-json
// events and the verdict (claude_stream), and the progress line (progress).
//
// The event fixtures are real output of Claude Code 2.1.197 (stream-json),
// run offline against a scripted Messages API server (see
// /work/shared/reference/worker-clis.md, "Offline testing"). They are trimmed
// of fields nothing here reads (uuid, most of usage, modelUsage, agents,
// skills, tool_use_result, timing details); every other byte is as emitted.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "executors/binary_file.hpp"
#include "executors/claude_args.hpp"
#include "executors/claude_stream.hpp"
#include "executors/executor.hpp"
#include "executors/progress.hpp"
#include "util/error.hpp"

#include "support/support.hpp"

namespace claude = mullet::executors::claude;
using mullet::ExitCode;
using mullet::executors::Progress;
using mullet::executors::progress_text;
using mullet::executors::WorkerOutcome;
using mullet::sandbox::StopReason;
using mullet::test::contains;
using nlohmann::json;
using Strings = std::vector<std::string>;

namespace {

// ---------------------------------------------------------------------------
// Real stream-json output of Claude Code 2.1.197.

// Inside git-mullet's sandbox (job 2a08d3c5a0, `[claude] allow_bash = ["touch
// ok"]`): text, a Write, an allowed Bash, a compound Bash that dontAsk refused,
// then StructuredOutput. Note that one message's content blocks arrive as
// separate assistant events sharing the message id (msg_1 twice).
constexpr const char* kSuccessRun =
    R"jsonl({"type":"system","subtype":"init","cwd":"/mullet/work","session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"I will write the file."}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_1_1","name":"Write","input":{"file_path":"/mullet/work/hello.txt","content":"hi\n"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1_1","type":"tool_result","content":"File created successfully at: /mullet/work/hello.txt (file state is current in your context — no need to Read it back)"}]},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","timestamp":"2026-12-02T17:15:26.644Z"}
{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_2_0","name":"Bash","input":{"command":"touch ok","description":"t"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2_0","type":"tool_result","content":"(Bash completed with no output)","is_error":false}]},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","timestamp":"2026-12-02T17:15:26.827Z"}
{"type":"assistant","message":{"id":"msg_3","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_3_0","name":"Bash","input":{"command":"touch ok; touch evil","description":"t"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Permission to use Bash has been denied because Claude Code is running in don't ask mode. IMPORTANT: You *may* attempt to accomplish this action using other tools that might naturally be used to accomplish this goal, e.g. using head instead of cat. But you *should not* attempt to work around this denial in malicious ways, e.g. do not use your ability to run tests to execute non-test actions. You should only try to work around this restriction in reasonable ways that do not attempt to bypass the intent behind this denial. If you believe this capability is essential to complete the user's request, STOP and explain to the user what you were trying to do and why you need this permission. Let the user decide how to proceed.","is_error":true,"tool_use_id":"toolu_3_0"}]},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","timestamp":"2026-12-02T17:15:26.882Z"}
{"type":"assistant","message":{"id":"msg_4","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_4_0","name":"StructuredOutput","input":{"status":"done","summary":"wrote hello.txt"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_4_0","type":"tool_result","content":"Structured output provided successfully"}]},"parent_tool_use_id":null,"session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","timestamp":"2026-12-02T17:15:26.916Z"}
{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":361,"duration_api_ms":171,"num_turns":5,"result":"{\"status\":\"done\",\"summary\":\"wrote hello.txt\"}","stop_reason":"tool_use","session_id":"f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc","total_cost_usd":0.004,"usage":{"input_tokens":400,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":80},"permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_3_0","tool_input":{"command":"touch ok; touch evil","description":"t"}}],"structured_output":{"status":"done","summary":"wrote hello.txt"},"terminal_reason":"completed"}
)jsonl";

// Run by hand without our settings or --disable-slash-commands, and with no
// credentials: a synthetic assistant message (error authentication_failed),
// then an error result that says "success". Its init lists slash commands
// and memory paths.
constexpr const char* kNotLoggedIn =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/probe/w","session_id":"d1c60014-3e2b-40c4-8748-320d36c809d9","tools":["Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":["deep-research","update-config","verify","debug","code-review","simplify","batch","fewer-permission-prompts","loop","claude-api","run","run-skill-generator","clear","compact","config","context","heapdump","init","reload-skills","review","security-review","usage","insights","goal","team-onboarding"],"apiKeySource":"none","claude_code_version":"2.1.197","plugins":[],"memory_paths":{"auto":"/tmp/probe/cfg2/projects/-tmp-probe-w/memory/"}}
{"type":"assistant","message":{"id":"e07cd055-1215-4c6e-97b0-ffa835ea25c6","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"content":[{"type":"text","text":"Not logged in · Please run /login"}]},"parent_tool_use_id":null,"session_id":"d1c60014-3e2b-40c4-8748-320d36c809d9","error":"authentication_failed"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"duration_ms":69,"duration_api_ms":0,"num_turns":1,"result":"Not logged in · Please run /login","stop_reason":"stop_sequence","session_id":"d1c60014-3e2b-40c4-8748-320d36c809d9","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"permission_denials":[],"terminal_reason":"completed"}
)jsonl";

// Likewise without our settings: the model answered in text and never called
// StructuredOutput; Claude Code nudged it once and still reported success,
// with no structured_output.
constexpr const char* kNoStructuredOutput =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/probe/w","session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059","tools":["Bash","Edit","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":["deep-research","design-sync","update-config","verify","debug","code-review","simplify","batch","fewer-permission-prompts","loop","claude-api","run","run-skill-generator","clear","compact","config","context","heapdump","init","reload-skills","review","security-review","usage","insights","goal","team-onboarding"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[],"memory_paths":{"auto":"/tmp/probe/cfg/projects/-tmp-probe-w/memory/"}}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_1_0","name":"Write","input":{"file_path":"/tmp/probe/w/hello.txt","content":"hi\n"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1_0","type":"tool_result","content":"File created successfully at: /tmp/probe/w/hello.txt (file state is current in your context — no need to Read it back)"}]},"parent_tool_use_id":null,"session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059","timestamp":"2026-12-02T17:06:17.593Z"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"done"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[structured-output-enforce] You MUST call the StructuredOutput tool to complete this request. Call this tool now."}]},"parent_tool_use_id":null,"session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059","timestamp":"2026-12-02T17:06:17.650Z","isSynthetic":true}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"done"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059"}
{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":236,"duration_api_ms":159,"num_turns":3,"result":"done","stop_reason":"end_turn","session_id":"e6dbbb2e-05f2-42b9-ba0b-21087b33b059","total_cost_usd":0.004,"usage":{"input_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":60},"permission_denials":[],"terminal_reason":"completed"}
)jsonl";

// --max-turns 2 (a hidden flag).
constexpr const char* kMaxTurns =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/cu-probe/w","session_id":"1982bba8-0642-4aea-abac-95339dd2f127","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"Looking."}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"1982bba8-0642-4aea-abac-95339dd2f127"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_1_1","name":"Bash","input":{"command":"touch ok","description":"t"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"1982bba8-0642-4aea-abac-95339dd2f127"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1_1","type":"tool_result","content":"(Bash completed with no output)","is_error":false}]},"parent_tool_use_id":null,"session_id":"1982bba8-0642-4aea-abac-95339dd2f127","timestamp":"2026-12-02T17:18:09.453Z"}
{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_2_0","name":"Read","input":{"file_path":"/tmp/cu-probe/w/ok"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"1982bba8-0642-4aea-abac-95339dd2f127"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2_0","type":"tool_result","content":"<system-reminder>Warning: the file exists but is shorter than the provided offset (1). The file has 1 lines.</system-reminder>"}]},"parent_tool_use_id":null,"session_id":"1982bba8-0642-4aea-abac-95339dd2f127","timestamp":"2026-12-02T17:18:09.602Z"}
{"type":"result","subtype":"error_max_turns","duration_ms":547,"duration_api_ms":215,"is_error":true,"num_turns":3,"stop_reason":"tool_use","session_id":"1982bba8-0642-4aea-abac-95339dd2f127","total_cost_usd":0.002,"usage":{"input_tokens":200,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40},"permission_denials":[],"terminal_reason":"max_turns","errors":["Reached maximum number of turns (2)"]}
)jsonl";

// --max-budget-usd 0.0015: the result line.
constexpr const char* kMaxBudget =
    R"jsonl({"type":"result","subtype":"error_max_budget_usd","duration_ms":566,"duration_api_ms":147,"is_error":true,"num_turns":2,"stop_reason":"tool_use","session_id":"922068e1-7266-4950-8378-12c1d1e7e88c","total_cost_usd":0.002,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20},"permission_denials":[],"errors":["Reached maximum budget ($0.0015)"]}
)jsonl";

// The model kept calling StructuredOutput with status "maybe": the result line.
constexpr const char* kStructuredOutputRetries =
    R"jsonl({"type":"result","subtype":"error_max_structured_output_retries","duration_ms":403,"duration_api_ms":283,"is_error":true,"num_turns":6,"stop_reason":"tool_use","session_id":"9aaa57e2-d995-460a-a1e5-395b7bbb59ac","total_cost_usd":0.004,"usage":{"input_tokens":400,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":80},"permission_denials":[],"errors":["Failed to provide valid structured output after 5 attempts"]}
)jsonl";

// ANTHROPIC_BASE_URL at a closed port, CLAUDE_CODE_MAX_RETRIES=1.
constexpr const char* kConnectionRefused =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/cu-probe/w","session_id":"f329dfa5-0dfa-45c4-853c-344ca013ee7f","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":546.119723461891,"error_status":null,"error":"unknown","session_id":"f329dfa5-0dfa-45c4-853c-344ca013ee7f"}
{"type":"assistant","message":{"id":"55fb3f82-802e-4551-81fd-a3b405827b33","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"content":[{"type":"text","text":"API Error: Unable to connect to API (ConnectionRefused)"}]},"parent_tool_use_id":null,"session_id":"f329dfa5-0dfa-45c4-853c-344ca013ee7f","error":"server_error"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"duration_ms":723,"duration_api_ms":0,"num_turns":1,"result":"API Error: Unable to connect to API (ConnectionRefused)","stop_reason":"stop_sequence","session_id":"f329dfa5-0dfa-45c4-853c-344ca013ee7f","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"permission_denials":[],"terminal_reason":"completed"}
)jsonl";

// The endpoint answers every request with HTTP 500.
constexpr const char* kHttp500 =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/cu-probe/w","session_id":"fb45686b-88c7-49ab-9fef-d85d2828e815","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":600.5802778538113,"error_status":500,"error":"server_error","session_id":"fb45686b-88c7-49ab-9fef-d85d2828e815"}
{"type":"assistant","message":{"id":"e759f10c-4653-40d9-b145-2538aa24e816","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"content":[{"type":"text","text":"API Error: 500 boom. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:44543)."}]},"parent_tool_use_id":null,"session_id":"fb45686b-88c7-49ab-9fef-d85d2828e815","error":"server_error"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"duration_ms":781,"duration_api_ms":0,"num_turns":1,"result":"API Error: 500 boom. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:44543).","stop_reason":"stop_sequence","session_id":"fb45686b-88c7-49ab-9fef-d85d2828e815","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"permission_denials":[],"terminal_reason":"completed"}
)jsonl";

// The endpoint answers every request with HTTP 401.
constexpr const char* kHttp401 =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/cu-probe/w","session_id":"ca16dad9-5ee9-43a1-b060-c4e7dee0cce4","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":602.190109327518,"error_status":401,"error":"authentication_failed","session_id":"ca16dad9-5ee9-43a1-b060-c4e7dee0cce4"}
{"type":"assistant","message":{"id":"62243b33-2928-45ed-9d3d-616cf7a5ddfc","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"content":[{"type":"text","text":"Failed to authenticate. API Error: 401 boom"}]},"parent_tool_use_id":null,"session_id":"ca16dad9-5ee9-43a1-b060-c4e7dee0cce4","error":"authentication_failed"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"duration_ms":717,"duration_api_ms":0,"num_turns":1,"result":"Failed to authenticate. API Error: 401 boom","stop_reason":"stop_sequence","session_id":"ca16dad9-5ee9-43a1-b060-c4e7dee0cce4","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"permission_denials":[],"terminal_reason":"completed"}
)jsonl";

// Our settings, socat missing from PATH: stdout (its stderr is below).
constexpr const char* kSandboxUnavailable =
    R"jsonl({"type":"result","subtype":"error_during_execution","duration_ms":0,"duration_api_ms":0,"is_error":true,"num_turns":0,"stop_reason":null,"session_id":"f67e1724-0ba8-47da-b07f-98b06396f31c","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"permission_denials":[],"errors":["Sandbox required but unavailable: sandbox is enabled but dependencies are missing: socat not installed · install missing tools (e.g. apt install bubblewrap socat) or see https://code.claude.com/docs/en/sandboxing. Set sandbox.failIfUnavailable=false to allow unsandboxed execution."]}
)jsonl";

// The worker returned status "blocked".
constexpr const char* kBlocked =
    R"jsonl({"type":"system","subtype":"init","cwd":"/tmp/cu-probe/w","session_id":"da24e61e-9283-4cb8-9d4c-c88d098ef683","tools":["Bash","Edit","Glob","Grep","Read","StructuredOutput","Write"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"dontAsk","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","plugins":[]}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"tool_use","id":"toolu_1_0","name":"StructuredOutput","input":{"status":"blocked","summary":"the tests need network access"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"da24e61e-9283-4cb8-9d4c-c88d098ef683"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1_0","type":"tool_result","content":"Structured output provided successfully"}]},"parent_tool_use_id":null,"session_id":"da24e61e-9283-4cb8-9d4c-c88d098ef683","timestamp":"2026-12-02T17:19:08.968Z"}
{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":112,"duration_api_ms":76,"num_turns":2,"result":"{\"status\":\"blocked\",\"summary\":\"the tests need network access\"}","stop_reason":"tool_use","session_id":"da24e61e-9283-4cb8-9d4c-c88d098ef683","total_cost_usd":0.001,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20},"permission_denials":[],"structured_output":{"status":"blocked","summary":"the tests need network access"},"terminal_reason":"completed"}
)jsonl";

// Successful runs whose summaries happen to mention an error: the result lines.
constexpr const char* kDoneSummaryMentionsApiError =
    R"jsonl({"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":98,"duration_api_ms":64,"num_turns":2,"result":"{\"status\":\"done\",\"summary\":\"Reworded the \\\"Connection error\\\" banner and the API Error toast\"}","stop_reason":"tool_use","session_id":"edc878a8-f51e-471b-8b90-eae1ad77fe66","total_cost_usd":0.001,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20},"permission_denials":[],"structured_output":{"status":"done","summary":"Reworded the \"Connection error\" banner and the API Error toast"},"terminal_reason":"completed"}
)jsonl";

constexpr const char* kDoneSummaryMentionsNotLoggedIn =
    R"jsonl({"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":148,"duration_api_ms":90,"num_turns":2,"result":"{\"status\":\"done\",\"summary\":\"The header now says Not logged in for guests\"}","stop_reason":"tool_use","session_id":"8acc3ad2-f5a0-46d6-aa75-e6a3b846b6e6","total_cost_usd":0.001,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20},"permission_denials":[],"structured_output":{"status":"done","summary":"The header now says Not logged in for guests"},"terminal_reason":"completed"}
)jsonl";

// Claude Code's stderr when its own sandbox cannot start (socat missing from
// PATH), alongside kSandboxUnavailable on stdout; it exited 1.
constexpr const char* kSandboxUnavailableStderr =
    "\nError: sandbox required but unavailable: sandbox is enabled but dependencies are missing: socat not installed "
    "· install missing tools (e.g. apt install bubblewrap socat) or see https://code.claude.com/docs/en/sandboxing\n"
    "  sandbox.failIfUnavailable is set — refusing to start without a working sandbox.\n\n";

// An excerpt of `claude --help` of 2.1.197, with its odd lines kept: two names
// for one option, "-p, --print", a flag in the usage line after "/", flags in
// descriptions, "--output-format=stream-json" and "--tmux=classic".
constexpr const char* kHelpExcerpt = R"help(Usage: claude [options] [command] [prompt]

Claude Code - starts an interactive session by default, use -p/--print for
non-interactive output

Arguments:
  prompt                                Your prompt

Options:
  --add-dir <directories...>            Additional directories to allow tool
                                        access to
  --allowedTools, --allowed-tools <tools...>
      Comma or space-separated list of tool names to allow (e.g. "Bash(git *)
      Edit")
  --disable-slash-commands              Disable all skills
  -h, --help                            Display help for command
  --include-partial-messages            Include partial message chunks as they
                                        arrive (only works with --print and
                                        --output-format=stream-json)
  --json-schema <schema>                JSON Schema for structured output
                                        validation. Example:
                                        {"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}
  --max-budget-usd <amount>             Maximum dollar amount to spend on API
                                        calls (only works with --print)
  --no-session-persistence              Disable session persistence - sessions
                                        will not be saved to disk and cannot be
                                        resumed (only works with --print)
  --output-format <format>              Output format (only works with --print):
                                        "text" (default), "json" (single
                                        result), or "stream-json" (realtime
                                        streaming) (choices: "text", "json",
                                        "stream-json")
  --permission-mode <mode>              Permission mode to use for the session
                                        (choices: "acceptEdits", "auto",
                                        "bypassPermissions", "default",
                                        "dontAsk", "plan")
  -p, --print                           Print response and exit (useful for
                                        pipes). Note: The workspace trust dialog
                                        is skipped when Claude is run in
                                        non-interactive mode (via -p, or when
                                        stdout is not a TTY, e.g. piped or
                                        redirected output).
  --setting-sources <sources>           Comma-separated list of setting sources
                                        to load (user, project, local).
  --settings <file-or-json>             Path to a settings JSON file or a JSON
                                        string to load additional settings from
  --strict-mcp-config                   Only use MCP servers from --mcp-config,
                                        ignoring all other MCP configurations
  --tmux                                Create a tmux session for the worktree
                                        (requires --worktree). Uses iTerm2
                                        native panes when available; use
                                        --tmux=classic for traditional tmux.
  --tools <tools...>                    Specify the list of available tools from
                                        the built-in set. Use "" to disable all
                                        tools, "default" to use all tools, or
                                        specify tool names (e.g.
                                        "Bash,Edit,Read").
  --verbose                             Override verbose mode setting from
                                        config
  -v, --version                         Output the version number

Commands:
  agents [options]                      Manage background agents
  mcp                                   Configure and manage MCP servers
)help";

// ---------------------------------------------------------------------------
// Helpers.

// The flags git-mullet relies on: a binary without one of them is refused.
const Strings kRequiredFlags = {"--print",           "--strict-mcp-config",     "--disable-slash-commands",
                                "--tools",           "--permission-mode",       "--output-format",
                                "--verbose",         "--json-schema",           "--settings",
                                "--setting-sources", "--no-session-persistence"};
// The flags among them (and the optional ones) that take a value.
const std::set<std::string> kValueFlags = {"--tools",    "--permission-mode", "--output-format",  "--json-schema",
                                           "--settings", "--setting-sources", "--max-budget-usd", "--model"};

const std::string kSettingsPath = "/mullet/etc/claude-settings.json";

std::set<std::string> required_flags() {
  return {kRequiredFlags.begin(), kRequiredFlags.end()};
}

// A list of permission rules without the Bash ones.
json without_bash_rules(const json& rules) {
  json kept = json::array();
  for (const auto& rule : rules) {
    if (rule.get<std::string>().rfind("Bash(", 0) != 0) kept.push_back(rule);
  }
  return kept;
}

// The tools of a worker that may run some Bash.
Strings tools_with_bash() {
  return claude::worker_tools({"npm test"});
}

claude::ArgvOptions argv_options(double budget = 0) {
  return {tools_with_bash(), kSettingsPath, claude::result_schema().dump(), budget, ""};
}

// argv split into flags (each with its value, or none) and anything else.
struct ParsedArgv {
  std::vector<std::pair<std::string, std::optional<std::string>>> flags;
  Strings positional;

  std::size_t count(const std::string& name) const {
    return static_cast<std::size_t>(
        std::count_if(flags.begin(), flags.end(), [&](const auto& flag) { return flag.first == name; }));
  }
  std::optional<std::string> value(const std::string& name) const {
    for (const auto& flag : flags) {
      if (flag.first == name) return flag.second;
    }
    return std::nullopt;
  }
};

ParsedArgv parse_argv(const Strings& argv) {
  ParsedArgv parsed;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (kValueFlags.count(word) != 0 && i + 1 < argv.size()) {
      parsed.flags.emplace_back(word, argv[i + 1]);
      ++i;
    } else if (word.rfind("--", 0) == 0) {
      parsed.flags.emplace_back(word, std::nullopt);
    } else {
      parsed.positional.push_back(word);
    }
  }
  return parsed;
}

claude::SettingsInputs settings_inputs() {
  claude::SettingsInputs in;
  in.allow_bash = {"npm test", "make check:*"};
  in.dependency_dirs = {"node_modules", ".venv"};
  in.work_tree = "/mullet/work";
  in.home = "/mullet/home";
  return in;
}

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& item : object.items()) keys.insert(item.key());
  return keys;
}

// Every string anywhere in a JSON value.
void collect_strings(const json& value, Strings& out) {
  if (value.is_string()) {
    out.push_back(value.get<std::string>());
  } else if (value.is_structured()) {
    for (const auto& item : value) collect_strings(item, out);
  }
}

std::vector<json> events_of(std::string_view jsonl) {
  claude::EventSplitter splitter;
  auto events = splitter.feed(jsonl);
  for (auto& event : splitter.finish()) events.push_back(std::move(event));
  CHECK(splitter.bad_lines() == 0);
  return events;
}

claude::StreamState state_of(std::string_view jsonl) {
  claude::StreamState state;
  for (const auto& event : events_of(jsonl)) state.apply(event);
  return state;
}

claude::RunFacts exited(int code, std::string stderr_text = {}) {
  claude::RunFacts facts;
  facts.ended_by = StopReason::exit;
  facts.exit_code = code;
  facts.stderr_text = std::move(stderr_text);
  return facts;
}

WorkerOutcome judge_run(std::string_view jsonl, const claude::RunFacts& facts) {
  return claude::judge(state_of(jsonl), facts);
}

// The lines of a fixture, without the last one (the result event).
std::string without_result(std::string_view jsonl) {
  std::string text(jsonl);
  const auto at = text.find("{\"type\":\"result\"");
  REQUIRE(at != std::string::npos);
  return text.substr(0, at);
}

}  // namespace

// ===========================================================================
// claude_args: flags_from_help, build_argv

TEST_CASE("flags_from_help finds every long option of a real help text, and nothing else") {
  const std::set<std::string> flags = mullet::executors::flags_from_help(kHelpExcerpt);
  const std::set<std::string> expected = {"--add-dir",
                                          "--allowedTools",
                                          "--allowed-tools",
                                          "--disable-slash-commands",
                                          "--help",
                                          "--include-partial-messages",
                                          "--print",
                                          "--output-format",
                                          "--json-schema",
                                          "--max-budget-usd",
                                          "--no-session-persistence",
                                          "--permission-mode",
                                          "--setting-sources",
                                          "--settings",
                                          "--strict-mcp-config",
                                          "--mcp-config",
                                          "--tmux",
                                          "--worktree",
                                          "--tools",
                                          "--verbose",
                                          "--version"};
  CHECK(flags == expected);
  // Both names of "--allowedTools, --allowed-tools <tools...>".
  CHECK(flags.count("--allowedTools") == 1);
  CHECK(flags.count("--allowed-tools") == 1);
  // "-p, --print": the long name, never the short one.
  CHECK(flags.count("--print") == 1);
  CHECK(flags.count("-p") == 0);
}

TEST_CASE("flags_from_help reads a flag only where an option starts") {
  CHECK(mullet::executors::flags_from_help("").empty());
  CHECK(mullet::executors::flags_from_help("--verbose") == std::set<std::string>{"--verbose"});
  CHECK(mullet::executors::flags_from_help("\t--verbose\n") == std::set<std::string>{"--verbose"});
  CHECK(mullet::executors::flags_from_help("-a,--all") == std::set<std::string>{"--all"});
  CHECK(mullet::executors::flags_from_help("--output-format=json") == std::set<std::string>{"--output-format"});
  CHECK(mullet::executors::flags_from_help("--system-prompt[-file]") == std::set<std::string>{"--system-prompt"});
  // Not options: inside a word, a bare "--", digits, three dashes.
  CHECK(mullet::executors::flags_from_help("foo--bar non--interactive").empty());
  CHECK(mullet::executors::flags_from_help("a -- b").empty());
  CHECK(mullet::executors::flags_from_help("--1 --9lives").empty());
  CHECK(mullet::executors::flags_from_help("--- ----x").empty());
}

TEST_CASE("build_argv passes every flag git-mullet relies on, each with its value, and no prompt") {
  const auto argv = claude::build_argv(required_flags(), argv_options());
  REQUIRE(argv.has_value());
  REQUIRE(argv->size() > 1);
  CHECK(argv->front() == claude::binary_inside);

  const ParsedArgv parsed = parse_argv(*argv);
  // The prompt goes on stdin: nothing on argv is anything but a flag or a flag's value.
  CHECK(parsed.positional.empty());
  const std::vector<std::pair<std::string, std::optional<std::string>>> expected = {
      {"--print", std::nullopt},
      {"--strict-mcp-config", std::nullopt},
      {"--disable-slash-commands", std::nullopt},
      {"--tools", "Read,Edit,Write,Glob,Grep,Bash"},
      {"--permission-mode", "dontAsk"},
      {"--output-format", "stream-json"},
      {"--verbose", std::nullopt},
      {"--json-schema", claude::result_schema().dump()},
      {"--settings", kSettingsPath},
      {"--setting-sources", ""},
      {"--no-session-persistence", std::nullopt},
  };
  for (const auto& [name, value] : expected) {
    INFO("flag: " << name);
    CHECK(parsed.count(name) == 1);
    const auto seen = parsed.value(name);
    CHECK(seen.has_value() == value.has_value());
    if (seen && value) CHECK(*seen == *value);
  }
  CHECK(parsed.flags.size() == expected.size());
  // No optional flag when the binary has none of them.
  CHECK(parsed.count("--restricted") == 0);
  CHECK(parsed.count("--max-budget-usd") == 0);
}

TEST_CASE("worker_tools gives Bash only to a worker that may run something") {
  CHECK(claude::worker_tools({"npm test"}) == Strings{"Read", "Edit", "Write", "Glob", "Grep", "Bash"});
  CHECK(claude::worker_tools({}) == Strings{"Read", "Edit", "Write", "Glob", "Grep"});
  auto options = argv_options();
  options.tools = claude::worker_tools({});
  const auto argv = claude::build_argv(required_flags(), options);
  REQUIRE(argv.has_value());
  CHECK(parse_argv(*argv).value("--tools") == std::optional<std::string>("Read,Edit,Write,Glob,Grep"));
}

TEST_CASE("build_argv follows --setting-sources with an empty string, so no settings file of the user's loads") {
  const auto argv = claude::build_argv(required_flags(), argv_options());
  REQUIRE(argv.has_value());
  const auto at = std::find(argv->begin(), argv->end(), "--setting-sources");
  REQUIRE(at != argv->end());
  REQUIRE(std::next(at) != argv->end());
  CHECK(*std::next(at) == "");
}

TEST_CASE("build_argv refuses a binary that lacks any flag it relies on, naming that flag") {
  for (const auto& missing : kRequiredFlags) {
    INFO("missing: " << missing);
    std::set<std::string> available = required_flags();
    available.insert({"--restricted", "--max-budget-usd", "--model", "--add-dir"});
    available.erase(missing);
    const auto argv = claude::build_argv(available, argv_options(1.5));
    REQUIRE_FALSE(argv.has_value());
    const mullet::Error& error = argv.error();
    CHECK(error.code() == ExitCode::refused);
    CHECK(contains(error.what(), "no " + missing + " option"));
    CHECK_FALSE(error.hint().empty());
  }
  // No flags at all (help could not be read): refused as well.
  CHECK_FALSE(claude::build_argv({}, argv_options()).has_value());
}

TEST_CASE("build_argv passes --restricted and --max-budget-usd only when the binary has them") {
  std::set<std::string> available = required_flags();
  SUBCASE("neither available: neither passed, even with a budget") {
    const auto argv = claude::build_argv(available, argv_options(2.5));
    REQUIRE(argv.has_value());
    const ParsedArgv parsed = parse_argv(*argv);
    CHECK(parsed.count("--restricted") == 0);
    CHECK(parsed.count("--max-budget-usd") == 0);
    CHECK(parsed.positional.empty());
  }
  SUBCASE("--restricted available: passed, with no value") {
    available.insert("--restricted");
    const auto argv = claude::build_argv(available, argv_options());
    REQUIRE(argv.has_value());
    const ParsedArgv parsed = parse_argv(*argv);
    CHECK(parsed.count("--restricted") == 1);
    CHECK_FALSE(parsed.value("--restricted").has_value());
    CHECK(parsed.positional.empty());
  }
  SUBCASE("--max-budget-usd available and a budget set: passed with the amount") {
    available.insert("--max-budget-usd");
    const auto argv = claude::build_argv(available, argv_options(2.5));
    REQUIRE(argv.has_value());
    const ParsedArgv parsed = parse_argv(*argv);
    CHECK(parsed.count("--max-budget-usd") == 1);
    CHECK(parsed.value("--max-budget-usd") == std::optional<std::string>("2.5"));
    CHECK(parsed.positional.empty());

    const auto small = claude::build_argv(available, argv_options(0.25));
    REQUIRE(small.has_value());
    CHECK(parse_argv(*small).value("--max-budget-usd") == std::optional<std::string>("0.25"));
  }
  SUBCASE("--max-budget-usd available but no budget: not passed") {
    available.insert("--max-budget-usd");
    const auto argv = claude::build_argv(available, argv_options(0));
    REQUIRE(argv.has_value());
    CHECK(parse_argv(*argv).count("--max-budget-usd") == 0);
  }
  SUBCASE("flags the binary has but we do not use are never passed") {
    available.insert({"--dangerously-skip-permissions", "--allow-dangerously-skip-permissions", "--add-dir",
                      "--mcp-config", "--allowedTools", "--model"});
    const auto argv = claude::build_argv(available, argv_options());
    REQUIRE(argv.has_value());
    const ParsedArgv parsed = parse_argv(*argv);
    CHECK(parsed.flags.size() == kRequiredFlags.size());
    for (const auto& [name, value] : parsed.flags) {
      INFO("flag: " << name);
      CHECK(required_flags().count(name) == 1);
    }
  }
}

TEST_CASE("the real help of 2.1.197 satisfies build_argv; it has --max-budget-usd but no --restricted") {
  const auto available = mullet::executors::flags_from_help(kHelpExcerpt);
  const auto argv = claude::build_argv(available, argv_options(1));
  REQUIRE(argv.has_value());
  const ParsedArgv parsed = parse_argv(*argv);
  CHECK(parsed.count("--restricted") == 0);
  CHECK(parsed.value("--max-budget-usd") == std::optional<std::string>("1"));
  CHECK(parsed.positional.empty());
}

// ===========================================================================
// claude_args: build_settings, result_schema, build_prompt

TEST_CASE("build_settings makes Claude Code's sandbox mandatory and its permissions fail closed") {
  const json settings = claude::build_settings(settings_inputs());
  CHECK(keys_of(settings) == std::set<std::string>{"autoMemoryEnabled", "disableAllHooks", "enableAllProjectMcpServers",
                                                   "permissions", "sandbox"});

  const json& sandbox = settings.at("sandbox");
  CHECK(keys_of(sandbox) == std::set<std::string>{"allowUnsandboxedCommands", "autoAllowBashIfSandboxed", "enabled",
                                                  "excludedCommands", "failIfUnavailable", "filesystem", "network"});
  CHECK(sandbox.at("enabled") == json(true));
  CHECK(sandbox.at("failIfUnavailable") == json(true));
  CHECK(sandbox.at("allowUnsandboxedCommands") == json(false));
  CHECK(sandbox.at("autoAllowBashIfSandboxed") == json(false));
  CHECK(sandbox.at("excludedCommands") == json::array());
  // No network domains: the worker reaches only its API endpoint, through git-mullet's proxy.
  CHECK(sandbox.at("network") ==
        json{{"allowedDomains", json::array()}, {"allowLocalBinding", false}, {"allowAllUnixSockets", false}});
  CHECK(keys_of(sandbox.at("filesystem")) == std::set<std::string>{"denyRead", "denyWrite"});
  CHECK(sandbox.at("filesystem").at("denyRead") == json::array({"/mullet/home"}));

  const json& permissions = settings.at("permissions");
  CHECK(keys_of(permissions) == std::set<std::string>{"additionalDirectories", "allow", "ask", "defaultMode", "deny",
                                                      "disableBypassPermissionsMode"});
  CHECK(permissions.at("defaultMode") == "dontAsk");
  CHECK(permissions.at("disableBypassPermissionsMode") == "disable");
  CHECK(permissions.at("ask") == json::array());
  CHECK(permissions.at("additionalDirectories") == json::array());
  CHECK(permissions.at("allow") ==
        json::array({"Read", "Edit", "Write", "Glob", "Grep", "Bash(npm test)", "Bash(make check:*)"}));
  // Permission rules take "//" for an absolute path.
  CHECK(without_bash_rules(permissions.at("deny")) ==
        json::array({"Read(//mullet/home/**)", "Edit(//mullet/home/**)", "Edit(//mullet/work/node_modules/**)",
                     "Write(//mullet/work/node_modules/**)", "Edit(//mullet/work/.venv/**)",
                     "Write(//mullet/work/.venv/**)"}));

  CHECK(settings.at("disableAllHooks") == json(true));
  CHECK(settings.at("enableAllProjectMcpServers") == json(false));
  // The canary: with it in effect, the init event lists no memory paths.
  CHECK(settings.at("autoMemoryEnabled") == json(false));
}

TEST_CASE(
    "build_settings allows Bash only for the listed patterns, and denies every command Claude Code runs unasked") {
  claude::SettingsInputs in = settings_inputs();
  Strings expected_denied;
  SUBCASE("patterns") {
    in.allow_bash = {"npm test", "make check:*", "cargo test --workspace"};
    for (const auto& command : claude::auto_allowed_commands()) expected_denied.push_back("Bash(" + command + ":*)");
  }
  SUBCASE("a pattern naming a read-only command keeps that command") {
    in.allow_bash = {"git diff:*", " cat"};
    for (const auto& command : claude::auto_allowed_commands()) {
      if (command != "git" && command != "cat") expected_denied.push_back("Bash(" + command + ":*)");
    }
  }
  SUBCASE("no patterns: there is no Bash tool, so no rule either") {
    in.allow_bash.clear();
  }
  const json settings = claude::build_settings(in);
  Strings bash;
  Strings all;
  collect_strings(settings, all);
  for (const auto& text : all) {
    if (contains(text, "Bash")) bash.push_back(text);
  }
  Strings expected;
  for (const auto& pattern : in.allow_bash) expected.push_back("Bash(" + pattern + ")");
  Strings allowed_bash;
  for (const auto& rule : settings.at("permissions").at("allow")) {
    if (contains(rule.get<std::string>(), "Bash")) allowed_bash.push_back(rule.get<std::string>());
  }
  CHECK(allowed_bash == expected);
  Strings denied_bash;
  for (const auto& rule : settings.at("permissions").at("deny")) {
    if (contains(rule.get<std::string>(), "Bash")) denied_bash.push_back(rule.get<std::string>());
  }
  CHECK(denied_bash == expected_denied);
  // Every string that mentions Bash is one of those rules.
  for (const auto& rule : denied_bash) expected.push_back(rule);
  CHECK(bash == expected);
  // No bare "Bash" rule anywhere, no command excluded from the sandbox, no
  // automatic allowance of sandboxed commands.
  CHECK(std::find(all.begin(), all.end(), "Bash") == all.end());
  CHECK(settings.at("sandbox").at("excludedCommands").empty());
  CHECK(settings.at("sandbox").at("autoAllowBashIfSandboxed") == json(false));
  CHECK(settings.at("permissions").at("ask").empty());
}

TEST_CASE("commands_to_deny leaves out the commands a pattern names by its first word, globs included") {
  const auto& all = claude::auto_allowed_commands();
  CHECK(all.size() == std::set<std::string>(all.begin(), all.end()).size());
  for (const char* command : {"cat", "ps", "ss", "id", "find", "grep", "git", "echo", "sort", "jq", "xargs"}) {
    INFO(command);
    CHECK(std::find(all.begin(), all.end(), command) != all.end());
  }
  CHECK(claude::commands_to_deny({"npm test:*"}) == all);
  CHECK(claude::commands_kept({"npm test:*"}).empty());
  CHECK(claude::commands_kept({"cat:*", "git status", "ls", "sortx"}) == Strings{"cat", "git", "ls"});
  CHECK(claude::commands_kept({"s*:*"}) ==
        Strings{"sed", "seq", "sha1sum", "sha256sum", "sleep", "sort", "ss", "stat", "strings"});
  CHECK(claude::commands_to_deny({"*"}).empty());
  CHECK(claude::commands_kept({"*"}) == all);
  const auto denied = claude::commands_to_deny({"git diff:*"});
  CHECK(denied.size() == all.size() - 1);
  CHECK(std::find(denied.begin(), denied.end(), "git") == denied.end());
}

TEST_CASE("build_settings denies writes to every dependency directory") {
  claude::SettingsInputs in = settings_inputs();
  in.dependency_dirs = {"node_modules", "vendor", ".venv", "target", "build"};
  const json settings = claude::build_settings(in);
  const json& deny_write = settings.at("sandbox").at("filesystem").at("denyWrite");
  CHECK(deny_write == json::array({"/mullet/work/node_modules", "/mullet/work/vendor", "/mullet/work/.venv",
                                   "/mullet/work/target", "/mullet/work/build"}));
  const json& deny = settings.at("permissions").at("deny");
  for (const auto& dir : in.dependency_dirs) {
    INFO("dir: " << dir);
    CHECK(std::count(deny.begin(), deny.end(), json("Edit(//mullet/work/" + dir + "/**)")) == 1);
    CHECK(std::count(deny.begin(), deny.end(), json("Write(//mullet/work/" + dir + "/**)")) == 1);
  }
  CHECK(deny.size() == 2 + 2 * in.dependency_dirs.size() + claude::commands_to_deny(in.allow_bash).size());

  in.dependency_dirs.clear();
  const json none = claude::build_settings(in);
  CHECK(none.at("sandbox").at("filesystem").at("denyWrite") == json::array());
  CHECK(without_bash_rules(none.at("permissions").at("deny")) ==
        json::array({"Read(//mullet/home/**)", "Edit(//mullet/home/**)"}));
}

TEST_CASE("result_schema asks for a status of done or blocked and a summary, nothing more") {
  const json schema = claude::result_schema();
  CHECK(schema.at("type") == "object");
  CHECK(schema.at("required") == json::array({"status", "summary"}));
  CHECK(schema.at("additionalProperties") == json(false));
  CHECK(keys_of(schema.at("properties")) == std::set<std::string>{"status", "summary"});
  CHECK(schema.at("properties").at("status").at("enum") == json::array({"done", "blocked"}));
  CHECK(schema.at("properties").at("summary").at("type") == "string");
  // What a real run returned fits it.
  const auto state = state_of(kSuccessRun);
  REQUIRE(state.result.has_value());
  REQUIRE(state.result->structured_output.has_value());
  CHECK(keys_of(*state.result->structured_output) == std::set<std::string>{"status", "summary"});
}

TEST_CASE("build_prompt states the sandbox's rules, then the task") {
  claude::PromptInputs in;
  in.task = "Fix the parser.\nIt drops the last line.";
  in.work_tree = "/mullet/work";
  SUBCASE("no Bash") {
    const std::string prompt = claude::build_prompt(in);
    CHECK(contains(prompt, "/mullet/work"));
    CHECK(contains(prompt, "there is no Bash tool"));
    CHECK(contains(prompt, "no network access"));
    CHECK(contains(prompt, "\"done\""));
    CHECK(contains(prompt, "\"blocked\""));
    CHECK(prompt.size() > in.task.size());
    CHECK(prompt.substr(prompt.size() - in.task.size() - 1) == in.task + "\n");
  }
  SUBCASE("Bash patterns, quoted one by one") {
    in.allow_bash = {"npm test", "make check:*"};
    const std::string prompt = claude::build_prompt(in);
    CHECK(contains(prompt, "`npm test` `make check:*`"));
    CHECK_FALSE(contains(prompt, "no Bash tool"));
    CHECK(contains(prompt, "one command per Bash call"));
    CHECK_FALSE(contains(prompt, "read-only forms"));
  }
  SUBCASE("Bash patterns naming read-only commands: their read-only forms are named too") {
    in.allow_bash = {"git diff:*", "cat"};
    const std::string prompt = claude::build_prompt(in);
    CHECK(contains(prompt, "Claude Code's own read-only forms of these commands also run: cat, git."));
  }
  SUBCASE("a task that ends in a newline gets no second one") {
    in.task += "\n";
    const std::string prompt = claude::build_prompt(in);
    CHECK(prompt.substr(prompt.size() - in.task.size()) == in.task);
    CHECK(prompt.substr(prompt.size() - 2) != "\n\n");
  }
}

// ===========================================================================
// claude_stream: EventSplitter

TEST_CASE("EventSplitter parses a real stream, whole or split at any byte") {
  const std::string stream = kSuccessRun;
  claude::EventSplitter whole;
  const std::vector<json> expected = whole.feed(stream);
  CHECK(whole.finish().empty());
  CHECK(whole.bad_lines() == 0);
  REQUIRE(expected.size() == 11);
  CHECK(expected.front().at("subtype") == "init");
  CHECK(expected.back().at("type") == "result");

  SUBCASE("one byte at a time") {
    claude::EventSplitter splitter;
    std::vector<json> events;
    const std::size_t first_newline = stream.find('\n');
    for (std::size_t i = 0; i < stream.size(); ++i) {
      auto got = splitter.feed(std::string_view(stream).substr(i, 1));
      // An event comes out exactly when its newline arrives.
      if (i < first_newline) CHECK(got.empty());
      if (i == first_newline) CHECK(got.size() == 1);
      for (auto& event : got) events.push_back(std::move(event));
    }
    CHECK(splitter.finish().empty());
    CHECK(splitter.bad_lines() == 0);
    CHECK(events == expected);
  }
  SUBCASE("chunks of every size from 2 to 97 bytes") {
    for (std::size_t size = 2; size <= 97; ++size) {
      INFO("chunk size: " << size);
      claude::EventSplitter splitter;
      std::vector<json> events;
      for (std::size_t at = 0; at < stream.size(); at += size) {
        for (auto& event : splitter.feed(std::string_view(stream).substr(at, size))) events.push_back(event);
      }
      CHECK(splitter.finish().empty());
      CHECK(splitter.bad_lines() == 0);
      CHECK(events == expected);
    }
  }
  SUBCASE("chunk boundaries from a fixed pseudo-random sequence") {
    std::uint32_t seed = 12345;
    for (int round = 0; round < 20; ++round) {
      claude::EventSplitter splitter;
      std::vector<json> events;
      std::size_t at = 0;
      while (at < stream.size()) {
        seed = seed * 1664525U + 1013904223U;
        const std::size_t size = 1 + (seed >> 16U) % 700;
        for (auto& event : splitter.feed(std::string_view(stream).substr(at, size))) events.push_back(event);
        at += size;
      }
      for (auto& event : splitter.finish()) events.push_back(event);
      CHECK(splitter.bad_lines() == 0);
      CHECK(events == expected);
    }
  }
  SUBCASE("CRLF line ends") {
    std::string crlf;
    for (const char c : stream) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
    claude::EventSplitter splitter;
    std::vector<json> events;
    for (std::size_t at = 0; at < crlf.size(); at += 3) {
      for (auto& event : splitter.feed(std::string_view(crlf).substr(at, 3))) events.push_back(event);
    }
    CHECK(splitter.finish().empty());
    CHECK(splitter.bad_lines() == 0);
    CHECK(events == expected);
  }
}

TEST_CASE("EventSplitter counts lines that are not events and keeps going") {
  const auto lines = events_of(kConnectionRefused);
  REQUIRE(lines.size() == 4);
  std::string stream;
  stream += "Warning: something Claude Code printed on stdout\n";
  stream += lines[0].dump() + "\n";
  stream += "\n";     // blank: not counted
  stream += "   \n";  // blank: not counted
  stream += "\r\n";   // blank: not counted
  stream += "[1,2,3]\n";
  stream += "42\n";
  stream += "\"a string\"\n";
  stream += "{}\n";                                // an object without a type
  stream += "{\"subtype\":\"init\"}\n";            // likewise
  stream += lines[1].dump().substr(0, 40) + "\n";  // cut short mid-line
  stream += lines[1].dump() + "\n";
  stream += "{\"type\":\"assistant\"} trailing\n";
  stream += std::string("\xff\xfe{\"type\":\"x\"}\n");
  stream += lines[2].dump() + "\n" + lines[3].dump() + "\n";

  claude::EventSplitter splitter;
  std::vector<json> events;
  for (std::size_t at = 0; at < stream.size(); at += 7) {
    for (auto& event : splitter.feed(std::string_view(stream).substr(at, 7))) events.push_back(event);
  }
  CHECK(splitter.finish().empty());
  CHECK(events == lines);
  CHECK(splitter.bad_lines() == 9);
}

TEST_CASE("EventSplitter::finish takes a last line without a newline, and counts one cut short") {
  const auto lines = events_of(kMaxTurns);
  const std::string result_line = lines.back().dump();
  SUBCASE("complete but unterminated") {
    claude::EventSplitter splitter;
    CHECK(splitter.feed(lines.front().dump() + "\n").size() == 1);
    CHECK(splitter.feed(result_line).empty());
    const auto last = splitter.finish();
    REQUIRE(last.size() == 1);
    CHECK(last.front() == lines.back());
    CHECK(splitter.bad_lines() == 0);
  }
  SUBCASE("truncated: the worker died mid-line") {
    claude::EventSplitter splitter;
    CHECK(splitter.feed(lines.front().dump() + "\n").size() == 1);
    CHECK(splitter.feed(result_line.substr(0, result_line.size() / 2)).empty());
    CHECK(splitter.finish().empty());
    CHECK(splitter.bad_lines() == 1);
    // Finished means finished: nothing is left over.
    CHECK(splitter.finish().empty());
    CHECK(splitter.bad_lines() == 1);
  }
  SUBCASE("nothing left") {
    claude::EventSplitter splitter;
    CHECK(splitter.feed(result_line + "\n").size() == 1);
    CHECK(splitter.finish().empty());
    CHECK(splitter.bad_lines() == 0);
  }
}

// ===========================================================================
// claude_stream: StreamState::apply

TEST_CASE("StreamState follows a real run event by event") {
  const auto events = events_of(kSuccessRun);
  REQUIRE(events.size() == 11);
  claude::StreamState state;

  state.apply(events[0]);  // init
  REQUIRE(state.init.has_value());
  CHECK(state.init->permission_mode == "dontAsk");
  CHECK(state.init->model == "claude-opus-4-8[1m]");
  CHECK(state.init->version == "2.1.197");
  CHECK(state.init->api_key_source == "ANTHROPIC_API_KEY");
  CHECK(state.init->tools == Strings{"Bash", "Edit", "Glob", "Grep", "Read", "StructuredOutput", "Write"});
  CHECK(state.init->mcp_servers.empty());
  CHECK(state.init->slash_commands.empty());
  CHECK(state.init->plugins.empty());
  CHECK_FALSE(state.init->has_memory_paths);
  CHECK(state.model == "claude-opus-4-8[1m]");
  CHECK(state.session_id == "f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc");
  CHECK(state.turns == 0);
  CHECK(state.tool.empty());

  state.apply(events[1]);  // msg_1: text
  CHECK(state.turns == 1);
  CHECK(state.tool.empty());
  state.apply(events[2]);  // msg_1 again: the Write tool use, same message
  CHECK(state.turns == 1);
  CHECK(state.tool == "Write: /mullet/work/hello.txt");
  state.apply(events[3]);  // its tool result
  CHECK(state.tool == "Write: /mullet/work/hello.txt");
  state.apply(events[4]);  // msg_2: Bash
  CHECK(state.turns == 2);
  CHECK(state.tool == "Bash: touch ok");
  state.apply(events[5]);
  state.apply(events[6]);  // msg_3: the refused Bash
  CHECK(state.turns == 3);
  CHECK(state.tool == "Bash: touch ok; touch evil");
  state.apply(events[7]);
  state.apply(events[8]);  // msg_4: StructuredOutput has no main argument
  CHECK(state.turns == 4);
  CHECK(state.tool == "StructuredOutput");
  state.apply(events[9]);
  // Each distinct message costs (100 input * $5 + 1 output * $25) / 1M at opus prices.
  CHECK(state.estimated_cost == doctest::Approx(4 * 525e-6));
  CHECK_FALSE(state.result.has_value());

  state.apply(events[10]);  // result
  REQUIRE(state.result.has_value());
  const claude::ResultEvent& result = *state.result;
  CHECK(result.subtype == "success");
  CHECK_FALSE(result.is_error);
  CHECK(result.turns == 5);
  CHECK(result.cost_usd == doctest::Approx(0.004));
  CHECK(result.duration_ms == 361);
  CHECK(result.text == R"({"status":"done","summary":"wrote hello.txt"})");
  REQUIRE(result.structured_output.has_value());
  CHECK(*result.structured_output == json{{"status", "done"}, {"summary", "wrote hello.txt"}});
  REQUIRE(result.permission_denials.size() == 1);
  CHECK(result.permission_denials[0].at("tool_name") == "Bash");
  CHECK(result.permission_denials[0].at("tool_input").at("command") == "touch ok; touch evil");
  CHECK(result.errors.empty());
  CHECK_FALSE(result.api_error_status.has_value());  // null in the event
  CHECK(state.tool.empty());                         // nothing in use once it has ended
  CHECK(state.turns == 4);
  CHECK(state.api_retries == 0);
  CHECK(state.assistant_error.empty());
}

TEST_CASE("StreamState records API retries, synthetic errors and a result's errors") {
  SUBCASE("connection refused: a retry with no status") {
    const auto state = state_of(kConnectionRefused);
    CHECK(state.api_retries == 1);
    CHECK(state.last_api_error == "unknown");
    CHECK(state.assistant_error == "server_error");
    CHECK(state.turns == 1);
    CHECK(state.estimated_cost == 0);  // the synthetic message used no tokens
    REQUIRE(state.result.has_value());
    CHECK(state.result->is_error);
    CHECK(state.result->text == "API Error: Unable to connect to API (ConnectionRefused)");
    CHECK_FALSE(state.result->api_error_status.has_value());
  }
  SUBCASE("HTTP 500") {
    const auto state = state_of(kHttp500);
    CHECK(state.api_retries == 1);
    CHECK(state.last_api_error == "server_error (HTTP 500)");
    CHECK(state.assistant_error == "server_error");
    REQUIRE(state.result.has_value());
    CHECK(state.result->api_error_status == std::optional<int>(500));
  }
  SUBCASE("HTTP 401") {
    const auto state = state_of(kHttp401);
    CHECK(state.last_api_error == "authentication_failed (HTTP 401)");
    CHECK(state.assistant_error == "authentication_failed");
    REQUIRE(state.result.has_value());
    CHECK(state.result->api_error_status == std::optional<int>(401));
  }
  SUBCASE("a status and no error word") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"system","subtype":"api_retry","attempt":2,"error_status":529})"));
    CHECK(state.api_retries == 1);
    CHECK(state.last_api_error == "HTTP 529");
  }
  SUBCASE("errors of a result") {
    const auto state = state_of(kMaxTurns);
    REQUIRE(state.result.has_value());
    CHECK(state.result->subtype == "error_max_turns");
    CHECK(state.result->errors == Strings{"Reached maximum number of turns (2)"});
    CHECK(state.result->text.empty());  // no "result" field in this one
    CHECK(state.turns == 2);            // msg_1 (twice) and msg_2
  }
}

TEST_CASE("StreamState reads MCP servers, plugins and memory paths from init") {
  SUBCASE("real init without our settings: memory paths and slash commands") {
    const auto state = state_of(kNotLoggedIn);
    REQUIRE(state.init.has_value());
    CHECK(state.init->has_memory_paths);
    CHECK(state.init->slash_commands.size() == 25);
    CHECK(state.init->api_key_source == "none");
  }
  SUBCASE("MCP servers as {name, status} objects") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"system","subtype":"init","permissionMode":"dontAsk",
      "mcp_servers":[{"name":"github","status":"connected"},{"name":"fs","status":"failed"}],
      "plugins":["superpowers"],"memory_paths":{}})"));
    REQUIRE(state.init.has_value());
    CHECK(state.init->mcp_servers == Strings{"github", "fs"});
    CHECK(state.init->plugins == Strings{"superpowers"});
    CHECK_FALSE(state.init->has_memory_paths);  // present but empty
  }
  SUBCASE("memory_paths null") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"system","subtype":"init","memory_paths":null})"));
    REQUIRE(state.init.has_value());
    CHECK_FALSE(state.init->has_memory_paths);
  }
}

TEST_CASE("StreamState names a tool by its main argument, on one line") {
  claude::StreamState state;
  const auto tool_use = [&](const json& input) {
    state.apply({{"type", "assistant"},
                 {"message",
                  {{"id", "msg_" + std::to_string(state.turns)},
                   {"content", json::array({{{"type", "tool_use"}, {"name", "Bash"}, {"input", input}}})}}}});
    return state.tool;
  };
  CHECK(tool_use({{"command", "npm test\nrm -rf /"}}) == "Bash: npm test");
  CHECK(tool_use({{"command", std::string(100, 'x')}}) == "Bash: " + std::string(57, 'x') + "...");
  CHECK(tool_use({{"file_path", "/mullet/work/a.c"}}) == "Bash: /mullet/work/a.c");
  CHECK(tool_use({{"pattern", "TODO"}, {"path", "src"}}) == "Bash: src");
  CHECK(tool_use({{"pattern", "TODO"}}) == "Bash: TODO");
  CHECK(tool_use(json::object()) == "Bash");
  CHECK(tool_use("not an object") == "Bash");
  CHECK(state.turns == 7);
}

TEST_CASE("estimate_cost prices tokens by model family") {
  const json million_in = {{"input_tokens", 1000000}};
  const json million_out = {{"output_tokens", 1000000}};
  CHECK(claude::estimate_cost("claude-sonnet-4-5", million_in) == doctest::Approx(3));
  CHECK(claude::estimate_cost("claude-sonnet-4-5", million_out) == doctest::Approx(15));
  CHECK(claude::estimate_cost("claude-opus-4-8", million_in) == doctest::Approx(5));
  CHECK(claude::estimate_cost("claude-opus-4-8[1m]", million_out) == doctest::Approx(25));
  CHECK(claude::estimate_cost("claude-haiku-4-5", million_in) == doctest::Approx(1));
  CHECK(claude::estimate_cost("claude-haiku-4-5", million_out) == doctest::Approx(5));
  CHECK(claude::estimate_cost("something-new", million_in) == doctest::Approx(3));
  CHECK(claude::estimate_cost("claude-sonnet-4-5", {{"cache_read_input_tokens", 1000000}}) == doctest::Approx(0.3));
  CHECK(claude::estimate_cost("claude-sonnet-4-5", {{"cache_creation_input_tokens", 1000000}}) ==
        doctest::Approx(3.75));
  CHECK(claude::estimate_cost("<synthetic>", {{"input_tokens", 0}, {"output_tokens", 0}}) == 0);
  CHECK(claude::estimate_cost("claude-opus-4-8", json::array()) == 0);
  CHECK(claude::estimate_cost("claude-opus-4-8", {{"input_tokens", "many"}}) == 0);
}

// ===========================================================================
// claude_stream: check_init

TEST_CASE("check_init accepts the real init of a run under git-mullet") {
  const auto state = state_of(kSuccessRun);
  REQUIRE(state.init.has_value());
  CHECK(claude::check_init(*state.init, tools_with_bash()) == "");
}

TEST_CASE("check_init names every way Claude Code did not start as asked") {
  const auto state = state_of(kSuccessRun);
  REQUIRE(state.init.has_value());
  claude::InitEvent init = *state.init;
  SUBCASE("permission mode") {
    for (const char* mode : {"default", "acceptEdits", "bypassPermissions", "auto", "plan", ""}) {
      INFO("mode: " << mode);
      init.permission_mode = mode;
      CHECK(claude::check_init(init, tools_with_bash()) == std::string("permission mode is '") + mode + "'");
    }
  }
  SUBCASE("a tool we did not pass") {
    init.tools.push_back("WebFetch");
    CHECK(claude::check_init(init, tools_with_bash()) == "tool WebFetch is loaded");
    init.tools.push_back("mcp__github__create_issue");
    CHECK(contains(claude::check_init(init, tools_with_bash()), "tool mcp__github__create_issue is loaded"));
  }
  SUBCASE("Bash loaded when we passed fewer tools") {
    const Strings fewer = {"Read", "Edit", "Write", "Glob", "Grep"};
    CHECK(claude::check_init(init, fewer) == "tool Bash is loaded");
  }
  SUBCASE("MCP servers") {
    init.mcp_servers = {"github", "fs"};
    CHECK(claude::check_init(init, tools_with_bash()) == "MCP servers are loaded: github, fs");
  }
  SUBCASE("plugins") {
    init.plugins = {"superpowers"};
    CHECK(claude::check_init(init, tools_with_bash()) == "plugins are loaded");
  }
  SUBCASE("memory paths: our settings file was ignored") {
    init.has_memory_paths = true;
    CHECK(contains(claude::check_init(init, tools_with_bash()), "settings file was not applied"));
  }
  SUBCASE("a real init from a run without our flags and settings") {
    const auto other = state_of(kNotLoggedIn);
    REQUIRE(other.init.has_value());
    const std::string problems = claude::check_init(*other.init, tools_with_bash());
    CHECK(contains(problems, "slash commands are enabled"));
    CHECK(contains(problems, "settings file was not applied (auto memory is on)"));
    CHECK(contains(problems, "; "));
  }
  SUBCASE("several at once, in one line") {
    init.permission_mode = "default";
    init.mcp_servers = {"github"};
    init.has_memory_paths = true;
    const std::string problems = claude::check_init(init, tools_with_bash());
    CHECK(problems ==
          "permission mode is 'default'; MCP servers are loaded: github; our settings file was not applied (auto "
          "memory is on)");
  }
}

// ===========================================================================
// claude_stream: judge

TEST_CASE("judge: a real successful run, with the tool uses that were refused as a hint") {
  const WorkerOutcome outcome = judge_run(kSuccessRun, exited(0));
  CHECK(outcome.kind == WorkerOutcome::Kind::success);
  CHECK(outcome.error.empty());
  CHECK(outcome.hint ==
        "refused tool uses: Bash: touch ok; touch evil (to let the worker run a command, name it in [claude] "
        "allow_bash)");
  CHECK(outcome.report.status == "done");
  CHECK(outcome.report.summary == "wrote hello.txt");
  CHECK(outcome.report.turns == 5);  // the result's count, not ours
  CHECK(outcome.report.cost_usd == doctest::Approx(0.004));
  CHECK(outcome.report.model == "claude-opus-4-8[1m]");
  CHECK(outcome.report.session_id == "f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc");
  REQUIRE(outcome.report.permission_denials.size() == 1);
  CHECK(outcome.report.permission_denials[0].at("tool_name") == "Bash");

  // Without refusals, no hint.
  auto state = state_of(kSuccessRun);
  state.result->permission_denials = json::array();
  const WorkerOutcome clean = claude::judge(state, exited(0));
  CHECK(clean.kind == WorkerOutcome::Kind::success);
  CHECK(clean.hint.empty());
}

TEST_CASE("judge: the worker says it is blocked") {
  const WorkerOutcome outcome = judge_run(kBlocked, exited(0));
  CHECK(outcome.kind == WorkerOutcome::Kind::failed);
  CHECK(outcome.error == "the worker says it is blocked: the tests need network access");
  CHECK(outcome.report.status == "blocked");
  CHECK(outcome.report.summary == "the tests need network access");
  CHECK(outcome.report.turns == 2);
}

TEST_CASE("judge: success without a structured result is not trusted") {
  const WorkerOutcome outcome = judge_run(kNoStructuredOutput, exited(0));
  CHECK(outcome.kind == WorkerOutcome::Kind::failed);
  CHECK(contains(outcome.error, "no structured result"));
  CHECK(outcome.report.status.empty());
  CHECK(outcome.report.turns == 3);

  SUBCASE("a structured result with another status") {
    auto state = state_of(kSuccessRun);
    state.result->structured_output = json{{"status", "partly"}, {"summary", "x"}};
    CHECK(contains(claude::judge(state, exited(0)).error, "no structured result"));
  }
  SUBCASE("a structured result that is not an object") {
    auto state = state_of(kSuccessRun);
    state.result->structured_output = json("done");
    CHECK(contains(claude::judge(state, exited(0)).error, "no structured result"));
  }
}

TEST_CASE("judge: not logged in") {
  SUBCASE("no credentials at all (real)") {
    const WorkerOutcome outcome = judge_run(kNotLoggedIn, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(contains(outcome.error, "not logged in"));
    CHECK(contains(outcome.error, "Not logged in · Please run /login"));
    CHECK(contains(outcome.hint, "ANTHROPIC_API_KEY"));
  }
  SUBCASE("the endpoint answered 401 (real)") {
    const WorkerOutcome outcome = judge_run(kHttp401, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(contains(outcome.error, "not logged in"));
    CHECK(contains(outcome.hint, "ANTHROPIC_API_KEY"));
  }
  SUBCASE("Invalid API key in the result") {
    claude::StreamState state;
    state.apply(json::parse(
        R"({"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"Invalid API key · Fix external API key"})"));
    CHECK(contains(claude::judge(state, exited(1)).error, "not logged in"));
  }
}

TEST_CASE("judge: the API could not be reached") {
  SUBCASE("connection refused (real)") {
    const WorkerOutcome outcome = judge_run(kConnectionRefused, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error ==
          "the Claude API could not be reached: API Error: Unable to connect to API (ConnectionRefused)");
    CHECK(contains(outcome.hint, "base_url"));
  }
  SUBCASE("HTTP 500 (real)") {
    const WorkerOutcome outcome = judge_run(kHttp500, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(contains(outcome.error, "the Claude API could not be reached: API Error: 500 boom."));
    CHECK(contains(outcome.hint, "base_url"));
  }
  SUBCASE("an API status and no text: the last retry's error is named") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"system","subtype":"api_retry","error":"server_error","error_status":503})"));
    state.apply(json::parse(R"({"type":"result","subtype":"success","is_error":true,"api_error_status":503})"));
    CHECK(claude::judge(state, exited(1)).error == "the Claude API could not be reached: server_error (HTTP 503)");
  }
}

TEST_CASE("judge: limits Claude Code enforces itself") {
  SUBCASE("max turns (real)") {
    const WorkerOutcome outcome = judge_run(kMaxTurns, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error == "the worker reached its turn limit after 3 turns");
    CHECK(outcome.report.turns == 3);
  }
  SUBCASE("max budget (real)") {
    const WorkerOutcome outcome = judge_run(kMaxBudget, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error == "the worker reached its cost limit ($0.002 spent)");
    CHECK(outcome.report.cost_usd == doctest::Approx(0.002));
  }
  SUBCASE("no valid structured output after retries (real)") {
    const WorkerOutcome outcome = judge_run(kStructuredOutputRetries, exited(1));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(contains(outcome.error, "never returned a valid structured result"));
  }
  SUBCASE("another error subtype: its errors are named") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":2,
      "errors":["tool crashed","then another"]})"));
    CHECK(claude::judge(state, exited(1)).error ==
          "Claude Code failed (error_during_execution): tool crashed; then another");
  }
  SUBCASE("an error that says success") {
    claude::StreamState state;
    state.apply(json::parse(R"({"type":"result","subtype":"success","is_error":true,"result":"Something broke"})"));
    CHECK(claude::judge(state, exited(1)).error == "Claude Code failed (success): Something broke");
  }
}

TEST_CASE("judge: Claude Code's own sandbox is unavailable (stderr, no result)") {
  // As worker-clis.md describes it: exit 1, a message on stderr, no events.
  claude::StreamState state;
  const WorkerOutcome outcome = claude::judge(
      state, exited(1,
                    "Sandbox required but unavailable: sandbox is enabled but dependencies are missing: socat "
                    "not installed\n"));
  CHECK(outcome.kind == WorkerOutcome::Kind::failed);
  CHECK(contains(outcome.error, "sandbox is unavailable"));
  CHECK(contains(outcome.error, "socat not installed"));
  CHECK(contains(outcome.hint, "bubblewrap"));
  CHECK(contains(outcome.hint, "socat"));
}

TEST_CASE("judge: ended with no result") {
  SUBCASE("before a session started") {
    const WorkerOutcome outcome = claude::judge({}, exited(1, "\n  Error: something went wrong\nat line 2\n"));
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error == "Claude Code ended before it started a session (exit code 1): Error: something went wrong");
  }
  SUBCASE("before a session started, nothing on stderr") {
    CHECK(claude::judge({}, exited(127)).error == "Claude Code ended before it started a session (exit code 127)");
  }
  SUBCASE("after init, killed by a signal") {
    claude::RunFacts facts;
    facts.ended_by = StopReason::signal;
    facts.exit_code = -1;
    const WorkerOutcome outcome = claude::judge(state_of(without_result(kSuccessRun)), facts);
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error == "Claude Code ended without a result (exit code -1)");
    // What was learned so far is still reported.
    CHECK(outcome.report.turns == 4);
    CHECK(outcome.report.model == "claude-opus-4-8[1m]");
    CHECK(outcome.report.cost_usd == doctest::Approx(4 * 525e-6));
  }
}

TEST_CASE("judge: stopped by one of git-mullet's limits") {
  const std::vector<StopReason> limits = {StopReason::timeout,       StopReason::job_timeout, StopReason::inactivity,
                                          StopReason::memory,        StopReason::disk,        StopReason::stalled,
                                          StopReason::turns,         StopReason::cost,        StopReason::budget,
                                          StopReason::api_down,      StopReason::cancelled,   StopReason::refused,
                                          StopReason::worker_refused};
  const auto stopped = [](StopReason ended_by) {
    claude::RunFacts facts;
    facts.ended_by = ended_by;
    facts.exit_code = -1;
    return facts;
  };
  SUBCASE("mid-run") {
    for (const auto& ended_by : limits) {
      INFO("ended_by: " << mullet::sandbox::stop_name(ended_by));
      const WorkerOutcome outcome = claude::judge(state_of(without_result(kSuccessRun)), stopped(ended_by));
      CHECK(outcome.kind == WorkerOutcome::Kind::failed);
      // The runner's word first, then what it means (describe_stop).
      CHECK(outcome.error.rfind("the worker was stopped: " + mullet::sandbox::stop_name(ended_by) + ": ", 0) == 0);
      CHECK(outcome.error == "the worker was stopped: " + mullet::sandbox::describe_stop(ended_by));
      CHECK(outcome.report.turns == 4);
    }
  }
  SUBCASE("even after a successful result") {
    for (const auto& ended_by : limits) {
      INFO("ended_by: " << mullet::sandbox::stop_name(ended_by));
      const WorkerOutcome outcome = claude::judge(state_of(kSuccessRun), stopped(ended_by));
      CHECK(outcome.kind == WorkerOutcome::Kind::failed);
      CHECK(outcome.error.rfind("the worker was stopped: " + mullet::sandbox::stop_name(ended_by), 0) == 0);
      CHECK(outcome.report.status == "done");  // the record still says what it claimed
    }
  }
}

TEST_CASE("judge: refused when init showed Claude Code not running as asked") {
  claude::RunFacts facts;
  facts.ended_by = StopReason::worker_refused;
  facts.exit_code = -1;
  facts.refusal = "permission mode is 'default'";
  SUBCASE("stopped right after init") {
    const auto events = events_of(kSuccessRun);
    claude::StreamState state;
    state.apply(events.front());
    const WorkerOutcome outcome = claude::judge(state, facts);
    CHECK(outcome.kind == WorkerOutcome::Kind::refused);
    CHECK(contains(outcome.error, "permission mode is 'default'"));
    CHECK(contains(outcome.error, "did not start as git-mullet asked"));
    CHECK(contains(outcome.hint, "doctor"));
  }
  SUBCASE("a refusal wins over a result that claims success") {
    facts.ended_by = StopReason::exit;
    facts.exit_code = 0;
    CHECK(claude::judge(state_of(kSuccessRun), facts).kind == WorkerOutcome::Kind::refused);
  }
}

// ---------------------------------------------------------------------------
// Real Claude Code 2.1.197 output that an earlier judge() misread.

TEST_CASE("judge names a real 'sandbox unavailable' run (result event present, stderr in lower case)") {
  // Real: PATH without socat, our settings (failIfUnavailable: true). Claude
  // Code 2.1.197 exits 1 and, in stream-json mode, still emits a result event
  // (error_during_execution, errors: ["Sandbox required but unavailable: ..."])
  // while stderr says "Error: sandbox required but unavailable" (lower case s).
  // judge() looks for "Sandbox required but unavailable" in stderr only when
  // there is no result, so it falls through to the generic "Claude Code failed
  // (error_during_execution): ..." without the bubblewrap/socat hint.
  const WorkerOutcome outcome = judge_run(kSandboxUnavailable, exited(1, kSandboxUnavailableStderr));
  CHECK(outcome.kind == WorkerOutcome::Kind::failed);
  CHECK(contains(outcome.error, "sandbox is unavailable"));
  CHECK(contains(outcome.hint, "socat"));
  // Same stderr alone (the event lost, e.g. stdout closed early).
  const WorkerOutcome stderr_only = claude::judge({}, exited(1, kSandboxUnavailableStderr));
  CHECK(contains(stderr_only.error, "sandbox is unavailable"));
  CHECK(contains(stderr_only.hint, "socat"));
}

TEST_CASE("judge does not fail a real successful run whose summary mentions an API error or Not logged in") {
  // Real: the worker returned status "done"; the result event's "result" is
  // the structured output as JSON text, so the summary's words are in it.
  // judge() searches that text for "API Error" / "Connection error" /
  // "Unable to connect" / "Not logged in" / "Invalid API key" before looking
  // at is_error or the structured result, and fails the job.
  SUBCASE("API Error / Connection error") {
    const WorkerOutcome outcome = judge_run(kDoneSummaryMentionsApiError, exited(0));
    CHECK(outcome.kind == WorkerOutcome::Kind::success);
    CHECK(outcome.error == "");
    CHECK(outcome.report.status == "done");
  }
  SUBCASE("Not logged in") {
    const WorkerOutcome outcome = judge_run(kDoneSummaryMentionsNotLoggedIn, exited(0));
    CHECK(outcome.kind == WorkerOutcome::Kind::success);
    CHECK(outcome.error == "");
  }
}

TEST_CASE("StreamState::apply and render_event take fields of the wrong type without throwing") {
  // Regression: apply() used event.value("is_error", false) and render_event()
  // value("num_turns", 0), value("total_cost_usd", 0.0), value("attempt", 0)
  // and block.value("is_error", false), which throw nlohmann::json::type_error
  // when the key holds another type: in a job that escaped
  // ClaudeSession::on_stdout, in `git mullet log` it aborted the listing.
  const Strings odd = {
      R"({"type":"result","subtype":"success","is_error":null,"num_turns":1})",
      R"({"type":"result","subtype":"success","is_error":false,"num_turns":"3","total_cost_usd":null,"duration_ms":"x"})",
      R"({"type":"result","subtype":7,"is_error":"yes","permission_denials":[5,"x",{"tool_name":3,"tool_input":"y"}]})",
      R"({"type":"system","subtype":"api_retry","attempt":"1","error":"unknown","error_status":"500"})",
      R"({"type":"system","subtype":"init","tools":"Bash","mcp_servers":[1,{"name":2}],"memory_paths":7})",
      R"({"type":"assistant","message":{"id":5,"usage":"lots","content":[{"type":"tool_use","name":1,"input":3}]}})",
      R"({"type":"user","message":{"content":[{"type":"tool_result","content":"x","is_error":"no"}]}})",
      R"({"type":"user","message":{"content":[{"type":"tool_result","content":[1,{"text":2}]}]}})",
  };
  for (const auto& line : odd) {
    INFO("event: " << line);
    const json event = json::parse(line);
    claude::StreamState state;
    CHECK_NOTHROW(state.apply(event));
    CHECK_NOTHROW(claude::render_event(event));
    CHECK_NOTHROW(claude::judge(state, exited(1)));
  }
  claude::StreamState state;
  state.apply(json::parse(odd[0]));
  REQUIRE(state.result.has_value());
  CHECK_FALSE(state.result->is_error);
  CHECK(claude::render_event(json::parse(odd[1])) == "== result: success, 0 turns, $0, 0s\n");
}

TEST_CASE("an api_retry error word of any length gets its HTTP status in parentheses") {
  // Regression: the closing parenthesis depended on the error word being
  // longer than five characters.
  claude::StreamState state;
  state.apply(json::parse(R"({"type":"system","subtype":"api_retry","error":"other","error_status":503})"));
  CHECK(state.last_api_error == "other (HTTP 503)");
  state.apply(json::parse(R"({"type":"system","subtype":"api_retry","error":"x","error_status":429})"));
  CHECK(state.last_api_error == "x (HTTP 429)");
  CHECK(state.api_retries == 2);
}

TEST_CASE("describe_denial names a refused tool use by its main argument") {
  const auto state = state_of(kSuccessRun);
  REQUIRE(state.result.has_value());
  REQUIRE(state.result->permission_denials.size() == 1);
  CHECK(claude::describe_denial(state.result->permission_denials[0]) == "Bash: touch ok; touch evil");
  CHECK(claude::describe_denial(json::parse(R"({"tool_name":"Write","tool_input":{"file_path":"/etc/x"}})")) ==
        "Write: /etc/x");
  CHECK(claude::describe_denial(json::parse(R"({"tool_name":"WebFetch"})")) == "WebFetch");
  CHECK(claude::describe_denial(json("Bash")) == "?");
}

// ===========================================================================
// claude_stream: render_event

TEST_CASE("render_event turns a real run into lines a person reads") {
  const auto events = events_of(kSuccessRun);
  std::string text;
  for (const auto& event : events) text += claude::render_event(event);
  const std::string refused =
      "Permission to use Bash has been denied because Claude Code is running in don't ask mode. IMPORTANT: You "
      "*may* attempt to accomplish this action using other tools that might naturally be used to acc";
  REQUIRE(refused.size() == 197);
  CHECK(text ==
        "== session f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc: Claude Code 2.1.197, model claude-opus-4-8[1m], "
        "permission mode dontAsk, tools Bash,Edit,Glob,Grep,Read,StructuredOutput,Write\n"
        "   I will write the file.\n"
        "-> Write: /mullet/work/hello.txt\n"
        "<- File created successfully at: /mullet/work/hello.txt (file state is current in your context — no need "
        "to Read it back)\n"
        "-> Bash: touch ok\n"
        "<- (Bash completed with no output)\n"
        "-> Bash: touch ok; touch evil\n"
        "<- error: " +
            refused +
            "...\n"
            "-> StructuredOutput\n"
            "<- Structured output provided successfully\n"
            "== result: success, 5 turns, $0.004, 0.4s\n"
            "   status: done\n"
            "   summary: wrote hello.txt\n"
            "   refused: Bash: touch ok; touch evil\n");
}

TEST_CASE("render_event: init, retries and results of failed runs") {
  SUBCASE("not logged in") {
    const auto events = events_of(kNotLoggedIn);
    REQUIRE(events.size() == 3);
    CHECK(claude::render_event(events[0]) ==
          "== session d1c60014-3e2b-40c4-8748-320d36c809d9: Claude Code 2.1.197, model claude-opus-4-8[1m], "
          "permission mode dontAsk, tools Read,StructuredOutput,Write\n");
    CHECK(claude::render_event(events[1]) == "   Not logged in · Please run /login\n");
    CHECK(claude::render_event(events[2]) ==
          "== result: success (error), 1 turns, $0, 0.1s\n   Not logged in · Please run /login\n");
  }
  SUBCASE("an API retry") {
    const auto events = events_of(kHttp500);
    REQUIRE(events.size() == 4);
    CHECK(claude::render_event(events[1]) == "!! API retry 1: server_error\n");
  }
  SUBCASE("a result with no text or structured output shows its errors") {
    const auto events = events_of(kMaxTurns);
    CHECK(claude::render_event(events.back()) ==
          "== result: error_max_turns (error), 3 turns, $0.002, 0.5s\n   error: Reached maximum number of turns (2)\n");
  }
  SUBCASE("blocked") {
    const auto events = events_of(kBlocked);
    CHECK(claude::render_event(events.back()) ==
          "== result: success, 2 turns, $0.001, 0.1s\n   status: blocked\n   summary: the tests need network "
          "access\n");
  }
}

TEST_CASE("render_event: tool results given as parts, multi-line text, and events not worth a line") {
  CHECK(claude::render_event(json::parse(R"({"type":"user","message":{"content":[{"type":"tool_result",
    "content":[{"type":"text","text":"  line one\nline two"},{"type":"text","text":" and more"}]}]}})")) ==
        "<- line one\n");
  CHECK(claude::render_event(json::parse(R"({"type":"user","message":{"content":[{"type":"tool_result",
    "content":"boom","is_error":true}]}})")) == "<- error: boom\n");
  CHECK(claude::render_event(json::parse(R"({"type":"assistant","message":{"id":"m","content":[
    {"type":"text","text":"First.\nSecond.\n"},{"type":"tool_use","name":"Read","input":{"file_path":"a.c"}}]}})")) ==
        "   First.\n   Second.\n-> Read: a.c\n");
  // The synthetic reminder Claude Code sends as a user turn (real), a
  // thinking block, and events of other types: nothing.
  const auto no_structured = events_of(kNoStructuredOutput);
  REQUIRE(no_structured.size() == 7);
  CHECK(claude::render_event(no_structured[4]) == "");
  CHECK(claude::render_event(
            json::parse(R"({"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hmm"}]}})")) == "");
  CHECK(claude::render_event(json::parse(R"({"type":"stream_event","event":{}})")) == "");
  CHECK(claude::render_event(json::parse(R"({"type":"system","subtype":"compact_boundary"})")) == "");
  CHECK(claude::render_event(json::parse(R"({"type":"assistant"})")) == "");
  CHECK(claude::render_event(json::parse(R"({"type":"user","message":"text"})")) == "");
}

// ===========================================================================
// progress

TEST_CASE("progress_text shows elapsed time, turn, tool and cost") {
  const auto text = [](std::int64_t ms, std::int64_t turns, std::string tool, double cost, bool estimate) {
    Progress progress;
    progress.elapsed_ms = ms;
    progress.turns = turns;
    progress.tool = std::move(tool);
    progress.cost_usd = cost;
    progress.cost_is_estimate = estimate;
    return progress_text(progress);
  };
  CHECK(text(0, 0, "", 0, true) == "[0s] turn 0 · ~$0");
  CHECK(text(999, 0, "", 0, true) == "[0s] turn 0 · ~$0");
  CHECK(text(59999, 3, "Read: src/a.cpp", 0.0021, true) == "[59s] turn 3 · Read: src/a.cpp · ~$0.0021");
  CHECK(text(60000, 3, "", 0.0021, true) == "[1m00s] turn 3 · ~$0.0021");
  CHECK(text(65000, 4, "Bash: npm test", 0.0123, true) == "[1m05s] turn 4 · Bash: npm test · ~$0.0123");
  CHECK(text(609000, 12, "", 1.5, true) == "[10m09s] turn 12 · ~$1.5");
  CHECK(text(3723000, 40, "Edit: a.c", 2.25, true) == "[1h02m] turn 40 · Edit: a.c · ~$2.25");
  // The result's own figure is not an estimate.
  CHECK(text(361, 5, "", 0.004, false) == "[0s] turn 5 · $0.004");
  CHECK(text(1000, 1, "", 0.123456, false) == "[1s] turn 1 · $0.1235");
}

TEST_CASE("EventSplitter refuses an event nested deeper than 64 levels, so no field copy can recurse") {
  // Regression: a worker that writes to Claude Code's stdout (or a forged
  // events.jsonl) chose a line of 16 MiB; nlohmann parses and frees it
  // without recursion, but copying a value (structured_output,
  // permission_denials, a denial's tool_input) recurses once per level and
  // overflowed the stack: git-mullet died with SIGSEGV mid-run or in `log`.
  const auto nested = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  for (const std::size_t depth : {std::size_t{64}, std::size_t{4'000'000}}) {
    const std::string deep = nested(depth);
    const Strings lines = {
        R"({"type":"result","subtype":"success","structured_output":)" + deep + "}",
        R"({"type":"result","subtype":"success","permission_denials":)" + deep + "}",
        R"({"type":"result","subtype":"success","permission_denials":[{"tool_name":"Bash","tool_input":{"command":)" +
            deep + "}}]}",
        R"({"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":)" + deep +
            "}}]}}",
    };
    for (const auto& line : lines) {
      INFO("depth " << depth << ": " << line.substr(0, 120));
      claude::EventSplitter splitter;
      auto events = splitter.feed(line + "\n");
      CHECK(splitter.bad_lines() == 1);
      REQUIRE(events.empty());
    }
  }
  // 64 levels in all is an event.
  claude::EventSplitter splitter;
  const auto events =
      splitter.feed(R"({"type":"result","subtype":"success","structured_output":)" + nested(63) + "}\n");
  REQUIRE(events.size() == 1);
  claude::StreamState state;
  state.apply(events[0]);
  CHECK(state.result.has_value());
  CHECK_NOTHROW(claude::render_event(events[0]));
}

TEST_CASE("build_argv passes --model only when a model is set, and refuses a binary without it") {
  std::set<std::string> available = required_flags();
  available.insert("--model");
  SUBCASE("no model: no --model, Claude Code chooses") {
    const auto argv = claude::build_argv(available, argv_options());
    REQUIRE(argv.has_value());
    CHECK(parse_argv(*argv).count("--model") == 0);
  }
  SUBCASE("a model: --model and the name as its own argument") {
    auto options = argv_options();
    options.model = "claude-opus-4-1";
    const auto argv = claude::build_argv(available, options);
    REQUIRE(argv.has_value());
    const ParsedArgv parsed = parse_argv(*argv);
    CHECK(parsed.count("--model") == 1);
    CHECK(parsed.value("--model") == std::optional<std::string>("claude-opus-4-1"));
    CHECK(parsed.positional.empty());
  }
  SUBCASE("a model, and a binary without --model: refused, naming it") {
    auto options = argv_options();
    options.model = "sonnet";
    available.erase("--model");
    const auto argv = claude::build_argv(available, options);
    REQUIRE_FALSE(argv.has_value());
    CHECK(argv.error().code() == ExitCode::refused);
    CHECK(contains(argv.error().what(), "--model"));
  }
}
