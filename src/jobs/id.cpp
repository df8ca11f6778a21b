#include "jobs/id.hpp"

#include <algorithm>

#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {

std::string new_job_id() {
  return util::random_hex(job_id_length);
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

}  // namespace mullet::jobs
