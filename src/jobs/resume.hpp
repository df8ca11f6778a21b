// Resuming a job: more attempts of an interrupted, failed or cancelled job;
// continuing one (`run --continue`): more attempts of any job that ended,
// with a new instruction from the user.
#pragma once

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

}  // namespace mullet::jobs
