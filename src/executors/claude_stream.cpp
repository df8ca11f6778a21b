#include "executors/claude_stream.hpp"

#include <algorithm>

#include "util/strings.hpp"

namespace mullet::executors::claude {
namespace {

std::string string_at(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  return found != json.end() && found->is_string() ? found->get<std::string>() : std::string();
}

std::vector<std::string> strings_at(const nlohmann::json& json, const char* key) {
  std::vector<std::string> values;
  const auto found = json.find(key);
  if (found == json.end() || !found->is_array()) return values;
  for (const auto& item : *found) {
    if (item.is_string()) {
      values.push_back(item.get<std::string>());
    } else if (item.is_object()) {
      values.push_back(string_at(item, "name"));  // mcp_servers: [{name, status}]
    }
  }
  return values;
}

// The stream comes from the worker: every field may be missing or of any type.
bool bool_at(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  return found != json.end() && found->is_boolean() && found->get<bool>();
}

double number_at(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  return found != json.end() && found->is_number() ? found->get<double>() : 0.0;
}

std::int64_t integer_at(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  return found != json.end() && found->is_number_integer() ? found->get<std::int64_t>() : 0;
}

const nlohmann::json& object_at(const nlohmann::json& json, const char* key) {
  static const nlohmann::json none = nlohmann::json::object();
  const auto found = json.find(key);
  return found != json.end() && found->is_object() ? *found : none;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The argument that says most about a tool use, cut to fit a line.
std::string tool_detail(const nlohmann::json& input) {
  if (!input.is_object()) return {};
  for (const char* key : {"command", "file_path", "path", "pattern"}) {
    const std::string value = string_at(input, key);
    if (!value.empty()) return util::first_line(value, 60);
  }
  return {};
}

std::string describe_tool(const nlohmann::json& block) {
  const std::string detail = tool_detail(object_at(block, "input"));
  return string_at(block, "name") + (detail.empty() ? "" : ": " + detail);
}

const nlohmann::json& message_content(const nlohmann::json& event) {
  static const nlohmann::json none = nlohmann::json::array();
  const auto message = event.find("message");
  if (message == event.end() || !message->is_object()) return none;
  const auto content = message->find("content");
  return content != message->end() && content->is_array() ? *content : none;
}

std::vector<std::string> described_denials(const nlohmann::json& denials) {
  std::vector<std::string> parts;
  for (const auto& denial : denials) {
    if (denial.is_object()) parts.push_back(describe_denial(denial));
  }
  return parts;
}

std::string denials_hint(const nlohmann::json& denials) {
  if (!denials.is_array()) return {};
  const bool bash = std::any_of(denials.begin(), denials.end(), [](const nlohmann::json& denial) {
    return denial.is_object() && string_at(denial, "tool_name") == "Bash";
  });
  return refused_uses_hint(described_denials(denials), bash, "[claude] allow_bash");
}

}  // namespace

std::string describe_denial(const nlohmann::json& denial) {
  if (!denial.is_object()) return "?";
  return describe_tool({{"name", string_at(denial, "tool_name")}, {"input", object_at(denial, "tool_input")}});
}

std::vector<nlohmann::json> EventSplitter::feed(std::string_view chunk) {
  std::vector<nlohmann::json> events;
  // Only the new bytes can hold a line's end: a flood without newlines costs
  // no rescan of what is held.
  const std::size_t held = m_partial.size();
  m_partial.append(chunk);
  std::size_t start = 0;
  for (std::size_t end = m_partial.find('\n', held); end != std::string::npos; end = m_partial.find('\n', start)) {
    take_line(std::string_view(m_partial).substr(start, end - start), events);
    start = end + 1;
  }
  m_partial.erase(0, start);
  // A line longer than any event we expect is garbage; do not hold it all.
  constexpr std::size_t longest_line = 16U << 20U;
  if (m_partial.size() > longest_line) {
    m_partial.clear();
    ++m_bad_lines;
  }
  return events;
}

std::vector<nlohmann::json> EventSplitter::finish() {
  std::vector<nlohmann::json> events;
  if (!m_partial.empty()) take_line(m_partial, events);
  m_partial.clear();
  return events;
}

void EventSplitter::take_line(std::string_view line, std::vector<nlohmann::json>& events) {
  if (util::trim(line).empty()) return;
  // nlohmann parses and frees without recursion, but copying a value
  // recurses once per level: a line 8 million arrays deep would overflow the
  // stack where a field is copied. Deeper values are left out as they are
  // parsed, and the line is not an event.
  constexpr int max_depth = 64;
  bool too_deep = false;
  // `depth` counts the values around this one: the event itself is at 0.
  const auto bound_depth = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth >= max_depth) too_deep = true;
    return !too_deep;
  };
  auto event = nlohmann::json::parse(line, bound_depth, /*allow_exceptions=*/false);
  if (!too_deep && event.is_object() && event.contains("type")) {
    events.push_back(std::move(event));
  } else {
    ++m_bad_lines;
  }
}

