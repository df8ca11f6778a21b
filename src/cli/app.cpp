#include "cli/app.hpp"

#include <signal.h>

#include <cstdlib>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "sandbox/wall_check.hpp"
#include "util/error.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

constexpr const char* exit_codes_help =
    "Exit codes:\n"
    "  0  success\n"
    "  1  the job failed (or git-mullet itself failed)\n"
    "  2  usage or bad input; nothing was changed\n"
    "  3  refused by policy or by the sandbox; nothing was run\n";

const Command commands[] = {
    {"run", add_run_command},         {"list", add_list_command},     {"show", add_show_command},
    {"diff", add_diff_command},       {"log", add_log_command},       {"merge", add_merge_command},
    {"discard", add_discard_command}, {"config", add_config_command}, {"doctor", add_doctor_command},
    {"resume", add_resume_command},   {"wait", add_wait_command},     {"stop", add_stop_command},
};

void set_up_logging() {
  auto logger = spdlog::stderr_color_mt("git-mullet");
  logger->set_pattern("git mullet [%l] %v");
  const char* level = std::getenv("GIT_MULLET_LOG");
  logger->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

// Errors often quote a record, a worker or a repository.
int report(const Error& error) {
  std::cerr << "git mullet: " << util::terminal_safe(error.what()) << "\n";
  if (!error.hint().empty()) std::cerr << "hint: " << util::terminal_safe(error.hint()) << "\n";
  return static_cast<int>(error.code());
}

}  // namespace

int run_main(int argc, char** argv) {
  // The in-sandbox helper: never parsed as a user command line.
  if (argc >= 2 && std::string(argv[1]) == "__wall-check") {
    return sandbox::wall_check_main(std::vector<std::string>(argv + 2, argv + argc));
  }
  ::signal(SIGPIPE, SIG_IGN);
  set_up_logging();

  CLI::App app("git-mullet: delegate a coding task to an untrusted worker in a sandbox, get a branch back",
               "git mullet");
  app.footer(exit_codes_help);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("git-mullet ") + MULLET_VERSION);
  Action chosen;
  for (const auto& command : commands) command.add(app, chosen);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }
  try {
    util::install_cancel_handlers();
    return chosen ? chosen() : static_cast<int>(ExitCode::usage);
  } catch (const Error& error) {
    return report(error);
  } catch (const std::exception& error) {
    return report(
        failure(std::string("internal error: ") + error.what(), "please report this with the command you ran"));
  }
}

}  // namespace mullet::cli
