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
void stop_dispatched(const git::Repository& repo, jobs::JobStore& store, const jobs::JobRecord& record,
                     std::chrono::milliseconds bound);

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

// A dispatched job: cancelled through its scheduler. One still queued is
// recorded as cancelled here (the compare-and-swap loses to a node that
// claimed it meanwhile); one a node runs gets SIGTERM there and writes its
// own final record, which is waited for.
void stop_dispatched(const git::Repository& repo, jobs::JobStore& store, const jobs::JobRecord& record,
                     std::chrono::milliseconds bound) {
  const std::string& id = record.id;
  const auto engine = jobs::make_dispatch_engine(record.dispatch->engine);
  const std::string& scheduler_id = record.dispatch->scheduler_id;
  // The id must be this job's before anything is marked (cancel checks it
  // again): a record fetched from elsewhere may name anyone's job.
  const std::string key = jobs::repository_key(repo);
  if (!scheduler_id.empty()) jobs::require_this_job(engine->status(scheduler_id, id), scheduler_id, key, id);
  // Marked first: the node that gets the scheduler's SIGTERM ends it
  // cancelled, not interrupted.
  store.update(id, [](jobs::JobRecord& stored) {
    if (stored.dispatch) stored.dispatch->reason = jobs::stop_requested_reason;
  });
  // A job array's id cancels all its tasks.
  if (!scheduler_id.empty()) engine->cancel(scheduler_id, key, id);
  store.update(id, [](jobs::JobRecord& stored) {
    if (!stored.nodes.empty()) {
      // A job array's nodes no task claimed: none will now.
      bool ended = false;
      for (auto& node : stored.nodes) {
        if (node.state != jobs::JobState::queued) continue;
        node.state = jobs::JobState::cancelled;
        node.error = "cancelled before it started";
        node.finished_at = util::now_utc();
        ended = true;
      }
      jobs::settle_job(stored);
      if (ended && !jobs::is_active(stored.state)) stored.finished_at = util::now_utc();
      return;
    }
    if (stored.state != jobs::JobState::queued) return;
    stored.state = jobs::JobState::cancelled;
    stored.error = "cancelled before it started";
    stored.finished_at = util::now_utc();
  });
  const std::int64_t deadline = util::monotonic_ms() + bound.count();
  while (true) {
    const auto now = store.load(id);
    if (!now) throw failure("job " + id + " was discarded while it stopped");
    if (!jobs::is_active(jobs::effective_state(now->record))) return;
    if (util::monotonic_ms() >= deadline || util::cancel_requested()) {
      throw failure("job " + id + " has not stopped yet (the scheduler was asked to cancel it)",
                    "see where it is with `git mullet show " + id + "`, or try again: git mullet stop " + id);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
