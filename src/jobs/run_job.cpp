#include "jobs/run_job.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "executors/executor.hpp"
#include "jobs/api_access.hpp"
#include "jobs/dispatch.hpp"
#include "jobs/id.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/run_flags.hpp"
#include "jobs/run_to_end.hpp"
#include "jobs/slots.hpp"
#include "jobs/stale_cgroups.hpp"
#include "jobs/store.hpp"
#include "jobs/workspace.hpp"
#include "sandbox/runner.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
RunOutcome submit_queued(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                         const JobRecord& record) {
  const auto engine = make_dispatch_engine(record.dispatch->engine);
  const std::string dir = util::real_path(repo.common_dir()) + "/mullet/jobs/" + record.id;
  SubmitRequest submit;
  submit.binary = util::real_path("/proc/self/exe");
  submit.repository = util::real_path(repo.work_tree().value_or(repo.git_dir()));
  submit.repository_key = repository_key(repo);
  submit.job_id = record.id;
  submit.script_path = dir + "/dispatch.sh";
  submit.output_path = dir + "/dispatch.log";
  submit.dispatch = settings.dispatch;
  submit.time_seconds = settings.limits.job_timeout.count();
  submit.memory_mb = static_cast<std::int64_t>(settings.limits.memory_mb.count());
  for (const auto& node : record.nodes) {
    if (node.state == JobState::queued) submit.array_tasks.push_back(node.number);
  }
  std::string scheduler_id;
  try {
    scheduler_id = engine->submit(submit);
  } catch (const Error& error) {
    const auto failed = store.update(record.id, [&](JobRecord& stored) {
      for (auto& node : stored.nodes) {
        if (node.state != JobState::queued) continue;
        node.state = JobState::failed;
        node.error = error.what();
        node.finished_at = util::now_utc();
      }
      stored.state = JobState::failed;
      stored.error = error.what();
      stored.finished_at = util::now_utc();
      settle_job(stored);
    });
    return {failed.record, ExitCode::job_failed, error.hint()};
  }
  // The node may have claimed it already: only the ids are added. A task of
  // an earlier submission that seemed to fail (sbatch timed out, yet the
  // controller took it) may have recorded its own id meanwhile: that one
  // stays, and this submission's tasks find the job is not theirs.
  const auto submitted = store.update(record.id, [&](JobRecord& stored) {
    if (stored.dispatch->scheduler_id.empty()) stored.dispatch->scheduler_id = scheduler_id;
    if (stored.dispatch->scheduler_id != scheduler_id) return;
    for (const int task : submit.array_tasks) {
      auto& node = stored.nodes.at(static_cast<std::size_t>(task - 1));
      if (node.dispatch && node.state == JobState::queued) {
        node.dispatch->scheduler_id = scheduler_id + "_" + std::to_string(task);
      }
    }
  });
  return {submitted.record, ExitCode::ok, ""};
}

RunOutcome run_job(const git::Repository& repo, const config::Settings& settings, const RunRequest& request) {
  // Everything that can be refused is refused before a job exists.
  const auto executor = executors::make_executor(settings.run.executor);
  const std::optional<ResolvedApi> api =
      executor->needs_api() ? std::optional<ResolvedApi>(resolve_worker_api(settings, *executor)) : std::nullopt;
  const auto spec = executor->prepare({request.prompt, settings, jobs_directory(repo), api ? &api->access : nullptr});
  // Each node of a job of several: its own executor, model API and record.
  std::vector<NodeRun> nodes;
  std::vector<NodeRecord> node_records;
  for (const auto& node_settings : request.node_settings) {
    NodeRun node;
    node.number = static_cast<int>(nodes.size()) + 1;
    node.settings = node_settings;
    node.executor = executors::make_executor(node_settings.run.executor);
    if (node.executor->needs_api()) node.api = resolve_worker_api(node_settings, *node.executor);
    const auto node_spec = node.executor->prepare(
        {request.prompt, node_settings, jobs_directory(repo), node.api ? &node.api->access : nullptr});
    node.start = request.base;
    node.prompt = request.prompt;
    NodeRecord record;
    record.number = node.number;
    record.executor = node_spec.record;
    node_records.push_back(record);
    nodes.push_back(std::move(node));
  }
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);
  util::make_private_dirs(util::real_path(repo.common_dir()), "mullet/jobs");

  JobStore store(repo);
  // What runs of this repository's jobs killed before their end left.
  sweep_stale_cgroups(repo, store, settings.sandbox.cgroup);
  JobRecord record;
  record.id = new_job_id();
  // The whole first line: what reads it cuts it to its room.
  record.title = request.title.empty() ? util::first_line(request.prompt, title_max_bytes) : request.title;
  record.prompt = request.prompt;
  record.base = git::oid_to_string(request.base);
  if (request.base_head) {
    record.base_uncommitted = true;
    record.base_head = git::oid_to_string(*request.base_head);
  }
  record.executor = spec.record;
  record.sequence = next_job_sequence(repo);
  record.created_at = util::now_utc_ms();
  record.runner = current_runner(repository_key(repo));
  record.run_flags = request.run_flags;
  record.nodes = node_records;
  const bool dispatching = !request.dispatch_engine.empty() && request.dispatch_engine != "local";
  if (dispatching) {
    record.dispatch = DispatchRecord{request.dispatch_engine, "", "", ""};
    // Each node is a task of one job array, queued until it claims itself.
    for (auto& node : record.nodes) {
      node.state = JobState::queued;
      node.dispatch = DispatchRecord{request.dispatch_engine, "", "", ""};
    }
    record.state = JobState::queued;
  }
  settle_job(record);
  store.create(record);
  // What this machine started the job with, where no fetch reaches: resume
  // trusts the record's user-only flags only when they match this copy.
  make_private_job_dir(repo, record.id);
  save_local_run_flags(repo, record.id, record.run_flags);
  if (dispatching) return submit_queued(repo, settings, store, record);
  if (request.on_created) request.on_created(record.id);
  if (!nodes.empty()) return run_nodes_to_end(repo, settings, store, record, request, nodes);
  return run_to_end(repo, settings, store, record, request, *executor, api, request.base, request.prompt);
}

}  // namespace mullet::jobs
