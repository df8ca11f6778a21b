// A job whose record exists, run to its end: it waits for a slot
// ([run] max_parallel) and, as root, claims a sandbox uid, runs its attempts
// (attempts.hpp), and stores its final record with the logs' tails, whatever
// happened.
#pragma once

#include <string>

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

// What the record's result changed against its base, for `list`; unset
// without a result, or when it cannot be counted.
std::optional<ChangeStats> result_changes(const git::Repository& repo, const JobRecord& record);

}  // namespace mullet::jobs
