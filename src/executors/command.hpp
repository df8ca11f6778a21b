// The command executor: any shell command as the worker, for tests and
// scripting. The prompt arrives on stdin and in MULLET_PROMPT.
#pragma once

#include "executors/executor.hpp"

namespace mullet::executors {

inline constexpr std::size_t max_prompt_in_env = std::size_t{64} * 1024;

class CommandExecutor final : public Executor {
 public:
  std::string name() const override { return "command"; }
  WorkerSpec prepare(const TaskContext& task) const override;
};

}  // namespace mullet::executors
