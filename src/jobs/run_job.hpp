// A new job from start to end: pin the base, make the private clone, run the
// worker in the sandbox, snapshot what it wrote, record everything.
#pragma once

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/run_request.hpp"
#include "jobs/store.hpp"

namespace mullet::jobs {

// Runs the job. Bad input and an unavailable sandbox are thrown before any
// job exists; anything after that is recorded in the job and returned.
RunOutcome run_job(const git::Repository& repo, const config::Settings& settings, const RunRequest& request);

// Submits the queued, dispatched job `record` to its engine and records the
// scheduler's id; a refused submission ends the job as failed. A job of
// several nodes is submitted as one job array of its queued nodes (task N
// runs node N), each node recording its task's id.
RunOutcome submit_queued(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                         const JobRecord& record);

}  // namespace mullet::jobs
