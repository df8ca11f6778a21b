#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/id.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct ResumeOptions {
  std::string job;
  bool json = false;
  bool quiet = false;
};

int resume(const ResumeOptions& options) {
  jobs::RunRequest request;
  request.show_worker_output = !options.quiet && !options.json;
  const auto outcome = take_up_job(options.job, request);
  print_run_outcome(outcome, options.json);
  return static_cast<int>(outcome.exit_code);
}

}  // namespace

int run_dispatched(const std::string& id) {
  // The job's whole id, never a prefix: the node runs the job it was given.
  if (!jobs::is_valid_job_id(id))
    throw usage_error("__run-dispatched: '" + util::terminal_safe(id) + "' is not a job id");
  jobs::RunRequest request;
  request.dispatched = true;
  // The batch job's output is a file nobody watches live; the record and
  // the job's logs hold what happened.
  request.show_worker_output = false;
  const auto outcome = take_up_job(id, request);
  print_run_outcome(outcome, false);
  return static_cast<int>(outcome.exit_code);
}

void add_resume_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* sub =
      app.add_subcommand("resume", "Continue an interrupted, failed or cancelled job from its last snapshot");
  sub->add_option("JOB", options->job, "Job id or unique prefix; JOB/N for node N of a job of several")->required();
  sub->add_flag("--json", options->json, "Print the job record as one JSON object");
  sub->add_flag("-q,--quiet", options->quiet, "Do not echo the worker's output");
  sub->callback([options, &chosen] { chosen = [options] { return resume(*options); }; });
}

}  // namespace mullet::cli
