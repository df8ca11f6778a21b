// `git mullet doctor`: every requirement of the walls, checked on this host.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mullet::sandbox {

struct Check {
  std::string name;
  bool ok = false;
  bool required = true;  // a failed required check means jobs are refused
  std::string detail;    // what was found
  std::string fix;       // what to do when it failed
};

// `sandbox_uid`: the host uid the test sandbox runs as (as root: one of the
// range jobs take their uids from).
// `cgroup_setting`: the user's [sandbox] cgroup.
std::vector<Check> run_doctor_checks(std::optional<uid_t> sandbox_uid, const std::string& cgroup_setting);
nlohmann::json checks_to_json(const std::vector<Check>& checks);

// Pure: a hint for what bubblewrap printed when it could not start.
std::string diagnose_bwrap_failure(const std::string& bwrap_output);

// How limits are enforced on this host, in words (also shown by doctor).
std::string limits_mechanism(const std::string& cgroup_setting);

}  // namespace mullet::sandbox
