#include "jobs/run_to_end.hpp"

#include <unistd.h>

#include <iostream>
#include <map>
#include <optional>

#include "jobs/attempts.hpp"
#include "jobs/layout.hpp"
#include "jobs/notify.hpp"
#include "jobs/phases.hpp"
#include "jobs/slots.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"

namespace mullet::jobs {
namespace {

// The capped logs and the tails their phases appended past the cap.
constexpr std::size_t log_kept_bytes = worker_log_cap + (1U << 20U);
constexpr std::size_t events_kept_bytes = events_log_cap + (1U << 20U);

Slot wait_for_slot(const git::Repository& repo, const config::Settings& settings, const JobRecord& record, bool tell) {
  return acquire_slot(
      util::real_path(repo.common_dir()) + "/mullet/slots", settings.run.max_parallel,
      [] { return util::cancel_requested(); },
      [&] {
        if (tell) {
          std::cerr << "git mullet: job " << record.id
                    << " waits for a free slot ([run] max_parallel = " << settings.run.max_parallel << ")\n";
        }
      });
}

// As root, every job's sandboxes run as a uid of their own: no job's files
// are another's, and a uid's process limit is the job's. The uid is held
// while the attempts run. Returns the hint for record.error.
std::string claim_uid_and_run(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                              JobRecord& record, const RunRequest& request, const executors::Executor& executor,
                              const std::optional<ResolvedApi>& api, const git_oid& start, const std::string& prompt) {
  ClaimedUid claimed;
  std::optional<uid_t> sandbox_uid;
  record.sandbox_uid.reset();
  if (::geteuid() == 0) {
    claimed = claim_sandbox_uid(sandbox_uid_range(settings.sandbox));
    sandbox_uid = claimed.uid;
    record.sandbox_uid = claimed.uid;
    // On record while the job runs, not only once it ends.
    store.update(record.id, [&](JobRecord& stored) { stored.sandbox_uid = record.sandbox_uid; });
  }
  return run_attempts({repo, settings, store, record, request, executor, api, sandbox_uid}, start, prompt);
}

// The final record, with the logs' tails; stored whatever happened to the logs.
RunOutcome store_final_record(const git::Repository& repo, JobStore& store, JobRecord& record,
                              const std::string& hint) {
  if (record.state == JobState::running) {
    record.state = JobState::failed;
    record.error = "internal error: the job ended without a verdict";
  }
  record.finished_at = util::now_utc_ms();
  record.progress.reset();
  record.changes = result_changes(repo, record);
  const JobPaths paths = job_paths(repo, record.id);
  const auto log_tail = [](const std::string& path, std::size_t bytes) -> std::optional<std::string> {
    try {
      return util::read_file_tail(path, bytes);
    } catch (const Error& error) {
      return "[git-mullet: " + std::string(error.what()) + "]\n";
    }
  };
  std::map<std::string, std::string> files;
  files["worker.log"] = log_tail(paths.worker_log, log_kept_bytes).value_or("");
  if (auto events = log_tail(paths.events_log, events_kept_bytes)) files["events.jsonl"] = *events;
  const auto finished = store.update(
      record.id, [&](JobRecord& stored) { stored = record; }, files);
  return RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
}

}  // namespace

std::optional<ChangeStats> result_changes(const git::Repository& repo, const JobRecord& record) {
  if (record.result.empty()) return std::nullopt;
  try {
    const auto count = repo.count_changes(git::oid_from_string(record.base), git::oid_from_string(record.result));
    return ChangeStats{static_cast<std::int64_t>(count.files), static_cast<std::int64_t>(count.insertions),
                       static_cast<std::int64_t>(count.deletions)};
  } catch (const Error&) {
    // Only `list` shows it; the record is stored without.
    return std::nullopt;
  }
}

RunOutcome run_to_end(const git::Repository& repo, const config::Settings& settings, JobStore& store, JobRecord& record,
                      const RunRequest& request, const executors::Executor& executor,
                      const std::optional<ResolvedApi>& api, const git_oid& start, const std::string& prompt) {
  RunOutcome outcome;
  {
    const Slot slot = wait_for_slot(repo, settings, record, request.show_worker_output);
    std::string hint;
    try {
      hint = claim_uid_and_run(repo, settings, store, record, request, executor, api, start, prompt);
    } catch (const Error& error) {
      record.state = error.code() == ExitCode::refused ? JobState::refused : JobState::failed;
      // What a signal stopped (the clone's checkout) ends the job as cancelled.
      if (record.state == JobState::failed && util::cancel_requested()) record.state = JobState::cancelled;
      record.error = error.what();
      hint = error.hint();
    } catch (const std::exception& error) {
      record.state = JobState::failed;
      record.error = std::string("internal error: ") + error.what();
    }
    outcome = store_final_record(repo, store, record, hint);
  }
  // Once the job is on record and its slot is free: the program may read it.
  if (const auto problem = notify_job_end(settings.run.notify, outcome.record); !problem.empty()) {
    std::cerr << "git mullet: warning: " << problem << "\n";
  }
  return outcome;
}

}  // namespace mullet::jobs
