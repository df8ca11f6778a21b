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
#include "util/strings.hpp"

namespace mullet::jobs {
bool resumable(JobState state) {
  return state == JobState::interrupted || state == JobState::failed || state == JobState::cancelled;
}

bool continuable(JobState state) {
  return state != JobState::running;
}

std::string continued_prompt(const JobRecord& record, const std::string& instruction) {
  // The worker's summary is its own words, given back to it: bounded, so a
  // long one does not crowd out the task.
  constexpr std::size_t summary_bytes = 16U << 10U;
  std::string prompt = record.prompt + "\n\n---\nThis task was worked on before";
  if (!record.attempts.empty()) prompt += " (" + std::to_string(record.attempts.size()) + " attempts so far)";
  prompt += record.result.empty() ? "; nothing of it was kept, so the work tree is where the task started.\n"
                                  : "; the work tree holds the result so far.\n";
  if (!record.report.summary.empty()) {
    prompt += "\nThe summary of the last attempt:\n" + util::tail(record.report.summary, summary_bytes) + "\n";
  }
  std::vector<std::string> earlier;
  for (const auto& attempt : record.attempts) {
    if (!attempt.instruction.empty()) earlier.push_back(attempt.instruction);
  }
  for (std::size_t i = 0; i < earlier.size(); ++i) {
    prompt += "\nThe user's instruction " + std::to_string(i + 1) + " after the task, already worked on:\n" +
              earlier[i] + "\n";
  }
  prompt +=
      "\n---\nThe user's new instruction. Where it differs from the task or the earlier instructions, it "
      "rules:\n" +
      instruction + "\n";
  return prompt;
}

RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request) {
  const auto executor = executors::make_executor(settings.run.executor);
  JobStore store(repo);
  const auto found = store.find(job_name);
  const bool continuing = !request.instruction.empty();
  const auto takes = [continuing](JobState state) { return continuing ? continuable(state) : resumable(state); };
  const JobState state = effective_state(found.record);
  if (!takes(state)) {
    const std::string wait_hint = "wait for it: git mullet wait " + found.record.id;
    if (continuing)
      throw usage_error("job " + found.record.id + " is still running; it cannot be continued", wait_hint);
    throw usage_error("job " + found.record.id + " is " + state_name(state) + "; only an interrupted, failed or " +
                          "cancelled job can be resumed",
                      state == JobState::running
                          ? wait_hint
                          : "to give it a new instruction: git mullet run --continue " + found.record.id + " -m TEXT");
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
    if (!takes(now)) {
      throw usage_error("job " + stored.id + " is " + state_name(now) + " now; it cannot be " +
                        (continuing ? "continued" : "resumed"));
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
  // What the prompt says of the job's past is read from the record as it
  // was claimed (found.record may be older).
  const std::string resumed_prompt =
      continuing ? continued_prompt(claimed.record, request.instruction)
                 : prompt + (record.result.empty()
                                 ? std::string()
                                 : "\n\n---\nThis task was started before and interrupted; the work tree holds the "
                                   "work done so far. Continue from there.\n");
  return run_to_end(repo, settings, store, record, request, *executor, api, start, resumed_prompt);
}

}  // namespace mullet::jobs
