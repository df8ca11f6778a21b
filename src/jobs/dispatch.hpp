// Dispatch: a job submitted to a scheduler instead of run here (`run --on
// slurm`, `[dispatch] engine`). The node the scheduler picks runs
// `git mullet __run-dispatched ID` against the same repository path, which
// runs the recorded job as a local one (same walls, same record, same refs).
//
// The engine seam is small, so that another scheduler (Kubernetes Jobs,
// Nomad) can follow Slurm: submit, status, cancel, and the mapping of the
// scheduler's states onto ours (SchedulerStatus).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/settings.hpp"

namespace mullet::jobs {

// What a dispatched job asks of the scheduler. No user text: the binary,
// the repository's path and the job's id, each checked before use.
struct SubmitRequest {
  std::string binary;          // an absolute path to git-mullet, as the node sees it
  std::string repository;      // the repository's work tree (or git dir), on a shared file system
  std::string repository_key;  // jobs/layout.hpp: repository_key, part of the scheduler's name for it
  std::string job_id;
  std::string script_path;  // where the batch script is written (the job's private dir)
  std::string output_path;  // the scheduler's log of the batch job
  config::DispatchSettings dispatch;
  std::int64_t time_seconds = 0;  // limits.job_timeout
  std::int64_t memory_mb = 0;     // limits.memory_mb; 0: the scheduler's default
  // A job of several nodes is one job array: the task ids to run (its
  // nodes' numbers: 1..N, or the unfinished ones on resume). Empty: a job
  // of one node.
  std::vector<int> array_tasks;
};

// The scheduler's view of a job, mapped onto ours.
enum class SchedulerStatus {
  pending,  // waiting for resources: our `queued`
  running,  // started on a node: the node's git-mullet claims it
  ended,    // the scheduler ended it (completed, timeout, node failure, cancelled...) or forgot it
  unknown,  // the scheduler did not answer (down, unreachable): nothing can be said
};

struct SchedulerView {
  SchedulerStatus status = SchedulerStatus::unknown;
  std::string state;   // the scheduler's own word (PENDING, RUNNING, TIMEOUT, NODE_FAIL...)
  std::string reason;  // why, when it says
  std::string node;    // where it runs
  std::string name;    // the scheduler's name for it: ours are "mullet-<repository key>.<job id>"
  // The id names a job that is not this one (a record fetched from elsewhere
  // may name any id on the cluster): never cancelled, and seen as ended.
  bool foreign = false;
};

// The scheduler's answer about its jobs, each by its id: "12" for a job,
// "12_3" for task 3 of array 12 (a pending array's tasks one by one, as
// their ids, though the scheduler lists them as one).
struct SchedulerTable {
  bool answered = false;  // the scheduler answered: an id it did not list has ended
  std::map<std::string, SchedulerView> jobs;
  // The view of `scheduler_id` as job `job_id`'s: unknown without an answer,
  // ended when the scheduler does not list it, foreign (and ended) when it
  // names another job. An array's own id stands for its tasks together:
  // running while one runs, else pending while one waits, else ended.
  SchedulerView view(const std::string& scheduler_id, const std::string& job_id) const;
};

class DispatchEngine {
 public:
  virtual ~DispatchEngine() = default;
  // Submits the job (a job array when request.array_tasks is set); returns
  // the scheduler's id for it. Throws mullet::Error.
  virtual std::string submit(const SubmitRequest& request) = 0;
  // The scheduler's view of the jobs `scheduler_ids` (an array task's id
  // asks for its whole array), in one question: `list` asks once for all
  // its jobs, never once per job or node.
  virtual SchedulerTable query(const std::vector<std::string>& scheduler_ids) = 0;
  // The scheduler's view of `scheduler_id`, which must be job `job_id`'s.
  SchedulerView status(const std::string& scheduler_id, const std::string& job_id);
  // Asks the scheduler to end it, queued or running (a running one gets
  // SIGTERM, which cancels it as a local job). Refuses, cancelling nothing,
  // unless the scheduler names that id as job `job_id`'s of the repository
  // whose key is `repository_key`: a job id is unique only in its
  // repository, and a record copied from another one names that one's job.
  // Throws mullet::Error.
  virtual void cancel(const std::string& scheduler_id, const std::string& repository_key,
                      const std::string& job_id) = 0;
};

// "slurm"; throws a usage error for another name.
std::unique_ptr<DispatchEngine> make_dispatch_engine(const std::string& name);

// The batch script: it runs its arguments (sbatch passes what follows the
// script as "$@"), so no value of ours is ever parsed by a shell.
std::string batch_script();
// sbatch's argv for `request` (pure; the tests read it).
std::vector<std::string> sbatch_argv(const SubmitRequest& request);
// Whether `view` is the scheduler's answer for job `job_id` of the
// repository whose key is `repository_key` (no name: a job it forgot).
bool is_this_job(const SchedulerView& view, const std::string& repository_key, const std::string& job_id);
// Refuses (mullet::Error) unless `view` is the scheduler's answer for job
// `job_id`'s own `scheduler_id`, submitted from the repository whose key is
// `repository_key`: never one that names another job or another
// repository's, nor one the scheduler did not answer for.
void require_this_job(const SchedulerView& view, const std::string& scheduler_id, const std::string& repository_key,
                      const std::string& job_id);
// The name a job is submitted under: "mullet-<repository key>.<job id>".
std::string scheduler_job_name(const std::string& repository_key, const std::string& job_id);
// Whether `name` is a name job `job_id` was submitted under, from any
// repository (status only reads; cancel requires the exact name).
bool names_job(const std::string& name, const std::string& job_id);
// `scontrol show job -o`'s one line read into a view (pure). The first of
// each field counts: later ones (WorkDir, Command, StdOut) hold paths.
SchedulerView parse_scontrol_job(const std::string& line);
// `scontrol show job -o`'s lines (one job or array task each) read into a
// table (pure; answered). An array's line names its tasks (ArrayTaskId "3",
// or "2-4,7%2" while they wait): each is entered as ARRAY_TASK.
SchedulerTable parse_scontrol_jobs(const std::string& output);
// The array's id in a task's id ("12" of "12_3"); the id itself otherwise.
std::string array_job_of(const std::string& scheduler_id);
// A path given to sbatch in an option it expands (--output, --error,
// --input: %j, %a, %%...): each '%' doubled, so it names the path as it is.
// (--chdir is taken as it is.)
std::string escape_sbatch_pattern(const std::string& path);

}  // namespace mullet::jobs
