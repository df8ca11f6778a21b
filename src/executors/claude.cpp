#include "executors/claude.hpp"

#include <unistd.h>

#include <cstdlib>

#include "executors/claude_args.hpp"
#include "executors/claude_binary.hpp"
#include "executors/claude_stream.hpp"
#include "executors/progress.hpp"
#include "util/clock.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors {
namespace {

class ClaudeSession final : public WorkerSession {
 public:
  ClaudeSession(std::vector<std::string> tools, bool show_progress, const SessionLimits& limits)
      : m_tools(std::move(tools)),
        m_limits(limits),
        m_printer(show_progress, ::isatty(STDERR_FILENO) == 1),
        m_started(util::monotonic_ms()) {}

  void on_stdout(std::string_view chunk) override { take(m_splitter.feed(chunk)); }

  void on_stderr(std::string_view chunk) override {
    m_stderr.append(chunk);
    if (m_stderr.size() > std::size_t{64} * 1024) m_stderr = util::tail(m_stderr, std::size_t{32} * 1024);
    m_printer.print_text(m_stderr_shown.feed(chunk));
  }

  std::optional<sandbox::StopReason> poll() override {
    if (!m_refusal.empty()) return sandbox::StopReason::worker_refused;
    const Progress now = progress();
    m_printer.update(now);
    // Our own watch, besides Claude Code's --max-budget-usd: the estimate
    // runs low (a message's final output tokens arrive after its event).
    if (m_limits.max_turns > 0 && now.turns > m_limits.max_turns) return sandbox::StopReason::turns;
    if (m_limits.max_cost_usd > 0 && now.cost_usd > m_limits.max_cost_usd) return sandbox::StopReason::cost;
    return std::nullopt;
  }

  WorkerOutcome finish(const sandbox::RunResult& run) override {
    take(m_splitter.finish());
    m_printer.print_text(m_stderr_shown.finish());
    m_printer.update(progress());
    m_printer.done();
    claude::RunFacts facts;
    facts.ended_by = run.ended_by;
    facts.exit_code = run.status.code;
    facts.stderr_text = m_stderr;
    facts.refusal = m_refusal;
    return claude::judge(m_state, facts);
  }

 private:
  void take(const std::vector<nlohmann::json>& events) {
    for (const auto& event : events) {
      m_state.apply(event);
      const bool is_init = event.find("type") != event.end() && event["type"] == "system" &&
                           event.find("subtype") != event.end() && event["subtype"] == "init";
      if (is_init && m_state.init && m_refusal.empty()) {
        m_refusal = claude::check_init(*m_state.init, m_tools);
      }
    }
    if (!events.empty() && m_refusal.empty()) m_printer.update(progress());
  }

  Progress progress() const {
    Progress progress;
    progress.elapsed_ms = util::monotonic_ms() - m_started;
    progress.turns = m_state.result ? m_state.result->turns : m_state.turns;
    progress.tool = m_state.tool;
    progress.cost_is_estimate = !m_state.result;
    progress.cost_usd = m_state.result ? m_state.result->cost_usd : m_state.estimated_cost;
    return progress;
  }

  std::vector<std::string> m_tools;
  SessionLimits m_limits;
  claude::EventSplitter m_splitter;
  claude::StreamState m_state;
  ProgressPrinter m_printer;
  std::int64_t m_started;
  std::string m_stderr;
  util::TerminalSafeStream m_stderr_shown;
  std::string m_refusal;
};

const char* sentinel_variable(ApiAuth auth) {
  switch (auth) {
    case ApiAuth::api_key: return "ANTHROPIC_API_KEY";
    case ApiAuth::auth_token: return "ANTHROPIC_AUTH_TOKEN";
    case ApiAuth::oauth_token: return "CLAUDE_CODE_OAUTH_TOKEN";
  }
  return "ANTHROPIC_API_KEY";
}

}  // namespace

ApiSource ClaudeExecutor::api_source(const config::Settings& settings) const {
  return {"[claude] credential",
          settings.claude.credential,
          settings.claude.base_url,
          {{"ANTHROPIC_API_KEY", "x-api-key", "{}", ApiAuth::api_key},
           {"ANTHROPIC_AUTH_TOKEN", "Authorization", "Bearer {}", ApiAuth::auth_token},
           {"CLAUDE_CODE_OAUTH_TOKEN", "Authorization", "Bearer {}", ApiAuth::oauth_token}},
          "Claude Code"};
}

WorkerSpec ClaudeExecutor::prepare(const TaskContext& task) const {
  const auto& settings = task.settings;
  const std::string real_path = value_or_throw(claude::resolve_binary(settings.claude.binary, util::host_path()));
  const claude::Binary binary = claude::probe_binary(real_path, task.cache_dir);
  if (task.api == nullptr) throw failure("internal error: the claude executor was given no API endpoint");

  const std::string settings_path = std::string(files_inside) + "/" + claude::settings_name;
  WorkerSpec spec;
  spec.tools = claude::worker_tools(settings.claude.allow_bash);
  spec.command = value_or_throw(
      // No --max-budget-usd: Claude Code prices by the model it asked for,
      // the credential endpoint by what the API reports it used, and the
      // endpoint's figure is the one the job is charged and stopped by.
      claude::build_argv(binary.flags,
                         {spec.tools, settings_path, claude::result_schema().dump(), 0, settings.claude.model}));
  spec.files.push_back(
      {claude::settings_name, claude::build_settings({settings.claude.allow_bash, settings.run.dependency_dirs,
                                                      sandbox::inside::work_tree, sandbox::inside::home})
                                      .dump(2) +
                                  "\n"});
  spec.mounts.push_back({sandbox::MountKind::read_only_bind, binary.path, claude::binary_inside});
  spec.uses_api = true;
  spec.env = {
      // The credential endpoint; the real credential stays on the host.
      {"ANTHROPIC_BASE_URL", task.api->base_url},
      {sentinel_variable(task.api->auth), task.api->sentinel},
      {"CLAUDE_CONFIG_DIR", claude::config_dir_inside},
      {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
      {"DISABLE_AUTOUPDATER", "1"},
      {"DISABLE_TELEMETRY", "1"},
      {"DISABLE_ERROR_REPORTING", "1"},
      // Claude Code's default retries take minutes to give up on a dead
      // endpoint; two retries still ride out a brief overload.
      {"CLAUDE_CODE_MAX_RETRIES", "2"},
  };
  spec.stdin_data = claude::build_prompt({task.prompt, settings.claude.allow_bash, sandbox::inside::work_tree});
  spec.structured_stdout = true;
  // Claude Code runs Bash commands, and only those, in its own bubblewrap.
  spec.nested_sandbox = !settings.claude.allow_bash.empty();
  spec.record = {"claude", binary.path, binary.version, settings.claude.model};
  return spec;
}

std::unique_ptr<WorkerSession> ClaudeExecutor::start_session(const WorkerSpec& spec, bool show_progress,
                                                             const SessionLimits& limits) const {
  return std::make_unique<ClaudeSession>(spec.tools, show_progress, limits);
}

}  // namespace mullet::executors
