#include "jobs/run_to_end.hpp"

#include <unistd.h>

#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "jobs/attempts.hpp"
#include "jobs/layout.hpp"
#include "jobs/nodes.hpp"
#include "jobs/notify.hpp"
#include "jobs/phases.hpp"
#include "jobs/slots.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

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
  const auto save = [&](const JobRecord& now) {
    store.update(record.id, [&](JobRecord& stored) { overwrite_keeping_dispatch(stored, now); });
  };
  return run_attempts(
      {repo, settings, store, record, request, executor, api, sandbox_uid, job_paths(repo, record.id), save}, start,
      prompt);
}

// What an error thrown by a job's (or node's) run makes of it; returns the hint.
std::string record_error(JobRecord& record, const Error& error) {
  record.state = error.code() == ExitCode::refused ? JobState::refused : JobState::failed;
  // What a signal stopped (the clone's checkout) ends the job as cancelled.
  if (record.state == JobState::failed && util::cancel_requested()) record.state = JobState::cancelled;
  record.error = error.what();
  return error.hint();
}

std::optional<std::string> log_tail(const std::string& path, std::size_t bytes) {
  try {
    return util::read_file_tail(path, bytes);
  } catch (const Error& error) {
    return "[git-mullet: " + std::string(error.what()) + "]\n";
  }
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
  std::map<std::string, std::string> files;
  files["worker.log"] = log_tail(paths.worker_log, log_kept_bytes).value_or("");
  if (auto events = log_tail(paths.events_log, events_kept_bytes)) files["events.jsonl"] = *events;
  const auto finished = store.update(
      record.id, [&](JobRecord& stored) { overwrite_keeping_dispatch(stored, record); }, files);
  return RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
}

// One node of a job of several, in a thread of its own: a repository handle
// of its own (libgit2's are not shared between threads), its slot, its run,
// its final node record with its logs' tails.
class NodeThread {
 public:
  NodeThread(const std::string& git_dir, const JobRecord& job, const RunRequest& request, const NodeRun& node,
             std::optional<uid_t> sandbox_uid, std::mutex& lock)
      : m_repo(git::Repository::open_git_dir(git_dir)),
        m_store(m_repo),
        m_id(job.id),
        m_count(job.nodes.size()),
        m_view(node_view(job, node.number)),
        m_request(request),
        m_quiet(request),
        m_node(node),
        m_uid(sandbox_uid),
        m_lock(lock) {
    // Nodes run at once: none echoes its worker's output (its log keeps it).
    m_quiet.show_worker_output = false;
  }

  void run() {
    const JobPaths paths = node_paths(m_repo, m_id, m_node.number);
    std::string hint;
    // Held until the node's final record is stored.
    Slot slot;
    try {
      slot = wait_for_slot(m_repo, m_node.settings, m_view, false);
      {
        const std::lock_guard guard(m_lock);
        m_store.update(m_id, [&](JobRecord& stored) {
          stored.nodes.at(static_cast<std::size_t>(m_node.number - 1)).started_at = util::now_utc_ms();
        });
      }
      tell("running (" + m_view.executor.name + ")");
      const auto save = [&](const JobRecord& now) { store(now, {}); };
      hint = run_attempts({m_repo, m_node.settings, m_store, m_view, m_quiet, *m_node.executor, m_node.api, m_uid,
                           paths, save, m_node.number},
                          m_node.start, m_node.prompt);
    } catch (const Error& error) {
      hint = record_error(m_view, error);
    } catch (const std::exception& error) {
      m_view.state = JobState::failed;
      m_view.error = std::string("internal error: ") + error.what();
    }
    if (m_view.state == JobState::running) {
      m_view.state = JobState::failed;
      m_view.error = "internal error: the node ended without a verdict";
    }
    m_view.finished_at = util::now_utc_ms();
    m_view.progress.reset();
    m_view.changes = result_changes(m_repo, m_view);
    const std::string prefix = "node-" + std::to_string(m_node.number) + ".";
    std::map<std::string, std::string> files;
    files[prefix + "worker.log"] = log_tail(paths.worker_log, log_kept_bytes).value_or("");
    if (auto events = log_tail(paths.events_log, events_kept_bytes)) files[prefix + "events.jsonl"] = *events;
    try {
      store(m_view, files);
    } catch (const std::exception& error) {
      tell(std::string("its record could not be stored: ") + error.what());
    }
    tell(node_ending(m_view.state, m_view.changes, m_view.error));
  }

