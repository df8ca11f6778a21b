#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/run_job.hpp"
#include "sandbox/plan.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct RunOptions {
  std::string message;
  std::string message_file;
  std::string base;
  std::string executor;
  std::string command;
  std::string title;
  std::string setup;
  bool json = false;
  bool dry_run = false;
  bool quiet = false;
};

std::string read_prompt(const RunOptions& options) {
  if (!options.message.empty() && !options.message_file.empty()) throw usage_error("give either -m or -F, not both");
  std::string prompt = options.message;
  if (!options.message_file.empty()) {
    try {
      prompt = options.message_file == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                                           : util::read_file(options.message_file);
    } catch (const Error& error) {
      throw usage_error(std::string("cannot read the task file: ") + error.what());
    }
  }
  if (util::trim(prompt).empty()) throw usage_error("no task given", "say what to do with -m TEXT or -F FILE");
  return prompt;
}

int run(const RunOptions& options) {
  const std::string prompt = read_prompt(options);
  const git::Repository repo = open_repository();
  const git_oid base = options.base.empty() ? repo.head_commit() : repo.resolve_commit(options.base);
  config::Config config = load_config(&repo, base);
  if (!options.command.empty()) {
    config.set_from_flag("run.command", options.command, "--command");
    if (options.executor.empty()) config.set_from_flag("run.executor", std::string("command"), "--command");
  }
  if (!options.executor.empty()) config.set_from_flag("run.executor", options.executor, "--executor");
  if (!options.setup.empty()) config.set_from_flag("run.setup", options.setup, "--setup");

  if (options.dry_run) {
    const auto plans = jobs::job_plans(repo, config, "NEW-JOB", prompt);
    if (options.json) {
      nlohmann::json phases = nlohmann::json::array();
      for (const auto& plan : plans) phases.push_back(sandbox::to_json(plan));
      std::cout << nlohmann::json{{"base", git::oid_to_string(base)}, {"phases", phases}}.dump(2) << "\n";
    } else {
      std::cout << "base " << git::oid_to_string(base) << "\n";
      for (const auto& plan : plans) std::cout << sandbox::describe(plan);
    }
    return 0;
  }

  jobs::RunRequest request;
  request.prompt = prompt;
  request.title = options.title;
  request.base = base;
  request.show_worker_output = !options.quiet && !options.json;
  const auto outcome = jobs::run_job(repo, config, request);
  const auto& record = outcome.record;
  if (!record.error.empty()) {
    std::cerr << "git mullet: job " << record.id << " " << jobs::state_name(record.state) << ": " << record.error
              << "\n";
    if (!outcome.hint.empty()) std::cerr << "hint: " << outcome.hint << "\n";
  }
  if (options.json) {
    std::cout << job_json(record).dump(2) << "\n";
  } else {
    std::cout << "job " << record.id << " " << jobs::state_name(record.state);
    if (!record.result.empty()) std::cout << ": result " << short_sha(record.result);
    std::cout << "\n";
    for (const auto& warning : record.snapshot_warnings) std::cout << "  warning: " << warning << "\n";
    if (!record.result.empty()) {
      std::cout << "  review:  git mullet diff " << record.id << "\n"
                << "  take it: git mullet merge " << record.id << "\n";
    }
  }
  return static_cast<int>(outcome.exit_code);
}

}  // namespace

void add_run_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Delegate a task to a worker in a sandboxed private clone");
  sub->add_option("-m,--message", options->message, "The task, as text");
  sub->add_option("-F,--file", options->message_file, "Read the task from FILE (- for stdin)");
  sub->add_option("--base", options->base, "Commit to start from (default: HEAD)");
  sub->add_option("--executor", options->executor, "Worker: claude (default) or command");
  sub->add_option("--command", options->command, "Shell command for the command executor (implies it)");
  sub->add_option("--title", options->title, "A title for the job (default: the task's first line)");
  sub->add_option("--setup", options->setup, "Shell command run in the clone before the worker, with the setup grants");
  sub->add_flag("--json", options->json, "Print the job record as one JSON object");
  sub->add_flag("--dry-run", options->dry_run, "Print each phase's sandbox plan and run nothing");
  sub->add_flag("-q,--quiet", options->quiet, "Do not echo the worker's output");
  sub->callback([options, &chosen] { chosen = [options] { return run(*options); }; });
}

}  // namespace mullet::cli
