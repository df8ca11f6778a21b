// Job ids: short random hex, typed by users as any unique prefix.
#pragma once

#include <string>
#include <vector>

#include "util/error.hpp"

namespace mullet::jobs {

inline constexpr std::size_t job_id_length = 10;

std::string new_job_id();
bool is_valid_job_id(const std::string& text);
// The one id among `known` that starts with `prefix`: a usage error when none
// or several match (the message lists the matches).
Result<std::string> match_job_id(const std::vector<std::string>& known, const std::string& prefix);

}  // namespace mullet::jobs
