#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "git/pristine.hpp"
#include "jobs/dispatch.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/stale_cgroups.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct DiscardOptions {
  std::vector<std::string> jobs;
  std::vector<std::string> states;
  bool all = false;
  bool yes = false;
  bool force = false;
};

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return util::format_decimal(value, 1) + " " + units[unit];
}

// The job's state as list shows it; "damaged" when its record cannot be read.
std::string state_of(const jobs::JobStore& store, const std::string& id, std::optional<jobs::StoredJob>& job) {
  try {
    job = store.load(id);
  } catch (const jobs::DamagedRecord&) {
    // Still discarded; its runner fields are not trusted to name a process.
    return "damaged";
  }
  return job ? jobs::state_name(jobs::effective_state(job->record)) : "damaged";
}

// A dispatched job (queued or running) is cancelled through its scheduler
// when the scheduler's job is this repository's; a record copied from
// another repository names that one's job, which runs on untouched while
// the copy goes. A scheduler that does not answer keeps the job: what a
// node may still be writing is not removed under it.
void stop_dispatched_for_discard(const git::Repository& repo, jobs::JobStore& store, const jobs::JobRecord& record) {
  const jobs::DispatchRecord& dispatch = *record.dispatch;
  if (!dispatch.scheduler_id.empty()) {
    const auto engine = jobs::make_dispatch_engine(dispatch.engine);
    const jobs::SchedulerView view = engine->status(dispatch.scheduler_id, record.id);
    if (view.status == jobs::SchedulerStatus::unknown) {
      throw refused_error("cannot ask the scheduler about job " + record.id + " (" + dispatch.scheduler_id +
                              "), which may still run; nothing was discarded",
                          "try again when the scheduler answers (scontrol show job " + dispatch.scheduler_id + ")");
    }
    if (!jobs::is_this_job(view, jobs::repository_key(repo), record.id)) return;
  }
  stop_dispatched(repo, store, record, std::chrono::seconds(30));
}

// Stops a running job (with --force), so its runner cannot write to what is
// being removed.
void stop_if_running(const git::Repository& repo, jobs::JobStore& store, const std::string& id,
                     const std::optional<jobs::StoredJob>& job, bool force) {
  if (!job) return;
  const jobs::JobState state = jobs::effective_state(job->record);
  if (!jobs::is_active(state)) return;
  if (!force) {
    throw usage_error("job " + id + " is still " + jobs::state_name(state),
                      "stop it first (git mullet stop " + id + "), or pass --force to stop it and discard it");
  }
  if (job->record.dispatch) {
    stop_dispatched_for_discard(repo, store, job->record);
    return;
  }
  // A record copied from another repository names that one's runner: the
  // copy goes, the job it names runs on untouched.
  if (jobs::runner_of_another_repository(job->record.runner, jobs::repository_key(repo))) return;
  const auto stopped =
      jobs::stop_runner(job->record.runner, std::chrono::seconds(30), [] { return util::cancel_requested(); });
  if (stopped == jobs::RunnerStop::not_permitted) {
    throw refused_error("job " + id + " is run by a process this user may not signal");
  }
  if (stopped == jobs::RunnerStop::still_running) {
    throw failure("job " + id + " did not stop within 30 s", "try again, or stop it with: git mullet stop " + id);
  }
}

// Removes one job; returns the bytes of scratch space it held.
std::uint64_t discard_one(const git::Repository& repo, jobs::JobStore& store, const std::string& id,
                          const std::optional<jobs::StoredJob>& job, bool force, const std::string& cgroup_setting) {
  stop_if_running(repo, store, id, job, force);
  // What a runner killed before its end left of the job's sandboxes.
  jobs::remove_job_cgroups(repo, id, cgroup_setting);
  const std::string root = jobs::job_paths(repo, id).root;
  const std::uint64_t held = util::exists(root) ? util::disk_usage(root) : 0;
  util::remove_tree(root);
  // The last job on a base takes its pristine checkout along.
  git::remove_unclaimed_pristines(repo, jobs::jobs_directory(repo));
  // The runner we stopped may have written its last record meanwhile.
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto current = store.ref_target(id);
    if (!current) break;
    if (store.remove(id, *current)) {
      std::cout << util::terminal_safe("discarded job " + id +
                                       "\n  until git prunes it, it can be restored with:\n  git update-ref "
                                       "refs/mullet/jobs/" +
                                       id + " " + git::oid_to_string(*current) + "\n");
      return held;
    }
  }
  throw failure("cannot discard job " + id + ": its record keeps changing");
}

