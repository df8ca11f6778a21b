#include "executors/command.hpp"

#include "util/error.hpp"

namespace mullet::executors {

WorkerSpec CommandExecutor::prepare(const TaskContext& task) const {
  const std::string& command = task.config.string("run.command");
  if (command.empty()) {
    throw usage_error("the command executor needs a command", "pass --command CMD, or set [run] command in your config");
  }
  WorkerSpec spec;
  spec.command = {"/bin/sh", "-c", command};
  spec.env["MULLET_PROMPT"] = task.prompt;
  spec.stdin_data = task.prompt;
  spec.record = {"command", command, ""};
  return spec;
}

}  // namespace mullet::executors
