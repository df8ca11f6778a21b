#include "executors/executor.hpp"

#include <iostream>

#include "executors/claude.hpp"
#include "executors/command.hpp"
#include "util/error.hpp"

namespace mullet::executors {
namespace {

// Echoes plain output as it comes.
class PlainSession final : public WorkerSession {
 public:
  explicit PlainSession(bool echo) : m_echo(echo) {}
  void on_stdout(std::string_view chunk) override { echo(chunk); }
  void on_stderr(std::string_view chunk) override { echo(chunk); }
  WorkerOutcome finish(const sandbox::RunResult& run) override { return plain_outcome(run); }

 private:
  void echo(std::string_view chunk) const {
    if (m_echo) std::cerr.write(chunk.data(), static_cast<std::streamsize>(chunk.size())).flush();
  }
  bool m_echo;
};

}  // namespace

WorkerOutcome plain_outcome(const sandbox::RunResult& run) {
  WorkerOutcome outcome;
  if (run.ended_by == "exit" && run.status.code == 0) {
    outcome.kind = WorkerOutcome::Kind::success;
  } else if (run.ended_by == "exit" || run.ended_by == "signal") {
    outcome.error = "the worker failed (" + run.status.describe() + ")";
  } else {
    outcome.error = "the worker was stopped: " + run.ended_by;
  }
  return outcome;
}

std::unique_ptr<WorkerSession> Executor::start_session(bool show_progress) const {
  return std::make_unique<PlainSession>(show_progress);
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "command") return std::make_unique<CommandExecutor>();
  if (name == "claude") return std::make_unique<ClaudeExecutor>();
  throw usage_error("unknown executor '" + name + "'", "known executors: claude, command");
}

}  // namespace mullet::executors
