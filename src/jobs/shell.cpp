#include "jobs/shell.hpp"

#include <unistd.h>

#include "git/handles.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/phases.hpp"
#include "jobs/run_to_end.hpp"
#include "jobs/sandbox_objects.hpp"
#include "jobs/slots.hpp"
#include "jobs/snapshot_attempt.hpp"
#include "jobs/stale_cgroups.hpp"
#include "jobs/store.hpp"
#include "jobs/workspace.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace mullet::jobs {
namespace {

// Takes the shell's tree as a new attempt on top of `start`, if the job is
// still where the shell found it.
void record_shell_tree(const git::Repository& repo, const config::Settings& settings, const JobRecord& found,
                       const SandboxDirs& dirs, const git_oid& start, ShellOutcome& outcome) {
  JobRecord draft = found;
  AttemptRecord attempt;
  attempt.number = draft.attempts.empty() ? 1 : draft.attempts.back().number + 1;
  attempt.kind = AttemptKind::shell;
  draft.attempts.push_back(attempt);
  const git_oid commit = snapshot_attempt(repo, dirs, draft, attempt.number, start, {},
                                          {settings.limits.file_mb.bytes(), settings.limits.disk_mb.bytes()});
  const git_oid tree = repo.tree_of(commit);
  const git_oid start_tree = repo.tree_of(start);
  if (git_oid_cmp(&tree, &start_tree) == 0) {
    outcome.unchanged = true;
    return;
  }
  JobStore store(repo);
  store.update(found.id, [&](JobRecord& stored) {
    if (effective_state(stored) == JobState::running || stored.result != found.result ||
        stored.attempts.size() != found.attempts.size()) {
      throw failure("job " + found.id + " changed while the shell ran; the shell's tree was not recorded",
                    "open a new shell on it: git mullet shell --record " + found.id);
    }
    stored.attempts.push_back(draft.attempts.back());
    stored.result = draft.result;
    stored.snapshot_warnings = draft.snapshot_warnings;
    // The job did what it was asked without changes; now it has some. A
    // failed job stays failed: no gate judged the shell's tree.
    if (stored.state == JobState::no_changes && !stored.result.empty()) stored.state = JobState::succeeded;
    // And the other way: a shell that undid every change leaves no result.
    if (stored.state == JobState::succeeded && stored.result.empty()) stored.state = JobState::no_changes;
    stored.changes = result_changes(repo, stored);
  });
  outcome.recorded = draft.attempts.back();
}

}  // namespace

std::vector<std::string> default_shell_command() {
  // The sandbox's root is the host's /usr, /bin...: what is found here is there.
  if (!util::find_in_path("bash", sandbox::inside::path).empty()) return {"bash"};
  return {"sh"};
}

ShellOutcome open_shell(const git::Repository& repo, const config::Settings& settings, const ShellRequest& request,
                        const sandbox::RunIo& io) {
  sandbox::find_bwrap();
  const JobStore store(repo);
  const JobRecord found = store.find(request.job).record;
  // Which node's tree, and where its attempt would go, is not for a job of several to guess.
  if (!found.nodes.empty()) {
    throw usage_error("job " + found.id + " has several nodes; a shell opens on a job of one",
                      "take one node's result as a branch (git mullet merge " + found.id +
                          "/N) and start a job from it, or look with git mullet diff " + found.id + "/N");
  }
  if (is_active(effective_state(found))) {
    throw usage_error("job " + found.id + " is running; a shell opens on a job that has ended",
                      "wait for it (git mullet wait " + found.id + ") or stop it (git mullet stop " + found.id + ")");
  }
  std::optional<UidRange> uids;
  ClaimedUid claimed;
  if (::geteuid() == 0) {
    claimed = claim_sandbox_uid(sandbox_uid_range(settings.sandbox));
    uids = UidRange{claimed.uid, 1};
  }
  ::umask(022);
  // The last snapshot, checked out afresh in a directory of this shell's own.
  const git_oid start = git::oid_from_string(found.result.empty() ? found.base : found.result);
  const JobPaths paths = job_paths(repo, found.id);
  make_private_job_dir(repo, found.id);
  if (!util::exists(paths.empty_file)) util::write_file(paths.empty_file, "", 0444);
  const util::TempDir shell_dir(paths.root, "shell-");
  const SandboxDirs dirs{
      shell_dir.path() + "/work", shell_dir.path() + "/git", shell_dir.path() + "/home", std::nullopt, {}};
  const SandboxObjects objects =
      prepare_sandbox_objects(repo, settings.sandbox.history, git::oid_from_string(found.base));
  const std::optional<uid_t> sandbox_uid = uids ? std::optional<uid_t>(uids->first) : std::nullopt;
  make_sandbox_clone(repo, start, dirs, sandbox_uid, objects);

  PhaseSpec phase;
  phase.name = "shell";
  phase.command = request.command.empty() ? default_shell_command() : request.command;
  // No grants, no API: no network at all.
  sandbox::Plan plan = plan_for(settings, paths, dirs, objects, phase, "", "", uids);
  plan.limits.wall_seconds = 0;
  plan.limits.inactivity_seconds = 0;
  // The job's own sandboxes may run meanwhile (a resumed job): a name of its own.
  plan.limits.cgroup_name = shell_cgroup_name(repository_key(repo), found.id);
  plan.controlling_terminal = request.terminal;
  plan.feeds_stdin = !request.terminal;

  ShellOutcome outcome;
  outcome.id = found.id;
  try {
    outcome.run = sandbox::run_sandboxed(plan, io);
  } catch (...) {
    util::strip_unsafe_modes(dirs.work_tree);
    util::strip_unsafe_modes(dirs.home);
    throw;
  }
  // On the host, nosuid does not hold.
  util::strip_unsafe_modes(dirs.work_tree);
  util::strip_unsafe_modes(dirs.home);
  if (request.record) record_shell_tree(repo, settings, found, dirs, start, outcome);
  return outcome;
}

}  // namespace mullet::jobs
