#include "executors/opencode.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "executors/claude_stream.hpp"
#include "executors/opencode_args.hpp"
#include "executors/opencode_binary.hpp"
#include "executors/opencode_stream.hpp"
#include "executors/progress.hpp"
#include "util/clock.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors {
namespace {

class OpencodeSession final : public WorkerSession {
 public:
  OpencodeSession(bool show_progress, const SessionLimits& limits)
      : m_limits(limits), m_printer(show_progress, ::isatty(STDERR_FILENO) == 1), m_started(util::monotonic_ms()) {}

  void on_stdout(std::string_view chunk) override { take(m_splitter.feed(chunk)); }

  void on_stderr(std::string_view chunk) override {
    m_stderr.append(chunk);
    if (m_stderr.size() > std::size_t{64} * 1024) m_stderr = util::tail(m_stderr, std::size_t{32} * 1024);
    m_printer.print_text(m_stderr_shown.feed(chunk));
  }

  std::optional<sandbox::StopReason> poll() override {
    const Progress now = progress();
    m_printer.update(now);
    // opencode has no step limit of its own: this is the only one.
    if (m_limits.max_turns > 0 && now.turns > m_limits.max_turns) return sandbox::StopReason::turns;
    return std::nullopt;
  }

  WorkerOutcome finish(const sandbox::RunResult& run) override {
    take(m_splitter.finish());
    m_printer.print_text(m_stderr_shown.finish());
    m_printer.update(progress());
    m_printer.done();
    opencode::RunFacts facts;
    facts.ended_by = run.ended_by;
    facts.exit_code = run.status.code;
    facts.stderr_text = m_stderr;
    return opencode::judge(m_state, facts);
  }

 private:
  void take(const std::vector<nlohmann::json>& events) {
    for (const auto& event : events) m_state.apply(event);
    if (!events.empty()) m_printer.update(progress());
  }

  Progress progress() const {
    Progress progress;
    progress.elapsed_ms = util::monotonic_ms() - m_started;
    progress.turns = m_state.steps;
    progress.tool = m_state.tool;
    progress.cost_usd = m_state.cost_usd;
    return progress;
  }

  SessionLimits m_limits;
  claude::EventSplitter m_splitter;
  opencode::StreamState m_state;
  ProgressPrinter m_printer;
  std::int64_t m_started;
  std::string m_stderr;
  util::TerminalSafeStream m_stderr_shown;
};

}  // namespace

ApiSource OpencodeExecutor::api_source(const config::Settings& settings) const {
  const auto model = value_or_throw(opencode::parse_model(settings.opencode.model));
  ApiSource source{"[opencode] credential",
                   settings.opencode.credential,
                   "",
                   {},
                   "opencode's provider '" + util::terminal_safe(model.provider) + "'"};
  // The providers whose hosted API and key variable everyone knows; any
  // other is reached only through a [[credential]] the user names.
  if (model.provider == "anthropic") {
    source.base_url = "https://api.anthropic.com";
    source.host_variables = {{"ANTHROPIC_API_KEY", "x-api-key", "{}", ApiAuth::api_key}};
  } else if (model.provider == "openai") {
    source.base_url = "https://api.openai.com";
    source.host_variables = {{"OPENAI_API_KEY", "Authorization", "Bearer {}", ApiAuth::auth_token}};
  }
  return source;
}

WorkerSpec OpencodeExecutor::prepare(const TaskContext& task) const {
  const auto& settings = task.settings;
  const std::string real_path = value_or_throw(opencode::resolve_binary(settings.opencode.binary, util::host_path()));
  const opencode::Binary binary = opencode::probe_binary(real_path, task.cache_dir);
  if (task.api == nullptr) throw failure("internal error: the opencode executor was given no API endpoint");
  for (const auto& name : settings.sandbox.env) {
    if (opencode::is_configuration_variable(name)) {
      throw usage_error("[sandbox] env lists " + name + ", which opencode reads its configuration or a key from",
                        "remove it: git-mullet sets opencode's configuration itself");
    }
  }
  const auto model = value_or_throw(opencode::parse_model(settings.opencode.model));
  const auto config =
      opencode::build_config({model, task.api->base_url, task.api->sentinel, settings.opencode.allow_bash});

  WorkerSpec spec;
  spec.command = value_or_throw(opencode::build_argv(binary.run_flags, settings.opencode.model));
  spec.stdin_data = opencode::build_prompt({task.prompt, settings.opencode.allow_bash, sandbox::inside::work_tree});
  spec.mounts.push_back({sandbox::MountKind::read_only_bind, binary.path, opencode::binary_inside});
  // A home of its own, new each attempt: opencode imports every plugin file
  // under its config directories (and $HOME/.opencode) whatever the
  // configuration says, and setup or an earlier attempt could have written
  // one into the job's home. Nothing can guess this name beforehand.
  spec.env =
      opencode::worker_environment(config, std::string(sandbox::inside::home) + "/.opencode-" + util::random_hex(16));
  spec.uses_api = true;
  spec.structured_stdout = true;
  // opencode has no init event to check: it prints what it resolved instead.
  spec.preflight_command = opencode::debug_config_argv();
  spec.record = {"opencode", binary.path, binary.version, settings.opencode.model};
  return spec;
}

std::unique_ptr<WorkerSession> OpencodeExecutor::start_session(const WorkerSpec& /*spec*/, bool show_progress,
                                                               const SessionLimits& limits) const {
  return std::make_unique<OpencodeSession>(show_progress, limits);
}

std::string OpencodeExecutor::check_work_tree(const std::string& work_tree) const {
  // opencode 1.18.33 imports plugins (code) from these, found from its
  // working directory up, even with project configuration off, and its
  // `debug config` does not show them (docs/opencode-probe.md).
  for (const char* name : {".opencode", "opencode.json", "opencode.jsonc"}) {
    struct stat status {};
    if (::lstat((work_tree + "/" + name).c_str(), &status) == 0) {
      return std::string("the work tree has ") + name +
             ", from which opencode loads plugins (code it runs) whatever its configuration says";
    }
  }
  return {};
}

std::string OpencodeExecutor::check_preflight(const WorkerSpec& spec, std::string_view printed) const {
  const auto ours = spec.env.find(opencode::config_variable);
  if (ours == spec.env.end()) return "no configuration was given to opencode";
  return opencode::check_effective_config(printed, nlohmann::ordered_json::parse(ours->second));
}

}  // namespace mullet::executors
