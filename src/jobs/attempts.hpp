// One job's run: setup, then attempts of worker, snapshot and gates, until
// the gates pass, the attempts run out or a limit ends it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "config/settings.hpp"
#include "executors/executor.hpp"
#include "git/repository.hpp"
#include "jobs/api_access.hpp"
#include "jobs/layout.hpp"
#include "jobs/record.hpp"
#include "jobs/run_request.hpp"
#include "jobs/store.hpp"

namespace mullet::jobs {

struct JobRunContext {
  const git::Repository& repo;
  const config::Settings& settings;
  JobStore& store;
  JobRecord& record;  // in the store already; saved after each snapshot and gate
  const RunRequest& request;
  const executors::Executor& executor;
  // The worker's model API, when the executor needs one (api_access.hpp).
  const std::optional<ResolvedApi>& api;
  std::optional<uid_t> sandbox_uid;  // as root: the host uid the job's sandboxes run as
  // The job's directories, or its node's (layout.hpp: node_paths).
  JobPaths paths;
  // Stores `record` as it is now (the job's ref, or its node in the job's).
  std::function<void(const JobRecord&)> save;
  // In a job of several nodes, which one this is (its phases see
  // MULLET_NODE); 0 in a job of one.
  int node = 0;
};

// Sets up the clone at `start` (the base, or the last snapshot when resuming)
// and runs the job to its end state: record.state and record.error say it.
// Returns what the user can do about record.error. Throws what it cannot
// record (the clone failed, a sandbox could not be built).
std::string run_attempts(const JobRunContext& job, const git_oid& start, const std::string& first_prompt);

}  // namespace mullet::jobs
