// One job from start to end: pin the base, make the private clone, run the
// worker in the sandbox, snapshot what it wrote, record everything.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "sandbox/plan.hpp"

namespace mullet::jobs {

struct RunRequest {
  std::string prompt;
  std::string title;
  git_oid base{};
  bool show_worker_output = true;  // stream the worker's output to stderr
  // Called once the job's record exists (its id is known), before it waits
  // for a slot or runs anything.
  std::function<void(const std::string& id)> on_created;
  std::vector<config::Gate> gates;  // --gate, besides the config's [[gate]]s
  // What the command line added to the configuration (run_flags_json), for
  // the record: `resume` replays it. Only a new job records it.
  nlohmann::json run_flags = nlohmann::json::object();
};

struct RunOutcome {
  JobRecord record;
  ExitCode exit_code = ExitCode::ok;
  std::string hint;  // what the user can do about record.error
};

// Each phase's sandbox plan for a job, as `run` would build it (for --dry-run).
std::vector<sandbox::Plan> job_plans(const git::Repository& repo, const config::Settings& settings,
                                     const std::string& job_id, const std::string& prompt,
                                     const std::vector<config::Gate>& extra_gates = {});

// Runs the job. Bad input and an unavailable sandbox are thrown before any
// job exists; anything after that is recorded in the job and returned.
RunOutcome run_job(const git::Repository& repo, const config::Settings& settings, const RunRequest& request);

// Continues an interrupted, failed or cancelled job from its last snapshot,
// in a fresh clone of it, as more attempts of the same job.
RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request);

// The flags `config` holds (what the command line added to the configuration)
// and the --gate gates, as the record keeps them (JobRecord::run_flags).
nlohmann::json run_flags_json(const config::Config& config, const std::vector<config::Gate>& gates);

// What the job's own command line added to the configuration (its command,
// setup, attempts...), applied again to `config`; returns its --gate gates.
// The record may have been fetched: run.command and run.executor, which only
// the user's configuration chooses, are replayed only when this machine
// started the job with them (`local_run_flags`, kept in the job's private
// scratch directory, which no fetch brings) or `config` already has the same
// value; otherwise a usage error. The record cannot hold other keys.
std::vector<config::Gate> restore_run_flags(const JobRecord& record, config::Config& config,
                                            const std::optional<nlohmann::json>& local_run_flags);
// The flags this machine recorded when it started job `id`; nullopt when it
// did not start it (a fetched record) or the file is unreadable.
std::optional<nlohmann::json> local_run_flags(const git::Repository& repo, const std::string& id);

int exit_code_for(JobState state);

}  // namespace mullet::jobs
