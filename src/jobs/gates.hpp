// Gates: which ones a job runs, what the record keeps of one's run, and what
// a failed one tells the worker's next attempt.
#pragma once

#include <string>
#include <vector>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "sandbox/runner.hpp"

namespace mullet::jobs {

// The configuration's [[gate]]s, then the command line's.
std::vector<config::Gate> job_gates(const config::Settings& settings, const std::vector<config::Gate>& extra);

// One gate's run against `commit`: it passed when its command exited 0.
GateRecord gate_record(const config::Gate& gate, const git_oid& commit, const sandbox::RunResult& run,
                       const PhaseRecord& phase);

// How a failed gate ended: "exit code 1", or what stopped it.
std::string how_gate_ended(const GateRecord& gate);

// The next attempt's prompt: the task, then the failed gate and the end of
// its output.
std::string gate_feedback(const std::string& task, const GateRecord& gate);

}  // namespace mullet::jobs
