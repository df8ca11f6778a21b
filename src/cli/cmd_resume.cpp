#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/resume.hpp"
#include "jobs/run_flags.hpp"
#include "jobs/store.hpp"

namespace mullet::cli {
namespace {

struct ResumeOptions {
  std::string job;
  bool json = false;
  bool quiet = false;
};

int resume(const ResumeOptions& options) {
  const git::Repository repo = open_repository();
  const auto job = jobs::JobStore(repo).find(options.job);
  const git_oid base = git::oid_from_string(job.record.base);
  // The configuration as a new job from the same base would have it, plus
  // what the job's own command line added (its command, setup, gates...).
  config::Config config = load_config(&repo, base);
  jobs::RunRequest request;
  request.gates = jobs::restore_run_flags(job.record, config, jobs::local_run_flags(repo, job.record.id));
  request.show_worker_output = !options.quiet && !options.json;
  const auto outcome = jobs::resume_job(repo, config.settings(), job.record.id, request);
  print_run_outcome(outcome, options.json);
  return static_cast<int>(outcome.exit_code);
}

}  // namespace

void add_resume_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* sub =
      app.add_subcommand("resume", "Continue an interrupted, failed or cancelled job from its last snapshot");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--json", options->json, "Print the job record as one JSON object");
  sub->add_flag("-q,--quiet", options->quiet, "Do not echo the worker's output");
  sub->callback([options, &chosen] { chosen = [options] { return resume(*options); }; });
}

}  // namespace mullet::cli
