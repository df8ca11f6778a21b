#include "jobs/id.hpp"

#include <algorithm>

#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {

std::string new_job_id() {
  return util::random_hex(job_id_length);
}

bool is_repository_key(const std::string& text) {
  return text.size() == repository_key_length && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool is_valid_job_id(const std::string& text) {
  return text.size() == job_id_length && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Result<std::string> match_job_id(const std::vector<std::string>& known, const std::string& prefix) {
  if (prefix.empty()) return fail(usage_error("no job named", "give a job id or a unique prefix of one"));
  std::vector<std::string> matches;
  for (const auto& id : known) {
    if (id.compare(0, prefix.size(), prefix) == 0) matches.push_back(id);
  }
  std::sort(matches.begin(), matches.end());
  if (matches.empty()) {
    return fail(usage_error("no job matches '" + prefix + "'",
                            "see `git mullet list`; a discarded job is listed by `git reflog refs/mullet/discarded`"));
  }
  if (matches.size() > 1) {
    return fail(usage_error("job id '" + prefix + "' is ambiguous; it matches: " + util::join(matches, ", "),
                            "type more of the id"));
  }
  return matches.front();
}

Result<JobAddress> parse_job_address(const std::string& text, int most_nodes) {
  const auto slash = text.rfind('/');
  if (slash == std::string::npos) return JobAddress{text, 0};
  const std::string job = text.substr(0, slash);
  const std::string number = text.substr(slash + 1);
  const std::string hint = "name a node as JOB/N, N from 1 to " + std::to_string(most_nodes);
  if (job.empty()) return fail(usage_error("no job named before '/' in '" + text + "'", hint));
  if (number.empty() || number.size() > 3 || number.find_first_not_of("0123456789") != std::string::npos ||
      number[0] == '0' || std::stoi(number) > most_nodes) {
    return fail(usage_error("'" + number + "' in '" + text + "' is not a node number", hint));
  }
  return JobAddress{job, std::stoi(number)};
}

Result<int> check_node_number(const std::string& id, int node, std::size_t node_count) {
  if (node == 0) return 0;
  if (node_count == 0) {
    return fail(usage_error("job " + id + " is a job of one node; it has no node " + std::to_string(node),
                            "name the job itself: " + id));
  }
  if (static_cast<std::size_t>(node) > node_count) {
    return fail(usage_error(
        "job " + id + " has " + std::to_string(node_count) + " nodes; there is no node " + std::to_string(node),
        "see them with: git mullet show " + id));
  }
  return node;
}

}  // namespace mullet::jobs