 private:
  void store(const JobRecord& now, const std::map<std::string, std::string>& files) {
    const std::lock_guard guard(m_lock);
    m_store.update(
        m_id, [&](JobRecord& stored) { store_node(stored, now, m_node.number); }, files);
  }
  // One line per event, never the worker's output: nodes run at once.
  void tell(const std::string& what) {
    if (!m_request.show_worker_output) return;
    const std::lock_guard guard(m_lock);
    std::cerr << util::terminal_safe("git mullet: job " + m_id + " node " + std::to_string(m_node.number) + "/" +
                                     std::to_string(m_count) + ": " + what + "\n");
  }

  git::Repository m_repo;
  JobStore m_store;
  std::string m_id;
  std::size_t m_count;
  JobRecord m_view;
  const RunRequest& m_request;
  RunRequest m_quiet;  // what the node's run gets
  const NodeRun& m_node;
  std::optional<uid_t> m_uid;
  std::mutex& m_lock;
};

}  // namespace

RunOutcome run_nodes_to_end(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                            JobRecord& record, const RunRequest& request, const std::vector<NodeRun>& nodes) {
  RunOutcome outcome;
  std::string hint;
  {
    std::mutex lock;
    ClaimedUid claimed;
    std::optional<uid_t> sandbox_uid;
    try {
      if (::geteuid() == 0) {
        // One uid for the job, its nodes' sandboxes share it.
        claimed = claim_sandbox_uid(sandbox_uid_range(settings.sandbox));
        sandbox_uid = claimed.uid;
        record.sandbox_uid = claimed.uid;
        store.update(record.id, [&](JobRecord& stored) { stored.sandbox_uid = record.sandbox_uid; });
      }
      std::vector<std::unique_ptr<NodeThread>> runs;
      for (const auto& node : nodes) {
        runs.push_back(std::make_unique<NodeThread>(repo.git_dir(), record, request, node, sandbox_uid, lock));
      }
      std::vector<std::thread> threads;
      for (auto& run : runs) {
        try {
          threads.emplace_back([&run] { run->run(); });
        } catch (const std::system_error&) {
          run->run();  // no thread to be had: this node runs here, before the next starts
        }
      }
      for (auto& thread : threads) thread.join();
      const auto stored = store.load(record.id);
      if (stored) record = stored->record;
    } catch (const Error& error) {
      // Nothing ran (the uid could not be claimed): each node that was to run ends so.
      for (const auto& node : nodes) {
        JobRecord view = node_view(record, node.number);
        hint = record_error(view, error);
        store_node(record, view, node.number);
      }
    }
    settle_job(record);
    record.finished_at = util::now_utc_ms();
    record.progress.reset();
    const auto finished = store.update(record.id, [&](JobRecord& stored) {
      stored = record;
      settle_job(stored);
    });
    if (hint.empty() && finished.record.state != JobState::succeeded && finished.record.state != JobState::no_changes) {
      hint = "see each node with: git mullet show " + record.id + "; take one with: git mullet merge --force " +
             record.id + "/N";
    }
    outcome = RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
  }
  if (const auto problem = notify_job_end(settings.run.notify, outcome.record); !problem.empty()) {
    std::cerr << "git mullet: warning: " << problem << "\n";
  }
  return outcome;
}

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
      hint = record_error(record, error);
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
