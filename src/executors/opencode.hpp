// The opencode executor: the real opencode CLI inside the walls (it has no
// sandbox of its own), configured fail-closed through its environment alone,
// its provider pointed at the credential endpoint, watched through its
// `run --format json` events.
#pragma once

#include "executors/executor.hpp"

namespace mullet::executors {

class OpencodeExecutor final : public Executor {
 public:
  std::string name() const override { return "opencode"; }
  bool needs_api() const override { return true; }
  ApiSource api_source(const config::Settings& settings) const override;
  WorkerSpec prepare(const TaskContext& task) const override;
  std::unique_ptr<WorkerSession> start_session(const WorkerSpec& spec, bool show_progress,
                                               const SessionLimits& limits) const override;
  std::string check_preflight(const WorkerSpec& spec, std::string_view printed) const override;
  std::string check_work_tree(const std::string& work_tree) const override;
};

}  // namespace mullet::executors
