// Telling a running job from one whose git-mullet died.
#pragma once

#include "jobs/record.hpp"

namespace mullet::jobs {

RunnerRecord current_runner();
// True when the process that wrote `runner` is still alive (same boot, same
// pid, same start time).
bool runner_alive(const RunnerRecord& runner);
// The state to show: a "running" job whose runner is gone is "interrupted".
JobState effective_state(const JobRecord& record);

}  // namespace mullet::jobs
