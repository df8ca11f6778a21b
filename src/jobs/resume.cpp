#include "jobs/resume.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "executors/executor.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/run_to_end.hpp"
#include "jobs/slots.hpp"
#include "jobs/store.hpp"
#include "sandbox/runner.hpp"
#include "util/fs.hpp"

namespace mullet::jobs {
bool resumable(JobState state) {
  return state == JobState::interrupted || state == JobState::failed || state == JobState::cancelled;
}

RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request) {
  const auto executor = executors::make_executor(settings.run.executor);
  JobStore store(repo);
  const auto found = store.find(job_name);
  const JobState state = effective_state(found.record);
  if (!resumable(state)) {
    throw usage_error("job " + found.record.id + " is " + state_name(state) + "; only an interrupted, failed or " +
                          "cancelled job can be resumed",
                      state == JobState::running ? "wait for it: git mullet wait " + found.record.id : "");
  }
  const std::string prompt = found.record.prompt;
  const std::optional<ResolvedApi> api =
      executor->needs_api() ? std::optional<ResolvedApi>(resolve_worker_api(settings, *executor)) : std::nullopt;
  const auto spec = executor->prepare({prompt, settings, jobs_directory(repo), api ? &api->access : nullptr});
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);

  // Claim the job: the compare-and-swap on its ref lets one resume win.
  const auto claimed = store.update(found.record.id, [&](JobRecord& stored) {
    const JobState now = effective_state(stored);
    if (!resumable(now)) {
      throw usage_error("job " + stored.id + " is " + state_name(now) + " now; it cannot be resumed");
    }
    stored.state = JobState::running;
    stored.error.clear();
    stored.finished_at.clear();
    stored.runner = current_runner();
    stored.executor = spec.record;
  });
  JobRecord record = claimed.record;
  if (request.on_created) request.on_created(record.id);

  // Continue from the last snapshot in a fresh clone of it: whatever the
  // interrupted worker left unsnapshotted is not trusted.
  const JobPaths paths = job_paths(repo, record.id);
  util::remove_tree(paths.git_dir);
  util::remove_tree(paths.work_tree);
  util::remove_tree(paths.gate);
  const git_oid start = git::oid_from_string(record.result.empty() ? record.base : record.result);
  const std::string resumed_prompt =
      prompt + (record.result.empty()
                    ? std::string()
                    : "\n\n---\nThis task was started before and interrupted; the work tree holds the work done so "
                      "far. Continue from there.\n");
  return run_to_end(repo, settings, store, record, request, *executor, api, start, resumed_prompt);
}

}  // namespace mullet::jobs