// --state and --all pick many jobs at once: a person confirms them, a script
// says --yes.
void confirm(const std::vector<std::string>& chosen, const std::string& what) {
  if (::isatty(STDIN_FILENO) == 0) {
    throw usage_error("refusing to discard " + what + " without --yes (stdin is not a terminal to ask on)",
                      "add --yes to discard them");
  }
  std::cerr << "this discards " << what << ":\n";
  for (const auto& line : chosen) std::cerr << "  " << util::terminal_safe(line) << "\n";
  std::cerr << "discard them? [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  answer = util::trim(answer);
  if (answer != "y" && answer != "Y" && answer != "yes") throw usage_error("nothing was discarded");
}

int discard(const DiscardOptions& options) {
  if (options.jobs.empty() && options.states.empty() && !options.all) {
    throw usage_error("discard needs JOB..., --state STATE or --all");
  }
  if (options.all && !options.states.empty()) throw usage_error("--all and --state cannot be combined");
  const git::Repository repo = open_repository();
  jobs::JobStore store(repo);

  // Jobs named by id, then those --state or --all pick (running ones only
  // when asked for by name or by --state running, with --force).
  std::vector<std::string> ids;
  for (const auto& prefix : options.jobs) ids.push_back(store.resolve(prefix));
  std::vector<std::string> picked;
  std::size_t running_skipped = 0;
  if (options.all || !options.states.empty()) {
    auto known = store.ids();
    std::sort(known.begin(), known.end());
    for (const auto& id : known) {
      std::optional<jobs::StoredJob> job;
      const std::string state = state_of(store, id, job);
      const bool wanted =
          options.all || std::find(options.states.begin(), options.states.end(), state) != options.states.end();
      if (!wanted) continue;
      if ((state == "running" || state == "queued") && !(options.force && !options.all)) {
        ++running_skipped;
        continue;
      }
      picked.push_back(id + "  " + state + "  " + (job ? util::first_line(job->record.title, 60) : ""));
      ids.push_back(id);
    }
    if (!picked.empty() && !options.yes) {
      confirm(picked, std::to_string(picked.size()) + (picked.size() == 1 ? " job" : " jobs"));
    }
  }
  // The user's [sandbox] cgroup says where the sandboxes' cgroups are.
  const std::string cgroup_setting = load_config(&repo, std::nullopt).settings().sandbox.cgroup;
  std::set<std::string> done;
  std::uint64_t freed = 0;
  for (const auto& id : ids) {
    if (!done.insert(id).second) continue;
    std::optional<jobs::StoredJob> job;
    state_of(store, id, job);
    freed += discard_one(repo, store, id, job, options.force, cgroup_setting);
  }
  jobs::sweep_stale_cgroups(repo, store, cgroup_setting);
  if (running_skipped > 0) {
    std::cerr << "git mullet: left " << running_skipped << " running job" << (running_skipped == 1 ? "" : "s")
              << " alone\nhint: stop " << (running_skipped == 1 ? "it" : "them")
              << " first (git mullet stop JOB), or pick running jobs with --state running --force\n";
  }
  if (done.empty()) {
    std::cerr << "git mullet: no job to discard\n";
    return 0;
  }
  std::cout << "freed " << format_bytes(freed) << " of scratch space\n"
            << "  (discarded jobs are listed by `git reflog refs/mullet/discarded`)\n";
  return 0;
}

}  // namespace

void add_discard_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<DiscardOptions>();
  CLI::App* sub = app.add_subcommand("discard", "Delete jobs' scratch directories and refs");
  sub->add_option("JOB", options->jobs, "Job ids or unique prefixes");
  sub->add_option("--state", options->states, "Every job in STATE (repeat it or give a comma list)")
      ->delimiter(',')
      ->type_name("STATE")
      ->check(CLI::IsMember(
          {"running", "succeeded", "no_changes", "failed", "refused", "cancelled", "interrupted", "damaged"}));
  sub->add_flag("--all", options->all, "Every job that is not running");
  sub->add_flag("-y,--yes", options->yes, "Do not ask before discarding what --state or --all picked");
  sub->add_flag("--force", options->force, "Stop a running job first (named, or picked by --state running)");
  sub->callback([options, &chosen] { chosen = [options] { return discard(*options); }; });
}

}  // namespace mullet::cli
