#include "executors/executor.hpp"

#include "executors/command.hpp"
#include "util/error.hpp"

namespace mullet::executors {

WorkerOutcome Executor::interpret(const sandbox::RunResult& run, const std::string& /*output*/) const {
  if (run.ended_by == "exit" && run.status.code == 0) return {true, {}};
  if (run.ended_by == "exit" || run.ended_by == "signal")
    return {false, "the worker failed (" + run.status.describe() + ")"};
  return {false, "the worker was stopped: " + run.ended_by};
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "command") return std::make_unique<CommandExecutor>();
  if (name == "claude") {
    throw usage_error("the claude executor is not available in this build yet", "use --executor command --command CMD");
  }
  throw usage_error("unknown executor '" + name + "'", "known executors: claude, command");
}

}  // namespace mullet::executors
