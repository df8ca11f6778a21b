// Resuming a job: more attempts of an interrupted, failed or cancelled job.
#pragma once

#include <string>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "jobs/run_request.hpp"

namespace mullet::jobs {

// The states resume_job takes a job from (completion offers those jobs).
bool resumable(JobState state);

// Continues the job from its last snapshot, in a fresh clone of it, as more
// attempts of the same job. `settings` is what a new job from the same base
// would get, with the job's own flags replayed (run_flags.hpp).
RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request);

}  // namespace mullet::jobs
