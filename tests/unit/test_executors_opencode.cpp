// Unit tests for the opencode executor's pure parts: model names, the
// configuration and its permission rules, the environment, the command line,
// the check of `opencode debug config`, the prompt (opencode_args), and the
// `run --format json` events, the final result and the verdict
// (opencode_stream).
//
// The event fixtures are real output of opencode 1.18.33 run offline against
// tests/lib/fake_openai_api.py (docs/opencode-probe.md), trimmed of ids and
// timings nothing here reads, the session id shortened and the work tree
// path replaced by the sandbox's.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executors/claude_stream.hpp"
#include "executors/opencode_args.hpp"
#include "executors/opencode_binary.hpp"
#include "executors/opencode_stream.hpp"

namespace opencode = mullet::executors::opencode;
using mullet::executors::WorkerOutcome;
using Strings = std::vector<std::string>;

namespace {

const char* const session_events = R"json(
{"type":"step_start","sessionID":"ses_1","part":{"sessionID":"ses_1","snapshot":"0d8a474fc67971fb3dd7616e26323d3066442555","type":"step-start"}}
{"type":"text","sessionID":"ses_1","part":{"sessionID":"ses_1","type":"text","text":"Editing."}}
{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"write","callID":"call_w1","state":{"status":"completed","input":{"filePath":"/mullet/work/b.txt","content":"hello\n"},"output":"Wrote file successfully.","metadata":{"diagnostics":{},"filepath":"/mullet/work/b.txt","exists":false,"truncated":false},"title":"b.txt"},"sessionID":"ses_1"}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","snapshot":"1601132a41fa096f135cb1c455cc0dfbb97c112a","sessionID":"ses_1","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}
{"type":"step_start","sessionID":"ses_1","part":{"sessionID":"ses_1","snapshot":"1601132a41fa096f135cb1c455cc0dfbb97c112a","type":"step-start"}}
{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"call_b1","state":{"status":"completed","input":{"command":"touch allowed_marker","description":"x"},"output":"(no output)","metadata":{"output":"(no output)","exit":0,"truncated":false},"title":"touch allowed_marker"},"sessionID":"ses_1"}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","snapshot":"da4c279bfd2fedf14533d91aaae05499882e3830","sessionID":"ses_1","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0.0006}}
{"type":"step_start","sessionID":"ses_1","part":{"sessionID":"ses_1","snapshot":"da4c279bfd2fedf14533d91aaae05499882e3830","type":"step-start"}}
{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"call_b2","state":{"status":"error","input":{"command":"rm a.txt","description":"x"},"error":"The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [{\"permission\":\"bash\",\"pattern\":\"*\",\"action\":\"deny\"}]"},"sessionID":"ses_1"}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","snapshot":"da4c279bfd2fedf14533d91aaae05499882e3830","sessionID":"ses_1","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}
{"type":"step_start","sessionID":"ses_1","part":{"sessionID":"ses_1","snapshot":"da4c279bfd2fedf14533d91aaae05499882e3830","type":"step-start"}}
{"type":"text","sessionID":"ses_1","part":{"sessionID":"ses_1","type":"text","text":"All set.\nMULLET-RESULT {\"status\": \"done\", \"summary\": \"wrote b.txt\"}"}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"stop","snapshot":"da4c279bfd2fedf14533d91aaae05499882e3830","sessionID":"ses_1","type":"step-finish","tokens":{"total":120,"input":100,"output":20,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}
)json";

const char* const unreachable_event =
    R"({"type":"error","timestamp":1796318581131,"sessionID":"ses_2","error":{"name":"APIError","data":{"message":"Cannot connect to API: Was there a typo in the url or port?","isRetryable":true,"metadata":{"url":"http://127.0.0.1:9/v1/chat/completions"}}}})";

opencode::StreamState state_of(const std::string& lines) {
  mullet::executors::claude::EventSplitter splitter;
  opencode::StreamState state;
  for (const auto& event : splitter.feed(lines)) state.apply(event);
  for (const auto& event : splitter.finish()) state.apply(event);
  REQUIRE(splitter.bad_lines() == 0);
  return state;
}

opencode::ConfigInputs local_inputs() {
  return {{"local", "qwen"}, "http://127.0.0.1:3129", "sk-mullet-sentinel", {"make test", "npm test *"}};
}

