#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "util/fs.hpp"

namespace mullet::cli {
namespace {

int log(const std::string& job_name) {
  const git::Repository repo = open_repository();
  const jobs::JobStore store(repo);
  const auto job = store.find(job_name);
  std::optional<std::string> text;
  // While the job runs, its output is only in the scratch directory.
  if (jobs::effective_state(job.record) == jobs::JobState::running) {
    text = util::read_file_if_exists(jobs::job_paths(repo, job.record.id).worker_log);
  }
  if (!text) text = store.read_file(job, "worker.log");
  std::cout << text.value_or("");
  return 0;
}

}  // namespace

void add_log_command(CLI::App& app, Action& chosen) {
  auto job = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("log", "Print the worker's output");
  sub->add_option("JOB", *job, "Job id or unique prefix")->required();
  sub->callback([job, &chosen] { chosen = [job] { return log(*job); }; });
}

}  // namespace mullet::cli
