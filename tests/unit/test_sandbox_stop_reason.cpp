#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "jobs/record.hpp"
#include "sandbox/stop_reason.hpp"

using mullet::jobs::JobState;
using mullet::jobs::state_after;
using mullet::sandbox::describe_stop;
using mullet::sandbox::ended_by_itself;
using mullet::sandbox::parse_stop_reason;
using mullet::sandbox::stop_name;
using mullet::sandbox::stop_names;
using mullet::sandbox::StopReason;

TEST_CASE("stop reasons: the names the records have always held, each once") {
  const auto names = stop_names();
  CHECK(names == std::vector<std::string>{"exit", "signal", "timeout", "job_timeout", "inactivity", "memory", "disk",
                                          "stalled", "cancelled", "refused", "turns", "cost", "budget", "egress",
                                          "api_down", "worker_refused"});
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  for (const auto& name : names) {
    INFO(name);
    const auto reason = parse_stop_reason(name);
    REQUIRE(reason.has_value());
    CHECK(stop_name(*reason) == name);
  }
  for (const char* unknown : {"", "Exit", "exit ", "stopped: x", "none"}) {
    CHECK_FALSE(parse_stop_reason(unknown).has_value());
  }
}

TEST_CASE("stop reasons: exit and signal are no stop, the others say what stopped it") {
  CHECK(ended_by_itself(StopReason::exit));
  CHECK(ended_by_itself(StopReason::signal));
  CHECK(describe_stop(StopReason::exit) == "exit");
  CHECK(describe_stop(StopReason::signal) == "signal");
  for (const auto& name : stop_names()) {
    const StopReason reason = *parse_stop_reason(name);
    if (ended_by_itself(reason)) continue;
    INFO(name);
    CHECK(describe_stop(reason).rfind(name + ": ", 0) == 0);
    CHECK(describe_stop(reason).size() > name.size() + 10);
  }
  CHECK(describe_stop(StopReason::timeout) ==
        "timeout: the phase's wall-clock limit (limits.timeout, or the gate's timeout)");
  CHECK(describe_stop(StopReason::budget) == "budget: the job's metered API cost reached limits.cost_usd");
  CHECK(describe_stop(StopReason::egress).find("limits.egress_mb") != std::string::npos);
}

TEST_CASE("stop reasons: the state a job ends in") {
  CHECK(state_after(StopReason::cancelled) == JobState::cancelled);
  CHECK(state_after(StopReason::refused) == JobState::refused);
  CHECK(state_after(StopReason::worker_refused) == JobState::refused);
  for (const StopReason failed : {StopReason::exit, StopReason::signal, StopReason::timeout, StopReason::job_timeout,
                                  StopReason::inactivity, StopReason::memory, StopReason::disk, StopReason::stalled,
                                  StopReason::turns, StopReason::cost, StopReason::budget, StopReason::egress}) {
    INFO(stop_name(failed));
    CHECK(state_after(failed) == JobState::failed);
  }
}

TEST_CASE("stop reasons: the JSON schema names each one the records can hold") {
  std::ifstream file(std::string(MULLET_SOURCE_DIR) + "/docs/json-schema/git-mullet.schema.json");
  REQUIRE(file);
  const auto schema = nlohmann::json::parse(file);
  std::vector<std::string> listed;
  for (const auto& name : schema.at("$defs").at("stop_reason").at("enum")) {
    if (!name.get<std::string>().empty()) listed.push_back(name.get<std::string>());
  }
  CHECK(listed == stop_names());
}
