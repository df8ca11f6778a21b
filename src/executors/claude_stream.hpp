// Claude Code's stream-json output, understood: events split from raw
// output, folded into what a progress line and the job record need, and the
// final verdict. Pure: no I/O here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "executors/executor.hpp"
#include "sandbox/stop_reason.hpp"

namespace mullet::executors::claude {

// Splits output into lines and parses each as one JSON object. A line that is
// not one (garbage, cut short when the worker died, or nested more than 64
// levels deep) is counted, not fatal.
class EventSplitter {
 public:
  std::vector<nlohmann::json> feed(std::string_view chunk);
  // What is left after the stream ended without a final newline.
  std::vector<nlohmann::json> finish();
  std::size_t bad_lines() const { return m_bad_lines; }

 private:
  void take_line(std::string_view line, std::vector<nlohmann::json>& events);
  std::string m_partial;
  std::size_t m_bad_lines = 0;
};

struct InitEvent {
  std::string permission_mode;
  std::string model;
  std::string version;
  std::string api_key_source;
  std::vector<std::string> tools;
  std::vector<std::string> mcp_servers;
  std::vector<std::string> slash_commands;
  std::vector<std::string> plugins;
  bool has_memory_paths = false;
};

struct ResultEvent {
  std::string subtype;
  bool is_error = false;
  std::int64_t turns = 0;
  double cost_usd = 0;
  std::int64_t duration_ms = 0;
  std::string text;  // "result"
  std::optional<nlohmann::json> structured_output;
  nlohmann::json permission_denials = nlohmann::json::array();
  std::vector<std::string> errors;
  std::optional<int> api_error_status;
};

// Everything learned from the events so far.
struct StreamState {
  std::optional<InitEvent> init;
  std::optional<ResultEvent> result;
  std::int64_t turns = 0;     // assistant messages seen
  std::string tool;           // the tool in use, with its main argument
  double estimated_cost = 0;  // from token usage, until the result says
  std::int64_t api_retries = 0;
  std::string last_api_error;   // from api_retry events
  std::string assistant_error;  // a synthetic message's error kind (authentication_failed, ...)
  std::string session_id;
  std::string model;

  void apply(const nlohmann::json& event);

 private:
  std::vector<std::string> m_message_ids;
};

// Empty when the init event shows Claude Code running as we asked; else
// what differs. `tools`: the tools we passed.
std::string check_init(const InitEvent& init, const std::vector<std::string>& tools);

struct RunFacts {
  sandbox::StopReason ended_by = sandbox::StopReason::exit;
  int exit_code = -1;
  std::string stderr_text;  // the tail of the worker's stderr
  std::string refusal;      // set when we stopped it (check_init failed)
};

// The verdict on a Claude Code run, from its events and how it ended.
WorkerOutcome judge(const StreamState& state, const RunFacts& facts);

// One event as lines a person reads (`git mullet log`); empty for events not
// worth a line.
std::string render_event(const nlohmann::json& event);

// One permission_denials entry as "Bash: touch evil".
std::string describe_denial(const nlohmann::json& denial);

// An estimate in USD of what a message's usage costs, by model family.
double estimate_cost(const std::string& model, const nlohmann::json& usage);

}  // namespace mullet::executors::claude
