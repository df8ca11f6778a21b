#include "sandbox/stop_reason.hpp"

#include <array>
#include <cstddef>

namespace mullet::sandbox {
namespace {

struct StopEntry {
  StopReason reason;
  const char* name;
  const char* meaning;  // empty: no stop
};

// In the enum's order, one row per reason (checked below).
constexpr std::array<StopEntry, 16> stop_table = {{
    {StopReason::exit, "exit", ""},
    {StopReason::signal, "signal", ""},
    {StopReason::timeout, "timeout", "the phase's wall-clock limit (limits.timeout, or the gate's timeout)"},
    {StopReason::job_timeout, "job_timeout", "the job's wall-clock limit (limits.job_timeout)"},
    {StopReason::inactivity, "inactivity", "no output for limits.inactivity seconds"},
    {StopReason::memory, "memory", "the memory limit (limits.memory_mb)"},
    {StopReason::disk, "disk", "the disk limit (limits.disk_mb)"},
    {StopReason::stalled, "stalled",
     "every process left in the sandbox was stopped, so none could run again (the worker was gone)"},
    {StopReason::cancelled, "cancelled", "git-mullet was interrupted (SIGINT or SIGTERM)"},
    {StopReason::refused, "refused", "the wall check inside the sandbox failed"},
    {StopReason::turns, "turns", "the turn limit (limits.turns)"},
    {StopReason::cost, "cost", "the cost limit (limits.cost_usd)"},
    {StopReason::budget, "budget", "the job's metered API cost reached limits.cost_usd"},
    {StopReason::egress, "egress",
     "the job's uploads (bytes sent upstream through the egress proxy and the API endpoint) reached "
     "limits.egress_mb"},
    {StopReason::api_down, "api_down",
     "the model API could not be reached: the credential endpoint failed to connect to it (or to verify its "
     "certificate) for several requests in a row"},
    {StopReason::worker_refused, "worker_refused",
     "the worker did not start as git-mullet asked, so its executor stopped it"},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < stop_table.size(); ++i) {
    if (static_cast<std::size_t>(stop_table[i].reason) != i) return false;
  }
  return stop_table.back().reason == StopReason::worker_refused;  // the last enumerator
}
static_assert(in_enum_order(), "stop_table has one row per StopReason, in the enum's order");

const StopEntry& entry_of(StopReason reason) {
  return stop_table.at(static_cast<std::size_t>(reason));
}

}  // namespace

std::string stop_name(StopReason reason) {
  return entry_of(reason).name;
}

std::optional<StopReason> parse_stop_reason(std::string_view name) {
  for (const auto& entry : stop_table) {
    if (name == entry.name) return entry.reason;
  }
  return std::nullopt;
}

std::vector<std::string> stop_names() {
  std::vector<std::string> names;
  for (const auto& entry : stop_table) names.emplace_back(entry.name);
  return names;
}

std::string describe_stop(StopReason reason) {
  const StopEntry& entry = entry_of(reason);
  const std::string name = entry.name;
  return *entry.meaning == '\0' ? name : name + ": " + entry.meaning;
}

bool ended_by_itself(StopReason reason) {
  return reason == StopReason::exit || reason == StopReason::signal;
}

}  // namespace mullet::sandbox
