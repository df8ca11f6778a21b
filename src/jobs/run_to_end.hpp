// A job whose record exists, run to its end: it waits for a slot
// ([run] max_parallel) and, as root, claims a sandbox uid, runs its attempts
// (attempts.hpp), and stores its final record with the logs' tails, whatever
// happened.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "executors/executor.hpp"
#include "git/repository.hpp"
#include "jobs/api_access.hpp"
#include "jobs/record.hpp"
#include "jobs/run_request.hpp"
#include "jobs/store.hpp"

namespace mullet::jobs {

// `record` is running in `store`; `start` is the commit its clone starts
// from. An error is recorded (refused, failed, or cancelled when a signal
// stopped it), never thrown.
RunOutcome run_to_end(const git::Repository& repo, const config::Settings& settings, JobStore& store, JobRecord& record,
                      const RunRequest& request, const executors::Executor& executor,
                      const std::optional<ResolvedApi>& api, const git_oid& start, const std::string& prompt);

// One node of a job of several: the settings it runs with (its executor and
// model), that executor, its model API, the commit its clone starts from and
// its first prompt.
struct NodeRun {
  int number = 0;
  config::Settings settings;
  std::shared_ptr<const executors::Executor> executor;
  std::optional<ResolvedApi> api;
  git_oid start{};
  std::string prompt;
};

// The same for a job of several nodes (record.nodes is set): each node of
// `nodes` runs in a thread of its own, holding a slot of its own
// ([run] max_parallel); as root, the job claims one sandbox uid its nodes
// share. Node records are stored as they change (under one lock, with the
// ref's compare-and-swap); the job is settled from them (nodes.hpp). With
// request.show_worker_output, one status line per node as it starts and
// ends on stderr, never the workers' output (their logs keep it).
RunOutcome run_nodes_to_end(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                            JobRecord& record, const RunRequest& request, const std::vector<NodeRun>& nodes);

// One node of a job of several, alone in this process: a task of a job
// array (`run --on slurm --nodes N`), its node claimed already. The same
// NodeThread as a local job's node, run here; as root it claims a sandbox
// uid of its own (the array's tasks are processes of their own). The task
// whose node ends the job last notifies ([run] notify).
RunOutcome run_node_to_end(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                           const JobRecord& record, const RunRequest& request, const NodeRun& node);

// What the record's result changed against its base, for `list`; unset
// without a result, or when it cannot be counted.
std::optional<ChangeStats> result_changes(const git::Repository& repo, const JobRecord& record);

}  // namespace mullet::jobs
