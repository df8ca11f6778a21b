// How a sandbox's run ended: by itself (exit, signal), or stopped by one of
// our watches (the runner's, the job's, or the worker's executor's). The job
// record keeps each reason's name; stop_reason.cpp holds the one table of
// names and descriptions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mullet::sandbox {

enum class StopReason {
  exit,            // the command exited
  signal,          // a signal ended the command
  timeout,         // the phase's wall clock (limits.timeout, a gate's timeout)
  job_timeout,     // what remained of limits.job_timeout
  inactivity,      // no output for limits.inactivity
  memory,          // limits.memory_mb
  disk,            // limits.disk_mb
  stalled,         // nothing left in the sandbox could ever run again
  cancelled,       // SIGINT or SIGTERM to git-mullet
  refused,         // the wall check inside the sandbox failed
  turns,           // limits.turns (the executor's session)
  cost,            // limits.cost_usd, as the worker reports it (the executor's session)
  budget,          // limits.cost_usd, as the credential endpoint meters it
  egress,          // limits.egress_mb: what the job sent upstream (egress proxy and credential endpoint)
  api_down,        // the credential endpoint could not reach the model API, request after request
  worker_refused,  // the executor saw the worker start other than asked (the last: stop_reason.cpp)
};

// The name the record keeps: "job_timeout".
std::string stop_name(StopReason reason);
// nullopt for a name that is none of the table's.
std::optional<StopReason> parse_stop_reason(std::string_view name);
// Every name, in the table's order.
std::vector<std::string> stop_names();

// For a person: "timeout: the phase's wall-clock limit (...)". exit and
// signal are no stop: just their names (the exit status says the rest).
std::string describe_stop(StopReason reason);

// exit or signal: the command ended by itself, and its exit status tells how.
bool ended_by_itself(StopReason reason);

}  // namespace mullet::sandbox
