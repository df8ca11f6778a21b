// [run] notify: the user's own program, told on the host that a job ended.
#pragma once

#include <string>
#include <vector>

#include "jobs/record.hpp"
#include "util/process.hpp"

namespace mullet::jobs {

// How long the program may take before it is killed: a notification that
// hangs must not hold the job's command.
inline constexpr int notify_deadline_seconds = 60;

// The program's environment: ours (it is the user's program, run as the
// user, which a desktop notification needs: DISPLAY, DBUS_SESSION_BUS_ADDRESS)
// with MULLET_JOB_ID and MULLET_JOB_STATE set. Pure.
util::Environment notify_environment(const util::Environment& ours, const JobRecord& record);

// Runs `command` (argv) with the job's record as JSON (as `show --json`
// prints it) on stdin, and waits for it within notify_deadline_seconds.
// Returns what went wrong, for one warning line ("" when it ran fine or no
// program is configured); never throws.
std::string notify_job_end(const std::vector<std::string>& command, const JobRecord& record);

}  // namespace mullet::jobs
