// What an executor tells about a worker's run: which worker ran, and what the
// worker itself reported. Plain data that the job record (jobs/record.hpp)
// keeps; it lives here so executors never depend on jobs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mullet::executors {

struct ExecutorRecord {
  std::string name;     // command, claude
  std::string command;  // what ran, for the command executor
  std::string version;  // the worker binary's version, when it has one
  // The model the worker was asked to use ([claude] model, [opencode] model,
  // run --model); empty when its CLI chose. What the worker says it used is
  // WorkerReport::model.
  std::string model;
};

// What the worker itself said about its run, when its executor can tell
// (Claude Code's result event).
struct WorkerReport {
  std::string status;  // done, blocked; empty when the worker returned none
  std::string summary;
  std::int64_t turns = 0;
  double cost_usd = 0;
  std::string model;
  std::string session_id;
  // Tool uses the worker's own permission rules refused: [{tool, input}].
  nlohmann::json permission_denials = nlohmann::json::array();
  bool empty() const {
    return status.empty() && summary.empty() && turns == 0 && cost_usd == 0 && model.empty() && session_id.empty() &&
           permission_denials.empty();
  }
};

}  // namespace mullet::executors
