// Flag replay: what a job's command line added to the configuration is kept
// in its record (JobRecord::run_flags), so `resume` runs it as it was started.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"

namespace mullet::jobs {

// The flags `config` holds and the --gate gates, as the record keeps them:
// {"config": {key: value}, "gates": [{name, command, timeout}]}.
nlohmann::json run_flags_json(const config::Config& config, const std::vector<config::Gate>& gates);

// What the job's own command line added to the configuration (its command,
// setup, attempts...), applied again to `config`; returns its --gate gates.
// The record may have been fetched: a key only the user's configuration
// chooses (config::is_user_only: run.command, run.executor, the models...) is
// replayed only when this machine started the job with it (`local_run_flags`,
// kept in the job's private scratch directory, which no fetch brings) or
// `config` already has the same value; otherwise a usage error.
std::vector<config::Gate> restore_run_flags(const JobRecord& record, config::Config& config,
                                            const std::optional<nlohmann::json>& local_run_flags);

// Each node's configuration for a job of several: `config` (the job's, its
// flags restored) with the node's own recorded flags (`--node`: run.executor,
// a model) applied under the same rules.
std::vector<config::Config> restore_node_flags(const JobRecord& record, const config::Config& config,
                                               const std::optional<nlohmann::json>& local_run_flags);

// Keeps the flags a new job `id` starts with where no fetch reaches (its
// directory must exist).
void save_local_run_flags(const git::Repository& repo, const std::string& id, const nlohmann::json& run_flags);
// The flags this machine recorded when it started job `id`; nullopt when it
// did not start it (a fetched record) or the file is unreadable.
std::optional<nlohmann::json> local_run_flags(const git::Repository& repo, const std::string& id);

}  // namespace mullet::jobs
