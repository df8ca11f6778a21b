// Telling a running job from one whose git-mullet died.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "jobs/dispatch.hpp"
#include "jobs/record.hpp"

namespace mullet::jobs {

// This process, running a job of the repository whose key (jobs/layout.hpp:
// repository_key) is `repository`.
RunnerRecord current_runner(const std::string& repository);
// Whether `runner` is a git-mullet of another repository than the one whose
// key is `repository`: a record copied here from a repository on this host
// names that one's live runner, which no command here may signal. A record
// written before runners named their repository is taken as this one's.
bool runner_of_another_repository(const RunnerRecord& runner, const std::string& repository);
// True when the process that wrote `runner` is still alive (same boot, same
// pid, same start time).
bool runner_alive(const RunnerRecord& runner);
// The state to show: a "running" job whose runner is gone is "interrupted".
// A dispatched job not ended whose runner is not on this machine is what its
// scheduler says: one the scheduler ended (timeout, node failure,
// preemption, cancelled) or forgot is "interrupted".
// A job array's (a dispatched job of several nodes) is its nodes' as the
// scheduler sees them: running while one runs, queued while one waits,
// else interrupted (the job settles itself when its last node ends).
// `table`: the scheduler's answer when it was asked already (`list` asks
// once for all its jobs, ask_scheduler); else it is asked here.
JobState effective_state(const JobRecord& record, const SchedulerTable* table = nullptr);
JobState effective_state(const RecordSummary& summary, const SchedulerTable* table = nullptr);
// Node `number` of a job array not ended (`state`, queued or running, on
// record): interrupted when the scheduler ended or forgot its task.
JobState dispatched_node_state(const DispatchRecord& dispatch, const std::string& job_id, int number, JobState state,
                               const SchedulerTable* table);
// The scheduler's answer for every job of `summaries` effective_state would
// ask it about, in one question (none asked: an empty answer).
SchedulerTable ask_scheduler(const std::vector<const RecordSummary*>& summaries);
// Why a dispatched job shows as interrupted, in the scheduler's words; empty
// for a local job, or when the scheduler still has it.
std::string interrupted_reason(const JobRecord& record);

enum class RunnerStop {
  ended,          // it was running and has exited
  not_running,    // it was gone already
  still_running,  // it did not exit within the bound (or `give_up` said so)
  not_permitted,  // it is not ours to signal (another user's)
};
// Sends the runner SIGTERM (which cancels its job: it stops the sandbox,
// snapshots and writes the final record) and waits for it to exit, woken by
// its exit (a pidfd), at most `bound`; `give_up` is asked when a signal
// interrupts the wait.
RunnerStop stop_runner(const RunnerRecord& runner, std::chrono::milliseconds bound,
                       const std::function<bool()>& give_up);

}  // namespace mullet::jobs
