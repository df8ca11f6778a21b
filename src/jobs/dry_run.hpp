// `run --dry-run`: each phase's sandbox plan, as `run` would build it.
#pragma once

#include <string>
#include <vector>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "sandbox/plan.hpp"

namespace mullet::jobs {

// Setup (when configured), the worker, then each gate: the files' and
// `extra_gates`. No job is created, no sandbox runs and the base's pack is
// not built (the executor may still probe its binary). With `node`, node
// `node`'s of a job of several (its directories, MULLET_NODE).
std::vector<sandbox::Plan> job_plans(const git::Repository& repo, const config::Settings& settings,
                                     const std::string& job_id, const git_oid& base, const std::string& prompt,
                                     const std::vector<config::Gate>& extra_gates = {}, int node = 0);

}  // namespace mullet::jobs
