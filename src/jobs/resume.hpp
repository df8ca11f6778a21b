// Resuming a job: more attempts of an interrupted, failed or cancelled job;
// continuing one (`run --continue`): more attempts of any job that ended,
// with a new instruction from the user.
#pragma once

#include <optional>
#include <string>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "jobs/run_request.hpp"

namespace mullet::jobs {

// The states resume_job takes a job from (completion offers those jobs).
bool resumable(JobState state);
// The states `run --continue` takes a job from: every state but running.
bool continuable(JobState state);

// The prompt of a continued job's next attempt: the job's task, what its
// earlier attempts ended with (the worker's last summary, the user's earlier
// instructions) and the new instruction, which rules where they differ.
std::string continued_prompt(const JobRecord& record, const std::string& instruction);

// Continues the job from its last snapshot, in a fresh clone of it, as more
// attempts of the same job; with request.instruction set, a job that ended
// in any state, else only one resumable() takes. `settings` is what a new job from the same base
// would get, with the job's own flags replayed (run_flags.hpp).
RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request);

// The node a task of a job array runs (`__run-dispatched` of a job of
// several nodes): SLURM_ARRAY_TASK_ID, which must be a node's number
// (digits, 1..N), of the array SLURM_ARRAY_JOB_ID, which must be the one the
// record names (or, before the host recorded it, one the scheduler names as
// this repository's job) and whose task must be running at the scheduler
// under this job's exact name: an environment set by hand, or a record
// copied from another repository, runs nothing (refused, exit 3). 0 for a
// job of one node.
int dispatched_node(const git::Repository& repo, const JobRecord& record);
// The task's number read from SLURM_ARRAY_TASK_ID: nullopt unless it is
// digits naming one of `nodes` nodes (pure).
std::optional<int> parse_array_task(const std::string& text, std::size_t nodes);

// A dispatched job (node `node`, 0 for a job of one) that cannot be taken up
// as it was queued (its configuration changed meanwhile, so its recorded
// flags no longer apply): failed with `error`, if still queued (the
// compare-and-swap loses to a claim). Returns the record.
RunOutcome fail_queued(const git::Repository& repo, const std::string& id, int node, const Error& error);

}  // namespace mullet::jobs
