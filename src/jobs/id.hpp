// Job ids: short random hex, typed by users as any unique prefix.
#pragma once

#include <string>
#include <vector>

#include "util/error.hpp"

namespace mullet::jobs {

inline constexpr std::size_t job_id_length = 10;
// A repository's key (jobs/layout.hpp: repository_key): 8 lowercase hex digits.
inline constexpr std::size_t repository_key_length = 8;
bool is_repository_key(const std::string& text);

std::string new_job_id();
bool is_valid_job_id(const std::string& text);
// The one id among `known` that starts with `prefix`: a usage error when none
// or several match (the message lists the matches).
Result<std::string> match_job_id(const std::vector<std::string>& known, const std::string& prefix);

// What a command names: a job (any unique prefix of its id), or one node of
// a job of several, `ID/N`.
struct JobAddress {
  std::string job;  // the prefix as given
  int node = 0;     // 0: the job as a whole
  bool operator==(const JobAddress&) const = default;
};
// Splits at the last '/': N must be 1..`most_nodes` in decimal, no sign, no
// leading zero. A usage error otherwise.
Result<JobAddress> parse_job_address(const std::string& text, int most_nodes);
// A usage error unless `node` is 0 or one of the job's `node_count` nodes (a
// job of one node has none to address).
Result<int> check_node_number(const std::string& id, int node, std::size_t node_count);

}  // namespace mullet::jobs