// What opencode 1.18.33's `debug config` printed for build_config(local_inputs()).
std::string as_printed(const nlohmann::ordered_json& ours) {
  nlohmann::ordered_json printed = nlohmann::ordered_json::object();
  printed["agent"] = nlohmann::ordered_json::object();
  printed["mode"] = nlohmann::ordered_json::object();
  printed["plugin"] = nlohmann::ordered_json::array();
  printed["command"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : ours.items()) printed[key] = value;
  for (auto& [name, provider] : printed["provider"].items()) provider["options"]["apiKey"] = "***";
  printed["username"] = "mullet";
  return printed.dump(2);
}

}  // namespace

TEST_CASE("opencode: a model is provider/model, split at the first slash") {
  const auto model = opencode::parse_model("openrouter/qwen/qwen3-coder");
  REQUIRE(model.has_value());
  CHECK(model->provider == "openrouter");
  CHECK(model->model == "qwen/qwen3-coder");
  for (const char* bad : {"", "qwen", "/qwen", "local/"}) {
    INFO(bad);
    CHECK_FALSE(opencode::parse_model(bad).has_value());
  }
  CHECK(opencode::dialect_of({"anthropic", "claude-sonnet-4-5"}) == opencode::ProviderDialect::anthropic_messages);
  CHECK(opencode::dialect_of({"openai", "gpt-5"}) == opencode::ProviderDialect::chat_completions);
}

TEST_CASE("opencode: the permission denies first, then allows by name, bash only for its patterns") {
  const auto permission = opencode::build_permission({"make test"});
  // Order is meaning: the last matching rule wins.
  Strings keys;
  for (const auto& [key, value] : permission.items()) keys.push_back(key);
  CHECK(keys == Strings{"*", "read", "edit", "glob", "grep", "list", "todowrite", "bash", "external_directory",
                        "webfetch", "websearch"});
  CHECK(permission["*"] == "deny");
  CHECK(permission["bash"].dump() == R"({"*":"deny","make test":"allow"})");
  for (const char* denied : {"external_directory", "webfetch", "websearch"}) CHECK(permission[denied] == "deny");
  CHECK(permission.find("task") == permission.end());
  CHECK(opencode::build_permission({})["bash"].dump() == R"({"*":"deny"})");
}

TEST_CASE("opencode: the configuration points one provider at the credential endpoint, and enables nothing else") {
  const auto config = opencode::build_config(local_inputs());
  CHECK(config["autoupdate"] == false);
  CHECK(config["share"] == "disabled");
  CHECK(config["plugin"].empty());
  CHECK(config["mcp"].empty());
  CHECK(config["lsp"] == false);
  CHECK(config["formatter"] == false);
  CHECK(config["model"] == "local/qwen");
  CHECK(config["small_model"] == "local/qwen");
  CHECK(config["enabled_providers"].dump() == R"(["local"])");
  const auto& provider = config["provider"]["local"];
  CHECK(provider["npm"] == "@ai-sdk/openai-compatible");
  CHECK(provider["options"]["baseURL"] == "http://127.0.0.1:3129/v1");
  CHECK(provider["options"]["apiKey"] == "sk-mullet-sentinel");
  CHECK(provider["models"].dump() == R"({"qwen":{"tool_call":true}})");
  CHECK(config["permission"] == opencode::build_permission({"make test", "npm test *"}));

  auto inputs = local_inputs();
  inputs.model = {"anthropic", "claude-sonnet-4-5"};
  const auto anthropic = opencode::build_config(inputs)["provider"]["anthropic"];
  CHECK(anthropic.find("npm") == anthropic.end());
  CHECK(anthropic.find("models") == anthropic.end());
  CHECK(anthropic["options"]["baseURL"] == "http://127.0.0.1:3129/v1");
}

