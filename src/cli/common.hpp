// What every subcommand shares: the table entry type, opening the repository,
// loading configuration, and printing jobs.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "jobs/run_request.hpp"
#include "jobs/store.hpp"

namespace mullet::cli {

// A subcommand adds itself to the app and stores the action to run when it
// was the one chosen. Actions return the exit code.
using Action = std::function<int()>;
struct Command {
  const char* name;
  void (*add)(CLI::App& app, Action& chosen);
};

git::Repository open_repository();

// The user's file, then .mullet.toml from `base`'s tree (if any); flags are
// applied by the caller. Throws one error listing every problem.
config::Config load_config(const git::Repository* repo, const std::optional<git_oid>& base);

// The same, for `config`: each file's problems are returned, not thrown,
// and a repository file with problems is left out of the configuration;
// and which files exist.
struct ConfigFiles {
  config::Config config;
  bool user_file_exists = false;
  bool repo_file_exists = false;
  std::vector<config::Problem> user_problems;
  std::vector<config::Problem> repo_problems;
};
ConfigFiles read_config_files(const git::Repository* repo, const std::optional<git_oid>& base);

// The record as `run --json` and `show --json` print it (state as shown; a
// job of several nodes also says its chosen node, `chosen_node`).
nlohmann::json job_json(const jobs::JobRecord& record);

// What `merge`, `diff`, `log`, `show` and `resume` name: `ID`, or `ID/N`, one
// node of a job of several, seen as a record of its own (jobs/nodes.hpp).
struct Addressed {
  jobs::StoredJob job;
  int node = 0;            // 0: the job itself
  jobs::JobRecord record;  // the job's, or node_view of it
  std::string label;       // "ID" or "ID/N"
};
Addressed find_addressed(const jobs::JobStore& store, const std::string& address);
std::string short_sha(const std::string& sha);

// `resume JOB`, and `run --continue JOB` (request.instruction set): the job
// runs on with the configuration a new job from its base would get plus the
// flags it was started with (jobs/run_flags.hpp); `request` says the rest.
jobs::RunOutcome take_up_job(const std::string& job, jobs::RunRequest request);

// print_job_outcome for a job this process ran (`run`, `resume`).
void print_run_outcome(const jobs::RunOutcome& outcome, bool json);

// A dispatched job, stopped through its scheduler (`stop`, `discard
// --force`): one still queued is recorded as cancelled here; one a node
// runs gets the scheduler's SIGTERM there and writes its own final record,
// waited for up to `bound`. Refused when the scheduler's job is not this
// repository's.
void stop_dispatched(const git::Repository& repo, jobs::JobStore& store, const jobs::JobRecord& record,
                     std::chrono::milliseconds bound);

// What `run`, `wait` and `stop` print once a job has ended, saying its error
// once: the record as JSON (job_json) on stdout with the error and `hint` on
// stderr, or, for people, closing lines with the state, result, error, hint,
// summary, gates, warnings and the next steps, on stderr when the command
// fails (`failed`), else on stdout. They show record.state as given.
void print_job_outcome(const jobs::JobRecord& record, const std::string& hint, bool json, bool failed);

}  // namespace mullet::cli
