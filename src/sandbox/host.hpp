// What the policy needs to know about the host, read once (impure).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sandbox/policy.hpp"

namespace mullet::sandbox {

std::vector<RootEntry> scan_host_root();

}  // namespace mullet::sandbox
