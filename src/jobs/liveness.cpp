#include "jobs/liveness.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "jobs/dispatch.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"

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

RunnerRecord current_runner(const std::string& repository) {
  const int pid = static_cast<int>(::getpid());
  return RunnerRecord{pid, start_ticks(pid), boot_id(), repository};
}

bool runner_of_another_repository(const RunnerRecord& runner, const std::string& repository) {
  return !runner.repository.empty() && runner.repository != repository;
}

bool runner_alive(const RunnerRecord& runner) {
  if (runner.pid <= 0 || runner.boot_id != boot_id()) return false;
  return start_ticks(runner.pid) == runner.start_ticks;
}

RunnerStop stop_runner(const RunnerRecord& runner, std::chrono::milliseconds bound,
                       const std::function<bool()>& give_up) {
  if (!runner_alive(runner)) return RunnerStop::not_running;
  // Opened before the signal and checked again after: the pid names the
  // runner, not a process that reused its number.
  UniqueFd exited(static_cast<int>(::syscall(SYS_pidfd_open, runner.pid, 0)));
  if (!runner_alive(runner)) return RunnerStop::not_running;
  if (::kill(runner.pid, SIGTERM) != 0) {
    return errno == EPERM ? RunnerStop::not_permitted : RunnerStop::not_running;
  }
  const std::int64_t deadline = util::monotonic_ms() + bound.count();
  while (runner_alive(runner)) {
    const std::int64_t left = deadline - util::monotonic_ms();
    if (left <= 0) return RunnerStop::still_running;
    if (!exited) {
      // A kernel without pidfds (before 5.3): looked at again and again.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(left, 50)));
      continue;
    }
    // Readable once it exited, zombie or not.
    pollfd watched{exited.get(), POLLIN, 0};
    const int ready = ::poll(&watched, 1, static_cast<int>(std::min<std::int64_t>(left, 60000)));
    if (ready > 0) return RunnerStop::ended;
    if (ready < 0 && errno == EINTR && give_up()) return RunnerStop::still_running;
  }
  return RunnerStop::ended;
}

namespace {

// Whether the scheduler's view decides: a dispatched job not ended whose
// runner, if any, is on another machine (on this one its pid tells); every
// job array not ended (its tasks' runners are not on record).
template <typename Record>
bool scheduler_decides(const Record& record) {
  if (!record.dispatch || record.dispatch->scheduler_id.empty() || !is_active(record.state)) return false;
  return !record.nodes.empty() || record.state == JobState::queued || record.runner.boot_id != boot_id();
}

// The scheduler's view of the job: from `table`, else asked (once for all
// of a job array's tasks).
template <typename Record>
SchedulerTable answer_for(const Record& record, const SchedulerTable* table) {
  if (table != nullptr) return *table;
  return make_dispatch_engine(record.dispatch->engine)->query({record.dispatch->scheduler_id});
}

// For a whole record and its summary alike: the fields are the same.
template <typename Record>
JobState effective_state_of(const Record& record, const SchedulerTable* table) {
  if (scheduler_decides(record) && !record.nodes.empty()) {
    const SchedulerTable answer = answer_for(record, table);
    bool running = false;
    bool queued = false;
    for (const auto& node : record.nodes) {
      if (!is_active(node.state)) continue;
      const JobState state = dispatched_node_state(*record.dispatch, record.id, node.number, node.state, &answer);
      running = running || state == JobState::running;
      queued = queued || state == JobState::queued;
    }
    if (running) return JobState::running;
    return queued ? JobState::queued : JobState::interrupted;
  }
  if (scheduler_decides(record)) {
    const auto view = answer_for(record, table).view(record.dispatch->scheduler_id, record.id);
    // Pending or running, or no answer: as the record says.
    return view.status == SchedulerStatus::ended ? JobState::interrupted : record.state;
  }
  if (record.state == JobState::running && !runner_alive(record.runner)) return JobState::interrupted;
  return record.state;
}

}  // namespace

JobState effective_state(const JobRecord& record, const SchedulerTable* table) {
  return effective_state_of(record, table);
}
JobState effective_state(const RecordSummary& summary, const SchedulerTable* table) {
  return effective_state_of(summary, table);
}

JobState dispatched_node_state(const DispatchRecord& dispatch, const std::string& job_id, int number, JobState state,
                               const SchedulerTable* table) {
  if (!is_active(state) || dispatch.scheduler_id.empty()) return state;
  const std::string task = dispatch.scheduler_id + "_" + std::to_string(number);
  const auto view =
      table != nullptr ? table->view(task, job_id) : make_dispatch_engine(dispatch.engine)->status(task, job_id);
  return view.status == SchedulerStatus::ended ? JobState::interrupted : state;
}

SchedulerTable ask_scheduler(const std::vector<const RecordSummary*>& summaries) {
  std::vector<std::string> ids;
  std::string engine;
  for (const auto* summary : summaries) {
    if (!scheduler_decides(*summary)) continue;
    ids.push_back(summary->dispatch->scheduler_id);
    engine = summary->dispatch->engine;
  }
  if (ids.empty()) return {true, {}};
  // Records name one engine (record.cpp accepts "slurm" only).
  return make_dispatch_engine(engine)->query(ids);
}

std::string interrupted_reason(const JobRecord& record) {
  if (!record.dispatch) return "";
  if (!record.dispatch->reason.empty()) return record.dispatch->reason;
  if (record.dispatch->scheduler_id.empty()) return "";
  const auto view = make_dispatch_engine(record.dispatch->engine)->status(record.dispatch->scheduler_id, record.id);
  if (view.status != SchedulerStatus::ended) return "";
  return "the scheduler ended " + record.dispatch->engine + " job " + record.dispatch->scheduler_id + " (" +
         view.state + (view.reason.empty() ? "" : ": " + view.reason) + ") before the job ended";
}

}  // namespace mullet::jobs