TEST_CASE("opencode: the environment keeps every directory in the home and every download off") {
  const auto config = opencode::build_config(local_inputs());
  const auto env = opencode::worker_environment(config, "/mullet/home");
  CHECK(env.at("HOME") == "/mullet/home");
  for (const char* key : {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"}) {
    INFO(key);
    CHECK(env.at(key).rfind("/mullet/home/", 0) == 0);
  }
  CHECK(env.at("OPENCODE_DISABLE_PROJECT_CONFIG") == "1");
  CHECK(env.at("OPENCODE_DISABLE_MODELS_FETCH") == "1");
  CHECK(env.at("npm_config_offline") == "true");
  CHECK(nlohmann::ordered_json::parse(env.at("OPENCODE_CONFIG_CONTENT")) == config);
  // It would replace our permission: it is ours.
  CHECK(env.at("OPENCODE_PERMISSION") == config["permission"].dump());
  for (const char* name : {"OPENCODE_PERMISSION", "OPENCODE_CONFIG", "npm_config_registry", "XDG_CONFIG_HOME",
                           "OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_BASE_URL", "NODE_OPTIONS"}) {
    INFO(name);
    CHECK(opencode::is_configuration_variable(name));
  }
  for (const char* name : {"GOFLAGS", "LANG", "CARGO_HOME"}) CHECK_FALSE(opencode::is_configuration_variable(name));
}

TEST_CASE("opencode: the command line needs --format and --model; the prompt goes on stdin") {
  const std::set<std::string> flags = {"--format", "--model", "--agent", "--dir"};
  const auto argv = opencode::build_argv(flags, "local/qwen");
  REQUIRE(argv.has_value());
  CHECK(*argv == Strings{"/mullet/bin/opencode", "run", "--format", "json", "--model", "local/qwen"});
  const auto refused = opencode::build_argv({"--model"}, "local/qwen");
  REQUIRE_FALSE(refused.has_value());
  CHECK(std::string(refused.error().what()).find("--format") != std::string::npos);
  CHECK(opencode::debug_config_argv() == Strings{"/mullet/bin/opencode", "debug", "config"});
}

TEST_CASE("opencode: the effective configuration must be ours, rule order included") {
  const auto ours = opencode::build_config(local_inputs());
  CHECK(opencode::check_effective_config(as_printed(ours), ours).empty());

  auto widened = ours;
  widened["permission"]["bash"]["*"] = "allow";
  CHECK(opencode::check_effective_config(as_printed(widened), ours).find("permission") != std::string::npos);

  auto with_mcp = ours;
  with_mcp["mcp"]["evil"] = {{"type", "local"}, {"command", {"touch", "x"}}};
  CHECK(opencode::check_effective_config(as_printed(with_mcp), ours).find("mcp") != std::string::npos);

  auto with_plugin = nlohmann::ordered_json::parse(as_printed(ours));
  with_plugin["plugin"].push_back("evil-plugin");
  CHECK_FALSE(opencode::check_effective_config(with_plugin.dump(), ours).empty());

  auto added = nlohmann::ordered_json::parse(as_printed(ours));
  added["instructions"] = {"AGENTS.md"};
  CHECK(opencode::check_effective_config(added.dump(), ours).find("instructions added") != std::string::npos);

  // The same rules, "*" last: every named allow is overridden by it.
  auto reordered = ours;
  reordered["permission"].erase("*");
  reordered["permission"]["*"] = "deny";
  CHECK(opencode::check_effective_config(as_printed(reordered), ours).find("order") != std::string::npos);

  CHECK_FALSE(opencode::check_effective_config("not json", ours).empty());
  CHECK_FALSE(opencode::check_effective_config("[]", ours).empty());
}

TEST_CASE("opencode: the prompt states the rules and the result line") {
  const std::string prompt = opencode::build_prompt({"Fix the bug.", {"make test"}, "/mullet/work"});
  CHECK(prompt.find("/mullet/work") != std::string::npos);
  CHECK(prompt.find("`make test`") != std::string::npos);
  CHECK(prompt.find("no network") != std::string::npos);
  CHECK(prompt.find("Do not commit") != std::string::npos);
  CHECK(prompt.find("MULLET-RESULT {\"status\": \"done\"") != std::string::npos);
  CHECK(prompt.find("Fix the bug.\n") != std::string::npos);
  const std::string no_shell = opencode::build_prompt({"x", {}, "/mullet/work"});
  CHECK(no_shell.find("there is no bash tool") != std::string::npos);
}

TEST_CASE("opencode: the final result is the last valid result line") {
  auto result = opencode::parse_final_result("Done.\nMULLET-RESULT {\"status\": \"done\", \"summary\": \"fixed\"}\n");
  REQUIRE(result.has_value());
  CHECK(result->status == "done");
  CHECK(result->summary == "fixed");
  result = opencode::parse_final_result(
      "```\nMULLET-RESULT {\"status\": \"done\", \"summary\": \"a\"}\n```\n"
      "`MULLET-RESULT {\"status\": \"blocked\", \"summary\": \"no compiler\"}`");
  REQUIRE(result.has_value());
  CHECK(result->status == "blocked");
  CHECK(result->summary == "no compiler");
  for (const char* missing : {"", "RESULT: done", "MULLET-RESULT {\"status\": \"finished\", \"summary\": \"x\"}",
                              "MULLET-RESULT {\"status\": \"done\"}", "MULLET-RESULT done", "say MULLET-RESULT {}"}) {
    INFO(missing);
    CHECK_FALSE(opencode::parse_final_result(missing).has_value());
  }
}

TEST_CASE("opencode: a session's events give steps, tokens, cost, refusals and the result") {
  const auto state = state_of(session_events);
  CHECK(state.steps == 4);
  CHECK(state.input_tokens == 400);
  CHECK(state.output_tokens == 80);
  CHECK(state.cost_usd == doctest::Approx(0.0006));
  CHECK(state.session_id == "ses_1");
  CHECK(state.stop_reason == "stop");
  REQUIRE(state.permission_denials.size() == 1);
  CHECK(state.permission_denials[0]["tool_name"] == "bash");
  CHECK(state.permission_denials[0]["tool_input"]["command"] == "rm a.txt");

  const auto outcome = opencode::judge(state, {mullet::sandbox::StopReason::exit, 0, ""});
  CHECK(outcome.kind == WorkerOutcome::Kind::success);
  CHECK(outcome.report.status == "done");
  CHECK(outcome.report.summary == "wrote b.txt");
  CHECK(outcome.report.turns == 4);
  CHECK(outcome.report.permission_denials.size() == 1);
}

TEST_CASE("opencode: the verdict names what went wrong") {
  const opencode::RunFacts clean{mullet::sandbox::StopReason::exit, 0, ""};
  SUBCASE("no result line") {
    auto state = state_of(session_events);
    state.last_text = "All set.";
    const auto outcome = opencode::judge(state, clean);
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error.find("without its final result") != std::string::npos);
  }
  SUBCASE("blocked") {
    auto state = state_of(session_events);
    state.last_text = "MULLET-RESULT {\"status\": \"blocked\", \"summary\": \"no compiler here\"}";
    const auto outcome = opencode::judge(state, clean);
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error.find("blocked: no compiler here") != std::string::npos);
    CHECK(outcome.report.status == "blocked");
    // The refused `rm a.txt` is named, and where commands are allowed.
    CHECK(outcome.hint ==
          "refused tool uses: bash: rm a.txt (to let the worker run a command, name it in "
          "[opencode] allow_bash)");
  }
  SUBCASE("blocked, nothing refused") {
    auto state = state_of(session_events);
    state.permission_denials = nlohmann::json::array();
    state.last_text = "MULLET-RESULT {\"status\": \"blocked\", \"summary\": \"no compiler here\"}";
    CHECK(opencode::judge(state, clean).hint.empty());
  }
  SUBCASE("endpoint unreachable") {
    const auto outcome = opencode::judge(state_of(unreachable_event), {mullet::sandbox::StopReason::exit, 1, ""});
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error.find("could not reach its model API") != std::string::npos);
  }
  SUBCASE("stopped by the step limit") {
    const auto outcome = opencode::judge(state_of(session_events), {mullet::sandbox::StopReason::turns, -1, ""});
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error.find("stopped") != std::string::npos);
  }
  SUBCASE("a failed exit with no event") {
    const auto outcome = opencode::judge({}, {mullet::sandbox::StopReason::exit, 2, "boom\nmore"});
    CHECK(outcome.kind == WorkerOutcome::Kind::failed);
    CHECK(outcome.error == "opencode failed (exit code 2): boom");
  }
}

TEST_CASE("opencode: events render as lines a person reads") {
  mullet::executors::claude::EventSplitter splitter;
  std::string out;
  for (const auto& event : splitter.feed(session_events)) out += opencode::render_event(event);
  CHECK(out.find("-> write: b.txt\n<- Wrote file successfully.\n") != std::string::npos);
  CHECK(out.find("-> bash: touch allowed_marker\n") != std::string::npos);
  CHECK(out.find("<- error: The user has specified a rule") != std::string::npos);
  CHECK(out.find("== step end (stop): 100 tokens in, 20 out\n") != std::string::npos);
  CHECK(opencode::render_event(nlohmann::json::parse(unreachable_event)) ==
        "!! APIError: Cannot connect to API: Was there a typo in the url or port?\n");
}

TEST_CASE("opencode: its version is the last word of the first line") {
  CHECK(opencode::parse_version("1.18.33\n") == "1.18.33");
  CHECK(opencode::parse_version("opencode 1.18.33\nmore") == "1.18.33");
}