void StreamState::apply(const nlohmann::json& event) {
  const std::string type = string_at(event, "type");
  const std::string subtype = string_at(event, "subtype");
  if (session_id.empty()) session_id = string_at(event, "session_id");
  if (type == "system" && subtype == "init") {
    InitEvent seen;
    seen.permission_mode = string_at(event, "permissionMode");
    seen.model = string_at(event, "model");
    seen.version = string_at(event, "claude_code_version");
    seen.api_key_source = string_at(event, "apiKeySource");
    seen.tools = strings_at(event, "tools");
    seen.mcp_servers = strings_at(event, "mcp_servers");
    seen.slash_commands = strings_at(event, "slash_commands");
    seen.plugins = strings_at(event, "plugins");
    const auto memory = event.find("memory_paths");
    seen.has_memory_paths = memory != event.end() && !memory->is_null() && !memory->empty();
    model = seen.model;
    init = std::move(seen);
  } else if (type == "system" && subtype == "api_retry") {
    ++api_retries;
    last_api_error = string_at(event, "error");
    if (const auto status = event.find("error_status"); status != event.end() && status->is_number_integer()) {
      const std::string http = "HTTP " + std::to_string(status->get<int>());
      last_api_error = last_api_error.empty() ? http : last_api_error + " (" + http + ")";
    }
  } else if (type == "assistant") {
    const auto message = event.find("message");
    if (message != event.end() && message->is_object()) {
      const std::string id = string_at(*message, "id");
      if (id.empty() || std::find(m_message_ids.begin(), m_message_ids.end(), id) == m_message_ids.end()) {
        if (!id.empty()) m_message_ids.push_back(id);
        ++turns;
        if (const auto usage = message->find("usage"); usage != message->end()) {
          estimated_cost += estimate_cost(string_at(*message, "model"), *usage);
        }
      }
    }
    for (const auto& block : message_content(event)) {
      if (block.is_object() && string_at(block, "type") == "tool_use") tool = describe_tool(block);
    }
    const std::string error = string_at(event, "error");
    if (!error.empty()) assistant_error = error;
  } else if (type == "result") {
    ResultEvent seen;
    seen.subtype = subtype;
    seen.is_error = bool_at(event, "is_error");
    if (const auto n = event.find("num_turns"); n != event.end() && n->is_number_integer())
      seen.turns = n->get<std::int64_t>();
    if (const auto c = event.find("total_cost_usd"); c != event.end() && c->is_number())
      seen.cost_usd = c->get<double>();
    if (const auto d = event.find("duration_ms"); d != event.end() && d->is_number_integer()) {
      seen.duration_ms = d->get<std::int64_t>();
    }
    seen.text = string_at(event, "result");
    if (const auto output = event.find("structured_output"); output != event.end() && !output->is_null()) {
      seen.structured_output = *output;
    }
    if (const auto denials = event.find("permission_denials"); denials != event.end() && denials->is_array()) {
      seen.permission_denials = *denials;
    }
    seen.errors = strings_at(event, "errors");
    if (const auto status = event.find("api_error_status"); status != event.end() && status->is_number_integer()) {
      seen.api_error_status = status->get<int>();
    }
    tool.clear();
    result = std::move(seen);
  }
}

std::string check_init(const InitEvent& init, const std::vector<std::string>& tools) {
  std::vector<std::string> problems;
  if (init.permission_mode != "dontAsk") problems.push_back("permission mode is '" + init.permission_mode + "'");
  for (const auto& tool : init.tools) {
    if (tool != "StructuredOutput" && std::find(tools.begin(), tools.end(), tool) == tools.end()) {
      problems.push_back("tool " + tool + " is loaded");
    }
  }
  if (!init.mcp_servers.empty()) problems.push_back("MCP servers are loaded: " + util::join(init.mcp_servers, ", "));
  if (!init.plugins.empty()) problems.push_back("plugins are loaded");
  if (!init.slash_commands.empty()) problems.push_back("slash commands are enabled");
  if (init.has_memory_paths) problems.push_back("our settings file was not applied (auto memory is on)");
  return util::join(problems, "; ");
}

