// opencode's `run --format json` output, understood: what a progress line
// and the job record need, the final result the prompt asks for, and the
// verdict. Pure: no I/O here. Lines are split into events by
// claude::EventSplitter (one JSON object a line, the same framing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "executors/executor.hpp"
#include "sandbox/stop_reason.hpp"

namespace mullet::executors::opencode {

// The result line of the worker's last message (opencode has no structured
// result of its own).
struct FinalResult {
  std::string status;  // done, blocked
  std::string summary;
};

// The last line of `text` that starts with result_marker (code fences and
// blanks around it allowed), when the JSON after it has a status of done or
// blocked and a string summary.
std::optional<FinalResult> parse_final_result(std::string_view text);

// Everything learned from the events so far.
struct StreamState {
  std::int64_t steps = 0;  // step_start events: one model call each
  std::string tool;        // the tool in use, with its title
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  double cost_usd = 0;      // opencode's own pricing (0 for a custom provider)
  std::string last_text;    // the text of the last text part
  std::string stop_reason;  // of the last step_finish: tool-calls, stop
  std::string session_id;
  std::string error;  // an error event: "name: message"
  // Tool calls opencode's permission rules refused, shaped as Claude Code's
  // permission_denials: [{tool_name, tool_input}].
  nlohmann::json permission_denials = nlohmann::json::array();

  void apply(const nlohmann::json& event);
};

struct RunFacts {
  sandbox::StopReason ended_by = sandbox::StopReason::exit;
  int exit_code = -1;
  std::string stderr_text;  // the tail of the worker's stderr
};

// The verdict on an opencode run, from its events and how it ended.
WorkerOutcome judge(const StreamState& state, const RunFacts& facts);

// One event as lines a person reads (`git mullet log`); empty for events not
// worth a line.
std::string render_event(const nlohmann::json& event);

}  // namespace mullet::executors::opencode
