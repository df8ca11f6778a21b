#include "cli/app.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/complete.hpp"
#include "cli/logging.hpp"
#include "cli/usage.hpp"
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
    "  3  refused by policy or by the sandbox; nothing was run\n"
    "Each command's -h lists the codes it returns.\n";

const Command commands[] = {
    {"run", add_run_command},         {"list", add_list_command},     {"show", add_show_command},
    {"diff", add_diff_command},       {"log", add_log_command},       {"merge", add_merge_command},
    {"discard", add_discard_command}, {"config", add_config_command}, {"doctor", add_doctor_command},
    {"resume", add_resume_command},   {"wait", add_wait_command},     {"stop", add_stop_command},
    {"shell", add_shell_command},
};

// What each command's exit codes mean, as its -h, --dump-cli-json and the
// man page's EXIT STATUS say; a command missing here fails the drift test
// (tests/e2e/test_cli_surface.sh). Any command returns 1 when git-mullet
// itself fails; the lists name 1 where the command has a reason of its own.
const std::vector<std::pair<std::string, std::vector<ExitCodeMeaning>>> exit_codes = {
    {"run",
     {{0, "the job succeeded, with or without changes (with nodes: a node passed every gate)"},
      {1, "the job failed, was cancelled or was interrupted (with nodes: no node passed)"},
      {2,
       "usage or bad input (an unknown job, or a running one, for --continue; --nodes out of 1..16, or with "
       "--node); nothing was changed"},
      {3, "refused by policy or by the sandbox; nothing was run"}}},
    {"list", {{0, "success"}, {2, "usage, or not in a git repository"}}},
    {"show", {{0, "success"}, {2, "usage, an unknown job or node, or a damaged record"}}},
    {"diff",
     {{0, "success"},
      {1, "git diff failed"},
      {2, "usage, a refused option, an unknown job or node, or a damaged record"}}},
    {"log", {{0, "success"}, {2, "usage, an unknown job or node, or a damaged record"}}},
    {"merge",
     {{0, "the branch was created"},
      {2,
       "usage, an unknown job or node, nothing to merge, a job that did not succeed (of several nodes: none "
       "passed every gate) or a branch that exists"}}},
    {"discard",
     {{0, "the jobs were discarded"},
      {1, "its record kept changing"},
      {2, "usage, an unknown job, a running job without --force, or a confirmation declined or not given"}}},
    {"config",
     {{0, "success"},
      {2, "usage, or an invalid configuration file"},
      {3, "the repository's .mullet.toml widens a wall"}}},
    {"doctor", {{0, "jobs can run here"}, {2, "usage, or an invalid configuration"}, {3, "a required check failed"}}},
    {"resume",
     {{0, "the job succeeded, with or without changes"},
      {1, "the job failed, was cancelled or was interrupted"},
      {2, "usage, an unknown job or node, or a job (node) that cannot be resumed"},
      {3, "refused by policy or by the sandbox; nothing was run"}}},
    {"wait",
     {{0, "the job succeeded, with or without changes"},
      {1, "the job failed, was cancelled or was interrupted, or --timeout passed"},
      {2, "usage, an unknown job or a damaged record"},
      {3, "the job was refused"}}},
    {"stop",
     {{0, "the job ended, cancelled, with its snapshot"},
      {1, "it had not ended when --timeout passed, or it was discarded meanwhile"},
      {2, "usage, an unknown job, or a job that is not running"},
      {3, "another user's git-mullet runs it"}}},
    {"shell",
     {{0, "the shell exited 0 (with --record: its tree recorded, or nothing changed)"},
      {1, "the shell exited non-zero or was stopped, or its tree could not be recorded"},
      {2, "usage, an unknown job, a running job or a damaged record"},
      {3, "refused by policy or by the sandbox; nothing was run"}}},
    {"help", {{0, "success"}, {2, "an unknown command"}}},
};

// `git mullet help [COMMAND]`: COMMAND's help, as `COMMAND --help` prints it.
void add_help_command(CLI::App& app, Action& chosen) {
  auto name = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("help", "Show the help of git mullet or of one command (as COMMAND --help)");
  sub->add_option("COMMAND", *name, "The command");
  sub->callback([name, &app, &chosen] {
    chosen = [name, &app] {
      if (name->empty()) {
        // app.help() would print the chosen command's: this one's.
        std::cout << app.get_formatter()->make_help(&app, "git mullet", CLI::AppFormatMode::Normal);
        return 0;
      }
      const auto names = command_names(app);
      if (std::find(names.begin(), names.end(), *name) == names.end()) {
        std::cerr << unknown_command_message(app, *name);
        return static_cast<int>(ExitCode::usage);
      }
      std::cout << app.get_subcommand(*name)->help("git mullet");
      return 0;
    };
  });
}

// Mistakes CLI11 would report as something else ("A subcommand is
// required"): an unknown word or option before any command.
std::optional<std::string> check_first_word(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty()) return std::nullopt;
  const std::string& first = args.front();
  if (first.empty() || first[0] != '-') {
    const auto names = command_names(app);
    if (std::find(names.begin(), names.end(), first) != names.end()) return std::nullopt;
    return unknown_command_message(app, first);
  }
  if (first == "-h" || first == "--help" || first == "--version") return std::nullopt;
  return "git mullet: " + describe_unexpected(app, {first}) + " (see 'git mullet -h')\n";
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
  // The shell completions' question: not a user command either.
  if (argc == 3 && std::string(argv[1]) == "__complete-jobs") return complete_jobs(argv[2]);

  CLI::App app("git-mullet: delegate a coding task to an untrusted worker in a sandbox, get a branch back",
               "git mullet");
  app.formatter(std::make_shared<HelpFormatter>());
  app.footer(exit_codes_help);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("git-mullet ") + MULLET_VERSION);
  Action chosen;
  for (const auto& command : commands) command.add(app, chosen);
  add_help_command(app, chosen);
  for (const auto& [name, codes] : exit_codes) {
    for (CLI::App* sub : app.get_subcommands([&name = name](CLI::App* sub) { return sub->get_name() == name; })) {
      sub->footer(exit_codes_footer(codes));
    }
  }

  const std::vector<std::string> args(argv + 1, argv + argc);
  // For the drift test: every command and option, as the parser has them.
  if (args.size() == 1 && args[0] == "--dump-cli-json") {
    std::cout << describe_cli(app, exit_codes).dump(2) << "\n";
    return 0;
  }
  // A dispatched job's node side: the job's id only, never a user command line.
  if (argc == 3 && std::string(argv[1]) == "__run-dispatched") {
    chosen = [id = std::string(argv[2])] { return run_dispatched(id); };
  } else if (const auto mistake = check_first_word(app, args)) {
    std::cerr << *mistake;
    return static_cast<int>(ExitCode::usage);
  } else {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
      if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
      std::cerr << describe_parse_error(app, error, args) << "\n";
      return static_cast<int>(ExitCode::usage);
    }
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
