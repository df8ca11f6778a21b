#include "jobs/liveness.hpp"

#include <unistd.h>

#include <cstdlib>

#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

std::string boot_id() {
  return util::trim(util::read_file_if_exists("/proc/sys/kernel/random/boot_id").value_or(""));
}

std::uint64_t start_ticks(int pid) {
  const auto stat = util::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  const auto close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  const auto fields = util::split(stat->substr(close + 2), ' ');
  return fields.size() > 19 ? std::strtoull(fields[19].c_str(), nullptr, 10) : 0;
}

}  // namespace

RunnerRecord current_runner() {
  const int pid = static_cast<int>(::getpid());
  return RunnerRecord{pid, start_ticks(pid), boot_id()};
}

bool runner_alive(const RunnerRecord& runner) {
  if (runner.pid <= 0 || runner.boot_id != boot_id()) return false;
  return start_ticks(runner.pid) == runner.start_ticks;
}

JobState effective_state(const JobRecord& record) {
  if (record.state == JobState::running && !runner_alive(record.runner)) return JobState::interrupted;
  return record.state;
}

}  // namespace mullet::jobs