WorkerOutcome judge(const StreamState& state, const RunFacts& facts) {
  WorkerOutcome outcome;
  auto& report = outcome.report;
  report.model = state.model;
  report.session_id = state.session_id;
  report.turns = state.turns;
  report.cost_usd = state.estimated_cost;
  const auto failed = [&](std::string error, std::string hint = {}) {
    outcome.kind = WorkerOutcome::Kind::failed;
    outcome.error = std::move(error);
    outcome.hint = std::move(hint);
    return outcome;
  };
  const std::string stderr_line = util::first_line(util::trim(facts.stderr_text), 300);

  if (!facts.refusal.empty()) {
    outcome.kind = WorkerOutcome::Kind::refused;
    outcome.error = "Claude Code did not start as git-mullet asked (" + facts.refusal + "), so it was stopped";
    outcome.hint = "check that the Claude Code binary is a supported version (git mullet doctor)";
    return outcome;
  }
  if (const auto& result = state.result) {
    report.turns = result->turns;
    report.cost_usd = result->cost_usd;
    report.permission_denials = result->permission_denials;
    if (result->structured_output && result->structured_output->is_object()) {
      report.status = string_at(*result->structured_output, "status");
      report.summary = string_at(*result->structured_output, "summary");
    }
  }
  if (!sandbox::ended_by_itself(facts.ended_by)) {
    return failed("the worker was stopped: " + sandbox::describe_stop(facts.ended_by));
  }
  // Claude Code says so on stderr, and in the result's errors when it got
  // that far; the wording's case differs between the two.
  std::string sandbox_error;
  const auto mentions_sandbox = [](const std::string& text) {
    return contains(util::to_lower(text), "sandbox required but unavailable");
  };
  if (state.result) {
    for (const auto& error : state.result->errors) {
      if (mentions_sandbox(error)) sandbox_error = util::first_line(error, 300);
    }
  }
  if (sandbox_error.empty() && mentions_sandbox(facts.stderr_text)) sandbox_error = stderr_line;
  if (!sandbox_error.empty()) {
    return failed(
        "Claude Code's own sandbox is unavailable inside git-mullet's, so it refused to run: " + sandbox_error,
        "install bubblewrap and socat (apt-get install bubblewrap socat); git mullet doctor checks them");
  }
  if (!state.result) {
    if (!state.init) {
      return failed("Claude Code ended before it started a session (exit code " + std::to_string(facts.exit_code) +
                    ")" + (stderr_line.empty() ? "" : ": " + stderr_line));
    }
    return failed("Claude Code ended without a result (exit code " + std::to_string(facts.exit_code) + ")" +
                  (stderr_line.empty() ? "" : ": " + stderr_line));
  }
  const ResultEvent& result = *state.result;
  const std::string text = util::first_line(result.text, 300);
  // The result text of a successful run is the worker's own words: only an
  // error's text is read for what went wrong.
  const bool error_text = result.is_error;
  if (state.assistant_error == "authentication_failed" ||
      (error_text && (contains(result.text, "Not logged in") || contains(result.text, "Invalid API key")))) {
    return failed("Claude Code is not logged in: no valid credentials reached the worker (" + text + ")",
                  "export ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN) and list it in "
                  "[sandbox] env in your user config");
  }
  if (result.subtype == "error_max_turns") {
    return failed("the worker reached its turn limit after " + std::to_string(result.turns) + " turns");
  }
  if (result.subtype == "error_max_budget_usd") {
    return failed("the worker reached its cost limit ($" + util::format_decimal(result.cost_usd) + " spent)");
  }
  if (result.subtype == "error_max_structured_output_retries") {
    return failed("the worker never returned a valid structured result (status and summary)");
  }
  if (state.assistant_error == "server_error" || result.api_error_status ||
      (error_text && (contains(result.text, "API Error") || contains(result.text, "Unable to connect") ||
                      contains(result.text, "Connection error")))) {
    return failed("the Claude API could not be reached: " + (text.empty() ? state.last_api_error : text),
                  "check [claude] base_url, and that the endpoint is up; the worker may reach only that endpoint");
  }
  if (result.is_error || result.subtype != "success") {
    std::string why = text;
    if (why.empty()) why = util::join(result.errors, "; ");
    return failed("Claude Code failed (" + result.subtype + ")" + (why.empty() ? "" : ": " + why));
  }
  if (report.status != "done" && report.status != "blocked") {
    return failed("the worker returned no structured result (status and summary), so its work is not trusted as done");
  }
  if (report.status == "blocked") {
    return failed("the worker says it is blocked: " + util::first_line(report.summary, 300),
                  denials_hint(report.permission_denials));
  }
  outcome.kind = WorkerOutcome::Kind::success;
  outcome.hint = denials_hint(report.permission_denials);
  return outcome;
}

