#include "executors/opencode_stream.hpp"

#include "executors/opencode_args.hpp"
#include "util/strings.hpp"

namespace mullet::executors::opencode {
namespace {

// What opencode tells the model (and prints in the tool_use event) when a
// permission rule refuses a call.
constexpr std::string_view refusal_text = "The user has specified a rule which prevents you from using";

const nlohmann::json& null_json() {
  static const nlohmann::json null;
  return null;
}

const nlohmann::json& at(const nlohmann::json& json, const char* key) {
  if (!json.is_object()) return null_json();
  const auto found = json.find(key);
  return found != json.end() ? *found : null_json();
}

std::string string_at(const nlohmann::json& json, const char* key) {
  const auto& value = at(json, key);
  return value.is_string() ? value.get<std::string>() : std::string();
}

double number_at(const nlohmann::json& json, const char* key) {
  const auto& value = at(json, key);
  return value.is_number() ? value.get<double>() : 0.0;
}

std::int64_t integer_at(const nlohmann::json& json, const char* key) {
  const auto& value = at(json, key);
  return value.is_number_integer() ? value.get<std::int64_t>() : 0;
}

// "bash: npm test", from a tool part.
std::string describe_tool(const nlohmann::json& part) {
  const auto& state = at(part, "state");
  std::string detail = string_at(state, "title");
  if (detail.empty()) {
    const auto& input = at(state, "input");
    for (const char* key : {"command", "filePath", "pattern"}) {
      detail = string_at(input, key);
      if (!detail.empty()) break;
    }
  }
  return string_at(part, "tool") + (detail.empty() ? "" : ": " + util::first_line(detail, 120));
}

std::string error_text(const nlohmann::json& event) {
  const auto& error = at(event, "error");
  const std::string name = string_at(error, "name");
  const std::string message = string_at(at(error, "data"), "message");
  return name + (message.empty() ? "" : ": " + message);
}

std::string strip_fences(std::string line) {
  line = util::trim(line);
  while (line.starts_with('`')) line.erase(0, 1);
  while (line.ends_with('`')) line.pop_back();
  return util::trim(line);
}

}  // namespace

std::optional<FinalResult> parse_final_result(std::string_view text) {
  std::optional<FinalResult> found;
  for (const auto& raw : util::split(text, '\n')) {
    const std::string line = strip_fences(raw);
    if (!line.starts_with(result_marker)) continue;
    const auto json = nlohmann::json::parse(line.substr(std::string_view(result_marker).size()), nullptr, false);
    const std::string status = string_at(json, "status");
    if ((status != "done" && status != "blocked") || !at(json, "summary").is_string()) continue;
    found = FinalResult{status, string_at(json, "summary")};
  }
  return found;
}

void StreamState::apply(const nlohmann::json& event) {
  const std::string type = string_at(event, "type");
  const auto& part = at(event, "part");
  if (session_id.empty()) session_id = string_at(event, "sessionID");
  if (type == "step_start") {
    ++steps;
  } else if (type == "tool_use") {
    tool = describe_tool(part);
    const auto& state = at(part, "state");
    if (string_at(state, "status") == "error" && string_at(state, "error").starts_with(refusal_text)) {
      permission_denials.push_back({{"tool_name", string_at(part, "tool")}, {"tool_input", at(state, "input")}});
    }
  } else if (type == "step_finish") {
    const auto& tokens = at(part, "tokens");
    input_tokens += integer_at(tokens, "input");
    output_tokens += integer_at(tokens, "output");
    cost_usd += number_at(part, "cost");
    stop_reason = string_at(part, "reason");
    tool.clear();
  } else if (type == "text") {
    last_text = string_at(part, "text");
  } else if (type == "error") {
    error = error_text(event);
  }
}

namespace {

// Refused uses in opencode's words ("bash: curl example.com"), and the key
// that lets a command through.
std::string denials_hint(const nlohmann::json& denials) {
  std::vector<std::string> refused;
  bool command_refused = false;
  for (const auto& denial : denials) {
    const std::string tool = string_at(denial, "tool_name");
    command_refused = command_refused || tool == "bash";
    refused.push_back(describe_tool({{"tool", tool}, {"state", {{"input", at(denial, "tool_input")}}}}));
  }
  return refused_uses_hint(refused, command_refused, "[opencode] allow_bash");
}

}  // namespace

WorkerOutcome judge(const StreamState& state, const RunFacts& facts) {
  WorkerOutcome outcome;
  auto& report = outcome.report;
  report.session_id = state.session_id;
  report.turns = state.steps;
  report.cost_usd = state.cost_usd;
  report.permission_denials = state.permission_denials;
  const auto result = parse_final_result(state.last_text);
  if (result) {
    report.status = result->status;
    report.summary = result->summary;
  }
  const auto failed = [&](std::string error, std::string hint = {}) {
    outcome.kind = WorkerOutcome::Kind::failed;
    outcome.error = std::move(error);
    outcome.hint = std::move(hint);
    return outcome;
  };
  if (!sandbox::ended_by_itself(facts.ended_by)) {
    return failed("the worker was stopped: " + sandbox::describe_stop(facts.ended_by));
  }
  if (!state.error.empty()) {
    if (state.error.find("Cannot connect to API") != std::string::npos) {
      return failed("opencode could not reach its model API: " + util::first_line(state.error, 300),
                    "the worker reaches only git-mullet's credential endpoint; check that the upstream is up");
    }
    return failed("opencode failed: " + util::first_line(state.error, 300));
  }
  const std::string stderr_line = util::first_line(util::trim(facts.stderr_text), 300);
  if (facts.exit_code != 0) {
    return failed("opencode failed (exit code " + std::to_string(facts.exit_code) + ")" +
                  (stderr_line.empty() ? "" : ": " + stderr_line));
  }
  const std::string hint = denials_hint(state.permission_denials);
  if (!result) {
    return failed(std::string("the worker ended without its final result (the ") + result_marker +
                      " line the prompt asks for), so its work is not trusted as done",
                  hint);
  }
  if (result->status == "blocked") {
    return failed("the worker says it is blocked: " + util::first_line(result->summary, 300), hint);
  }
  outcome.kind = WorkerOutcome::Kind::success;
  outcome.hint = hint;
  return outcome;
}

std::string render_event(const nlohmann::json& event) {
  const std::string type = string_at(event, "type");
  const auto& part = at(event, "part");
  std::string out;
  if (type == "step_start") {
    out += "== step\n";
  } else if (type == "text") {
    for (const auto& line : util::split(util::trim(string_at(part, "text")), '\n')) out += "   " + line + "\n";
  } else if (type == "tool_use") {
    const auto& state = at(part, "state");
    out += "-> " + describe_tool(part) + "\n";
    if (string_at(state, "status") == "error") {
      out += "<- error: " + util::first_line(util::trim(string_at(state, "error")), 200) + "\n";
    } else {
      out += "<- " + util::first_line(util::trim(string_at(state, "output")), 200) + "\n";
    }
  } else if (type == "step_finish") {
    const auto& tokens = at(part, "tokens");
    out += "== step end (" + string_at(part, "reason") + "): " + std::to_string(integer_at(tokens, "input")) +
           " tokens in, " + std::to_string(integer_at(tokens, "output")) + " out\n";
  } else if (type == "error") {
    out += "!! " + util::first_line(error_text(event), 300) + "\n";
  }
  return out;
}

}  // namespace mullet::executors::opencode
