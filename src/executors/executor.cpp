#include "executors/executor.hpp"

#include <iostream>

#include "executors/claude.hpp"
#include "executors/claude_stream.hpp"
#include "executors/command.hpp"
#include "executors/opencode.hpp"
#include "executors/opencode_stream.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::executors {
namespace {

// Echoes plain output as it comes.
class PlainSession final : public WorkerSession {
 public:
  explicit PlainSession(bool echo) : m_echo(echo) {}
  void on_stdout(std::string_view chunk) override { echo(m_stdout_shown.feed(chunk)); }
  void on_stderr(std::string_view chunk) override { echo(m_stderr_shown.feed(chunk)); }
  WorkerOutcome finish(const sandbox::RunResult& run) override {
    echo(m_stdout_shown.finish());
    echo(m_stderr_shown.finish());
    return plain_outcome(run);
  }
  bool wants_status_line() const override { return true; }

 private:
  void echo(const std::string& text) const {
    if (m_echo) std::cerr.write(text.data(), static_cast<std::streamsize>(text.size())).flush();
  }
  bool m_echo;
  // The worker's output must not drive the user's terminal; each stream
  // carries its own cut UTF-8 sequence.
  util::TerminalSafeStream m_stdout_shown;
  util::TerminalSafeStream m_stderr_shown;
};

}  // namespace

WorkerOutcome plain_outcome(const sandbox::RunResult& run) {
  WorkerOutcome outcome;
  if (run.ended_by == sandbox::StopReason::exit && run.status.code == 0) {
    outcome.kind = WorkerOutcome::Kind::success;
  } else if (sandbox::ended_by_itself(run.ended_by)) {
    outcome.error = "the worker failed (" + run.status.describe() + ")";
  } else {
    outcome.error = "the worker was stopped: " + sandbox::describe_stop(run.ended_by);
  }
  return outcome;
}

std::unique_ptr<WorkerSession> Executor::start_session(const WorkerSpec& /*spec*/, bool show_progress,
                                                       const SessionLimits& /*limits*/) const {
  return std::make_unique<PlainSession>(show_progress);
}

std::string refused_uses_hint(const std::vector<std::string>& refused_uses, bool a_command_was_refused,
                              const std::string& allow_key) {
  if (refused_uses.empty()) return {};
  return "refused tool uses: " + util::join(refused_uses, "; ") +
         (a_command_was_refused ? " (to let the worker run a command, name it in " + allow_key + ")" : "");
}

std::string render_event(const std::string& executor_name, const nlohmann::json& event) {
  if (executor_name == "opencode") return opencode::render_event(event);
  return claude::render_event(event);
}

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "command") return std::make_unique<CommandExecutor>();
  if (name == "claude") return std::make_unique<ClaudeExecutor>();
  if (name == "opencode") return std::make_unique<OpencodeExecutor>();
  throw usage_error("unknown executor '" + name + "'", "known executors: claude, opencode, command");
}

}  // namespace mullet::executors
