#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct DiscardOptions {
  std::string job;
  bool force = false;
};

void stop_runner(const jobs::RunnerRecord& runner) {
  ::kill(runner.pid, SIGTERM);
  for (int waited = 0; waited < 300 && jobs::runner_alive(runner); ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (jobs::runner_alive(runner)) ::kill(runner.pid, SIGKILL);
}

int discard(const DiscardOptions& options) {
  const git::Repository repo = open_repository();
  jobs::JobStore store(repo);
  const std::string id = store.resolve(options.job);
  std::optional<jobs::StoredJob> job;
  try {
    job = store.load(id);
  } catch (const jobs::DamagedRecord&) {
    // Still discarded; its runner fields are not trusted to name a process.
  }
  if (job && jobs::effective_state(job->record) == jobs::JobState::running) {
    if (!options.force) {
      throw usage_error("job " + id + " is still running", "pass --force to stop it and discard it");
    }
    stop_runner(job->record.runner);
  }
  util::remove_tree(jobs::job_paths(repo, id).root);
  // The runner we stopped may have written its last record meanwhile.
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto current = store.ref_target(id);
    if (!current) break;
    if (store.remove(id, *current)) {
      std::cout << util::terminal_safe("discarded job " + id +
                                       "\n  until git prunes it, it can be restored with:\n  git update-ref "
                                       "refs/mullet/jobs/" +
                                       id + " " + git::oid_to_string(*current) + "\n")
                << "  (discarded jobs are listed by `git reflog refs/mullet/discarded`)\n";
      return 0;
    }
  }
  throw failure("cannot discard job " + id + ": its record keeps changing");
}

}  // namespace

void add_discard_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<DiscardOptions>();
  CLI::App* sub = app.add_subcommand("discard", "Delete a job's scratch directories and refs");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--force", options->force, "Stop the job first if it is running");
  sub->callback([options, &chosen] { chosen = [options] { return discard(*options); }; });
}

}  // namespace mullet::cli