std::string render_event(const nlohmann::json& event) {
  const std::string type = string_at(event, "type");
  const std::string subtype = string_at(event, "subtype");
  std::string out;
  if (type == "system" && subtype == "init") {
    out += "== session " + string_at(event, "session_id") + ": Claude Code " + string_at(event, "claude_code_version") +
           ", model " + string_at(event, "model") + ", permission mode " + string_at(event, "permissionMode") +
           ", tools " + util::join(strings_at(event, "tools"), ",") + "\n";
  } else if (type == "system" && subtype == "api_retry") {
    out += "!! API retry " + std::to_string(integer_at(event, "attempt")) + ": " + string_at(event, "error") + "\n";
  } else if (type == "assistant") {
    for (const auto& block : message_content(event)) {
      if (!block.is_object()) continue;
      const std::string kind = string_at(block, "type");
      if (kind == "text") {
        for (const auto& line : util::split(util::trim(string_at(block, "text")), '\n')) out += "   " + line + "\n";
      } else if (kind == "tool_use") {
        out += "-> " + describe_tool(block) + "\n";
      }
    }
  } else if (type == "user") {
    for (const auto& block : message_content(event)) {
      if (!block.is_object() || string_at(block, "type") != "tool_result") continue;
      std::string content;
      if (const auto c = block.find("content"); c != block.end()) {
        if (c->is_string()) {
          content = c->get<std::string>();
        } else if (c->is_array()) {
          for (const auto& part : *c) content += string_at(part, "text");
        }
      }
      const bool error = bool_at(block, "is_error");
      out += std::string(error ? "<- error: " : "<- ") + util::first_line(util::trim(content), 200) + "\n";
    }
  } else if (type == "result") {
    out += "== result: " + subtype + (bool_at(event, "is_error") ? " (error)" : "") + ", " +
           std::to_string(integer_at(event, "num_turns")) + " turns, $" +
           util::format_decimal(number_at(event, "total_cost_usd")) + ", " +
           util::format_decimal(number_at(event, "duration_ms") / 1000.0, 1) + "s\n";
    if (const auto output = event.find("structured_output"); output != event.end() && output->is_object()) {
      out += "   status: " + string_at(*output, "status") + "\n   summary: " + string_at(*output, "summary") + "\n";
    } else if (!string_at(event, "result").empty()) {
      out += "   " + util::first_line(string_at(event, "result"), 300) + "\n";
    }
    for (const auto& error : strings_at(event, "errors")) out += "   error: " + util::first_line(error, 300) + "\n";
    if (const auto denials = event.find("permission_denials"); denials != event.end() && !denials->empty()) {
      out += "   refused: " + util::join(described_denials(*denials), "; ") + "\n";
    }
  }
  return out;
}

double estimate_cost(const std::string& model, const nlohmann::json& usage) {
  if (!usage.is_object()) return 0;
  // USD per million tokens: input, output. Cache reads cost a tenth of input,
  // cache writes a quarter more.
  double input_price = 3;
  double output_price = 15;
  if (contains(model, "opus")) {
    input_price = 5;
    output_price = 25;
  } else if (contains(model, "haiku")) {
    input_price = 1;
    output_price = 5;
  }
  const auto tokens = [&](const char* key) {
    const auto found = usage.find(key);
    return found != usage.end() && found->is_number() ? found->get<double>() : 0.0;
  };
  const double cost = tokens("input_tokens") * input_price + tokens("output_tokens") * output_price +
                      tokens("cache_read_input_tokens") * input_price * 0.1 +
                      tokens("cache_creation_input_tokens") * input_price * 1.25;
  return cost / 1e6;
}

}  // namespace mullet::executors::claude
