// `git mullet stop JOB`: cancels a running job, detached or not, and waits
// until it has ended as `cancelled`, with what its worker did so far
// snapshotted as its result.
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "jobs/dispatch.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/store.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

void stop_here(const git::Repository& repo, const jobs::JobStore& store, const jobs::JobRecord& record,
               std::chrono::milliseconds bound, const std::function<Error(const jobs::JobRecord&)>& not_running);

struct StopOptions {
  std::string job;
  bool json = false;
  double timeout = 120;  // seconds
};

int stop(const StopOptions& options) {
  const git::Repository repo = open_repository();
  jobs::JobStore store(repo);
  const jobs::StoredJob job = store.find(options.job);
  const std::string& id = job.record.id;
  const std::function<Error(const jobs::JobRecord&)> not_running = [&](const jobs::JobRecord& record) {
    return usage_error("job " + id + " is not running (it is " + jobs::state_name(jobs::effective_state(record)) + ")",
                       "see it with: git mullet show " + id);
  };
  if (!jobs::is_active(jobs::effective_state(job.record))) throw not_running(job.record);
  const auto bound = std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout * 1000));
  if (job.record.dispatch) {
    stop_dispatched(repo, store, job.record, bound);
  } else {
    stop_here(repo, store, job.record, bound, not_running);
  }
  const auto ended = store.load(id);
  if (!ended) throw failure("job " + id + " was discarded while it stopped");
  jobs::JobRecord shown = ended->record;
  shown.state = jobs::effective_state(shown);
  // Its error is "cancelled by signal": this command sent it, and says so.
  if (shown.state == jobs::JobState::cancelled) shown.error.clear();
  print_job_outcome(shown, "", options.json, false);
  return 0;
}

// A job run by a git-mullet on this machine: signalled, and waited for.
void stop_here(const git::Repository& repo, const jobs::JobStore& store, const jobs::JobRecord& record,
               std::chrono::milliseconds bound, const std::function<Error(const jobs::JobRecord&)>& not_running) {
  const std::string& id = record.id;
  const auto& job = record;
  if (jobs::runner_of_another_repository(job.runner, jobs::repository_key(repo))) {
    throw refused_error("job " + id +
                            " is run by the git-mullet of another repository on this host (its record was copied "
                            "here); it is not signalled",
                        "stop it in the repository it runs in");
  }
  switch (jobs::stop_runner(job.runner, bound, [] { return util::cancel_requested(); })) {
    case jobs::RunnerStop::not_running: {
      // It ended on its own meanwhile: said as it is.
      const auto now = store.load(id);
      if (!now) throw failure("job " + id + " was discarded meanwhile");
      throw not_running(now->record);
    }
    case jobs::RunnerStop::not_permitted:
      throw refused_error(
          "job " + id + " is run by a process (pid " + std::to_string(job.runner.pid) + ") this user may not signal",
          "stop it as the user who started it");
    case jobs::RunnerStop::still_running:
      throw failure("job " + id + " has not stopped yet (its git-mullet, pid " + std::to_string(job.runner.pid) +
                        ", is still running)",
                    "see where it is with `git mullet show " + id + "`, or try again: git mullet stop " + id);
    case jobs::RunnerStop::ended: break;
  }
}

}  // namespace

void add_stop_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<StopOptions>();
  CLI::App* sub = app.add_subcommand(
      "stop", "Cancel a running job and wait until it has ended (as cancelled, with what it did so far)");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--json", options->json, "Print the stopped job's record as one JSON object");
  sub->add_option("--timeout", options->timeout, "Wait at most SECONDS for it to end (default 120; exit 1)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("SECONDS");
  sub->callback([options, &chosen] { chosen = [options] { return stop(*options); }; });
}

}  // namespace mullet::cli
