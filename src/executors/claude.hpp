// The Claude Code executor: the real CLI inside the walls, with its own
// sandbox made mandatory by our settings, watched through its stream-json.
#pragma once

#include "executors/executor.hpp"

namespace mullet::executors {

class ClaudeExecutor final : public Executor {
 public:
  std::string name() const override { return "claude"; }
  bool needs_api() const override { return true; }
  ApiSource api_source(const config::Settings& settings) const override;
  WorkerSpec prepare(const TaskContext& task) const override;
  std::unique_ptr<WorkerSession> start_session(const WorkerSpec& spec, bool show_progress,
                                               const SessionLimits& limits) const override;
};

}  // namespace mullet::executors
