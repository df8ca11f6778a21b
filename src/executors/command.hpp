// The command executor: any shell command as the worker, for tests and
// scripting. The prompt arrives on stdin and in MULLET_PROMPT.
#pragma once

#include "executors/executor.hpp"

namespace mullet::executors {

inline constexpr std::1024U * 1024U;

class CommandExecutor final : public Executor {
 public:
  std::string name() const override { return "command"; }
  WorkerSpec prepare(const TaskContext& task) const override;
};

}  // namespace mullet::executors
