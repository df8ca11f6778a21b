#include "executors/command.hpp"

#include "util/error.hpp"

namespace mullet::executors {

WorkerSpec CommandExecutor::prepare(const TaskContext& task) const {
  const std::string& command = task.settings.run.command;
  if (command.empty()) {
    throw usage_error("the command executor needs a command",
                      "pass --command CMD, or set [run] command in your config");
  }
  WorkerSpec spec;
  spec.command = {"/bin/sh", "-c", command};
  // The whole task is always on stdin; the variable only while it fits the
  // kernel's limit for one environment string (128 KiB) with room to spare.
  if (task.prompt.size() <= max_prompt_in_env) spec.env["MULLET_PROMPT"] = task.prompt;
  spec.stdin_data = task.prompt;
  spec.record = {"command", command, "", ""};
  return spec;
}

}  // namespace mullet::executors
