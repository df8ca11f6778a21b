// What `run` and `resume` ask of a job, and what they get back.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "util/error.hpp"

namespace mullet::jobs {

struct RunRequest {
  std::string prompt;
  std::string title;
  git_oid base{};
  // The base is a commit of the work tree's uncommitted changes on this HEAD
  // (run --include-uncommitted).
  std::optional<git_oid> base_head;
  bool show_worker_output = true;  // stream the worker's output to stderr
  // Called once the job's record exists (its id is known), before it waits
  // for a slot or runs anything.
  std::function<void(const std::string& id)> on_created;
  std::vector<config::Gate> gates;  // --gate, besides the config's [[gate]]s
  // What the command line added to the configuration (run_flags_json), for
  // the record: `resume` replays it. Only a new job records it.
  nlohmann::json run_flags = nlohmann::json::object();
  // `run --continue`: the user's new instruction for a job that ended.
  // Empty for a new job and for `resume`.
  std::string instruction;
  // A job of several nodes (`run --nodes N`, `--node`): each node's settings
  // (its executor and model; all else is the job's). Empty for a job of one.
  std::vector<config::Settings> node_settings;
  // `resume JOB/N`: the one node to run on (0: every node that is not done).
  int node = 0;
  // A new job: the dispatch engine to submit it to ("slurm"); empty or
  // "local": run it here.
  std::string dispatch_engine;
  // `__run-dispatched`: the node takes up a queued job (and only that).
  bool dispatched = false;
};

struct RunOutcome {
  JobRecord record;
  ExitCode exit_code = ExitCode::ok;
  std::string hint;  // what the user can do about record.error
};

}  // namespace mullet::jobs
