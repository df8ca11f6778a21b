#include "jobs/dispatch.hpp"

#include <algorithm>
#include <set>

#include "jobs/id.hpp"
#include "jobs/record.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

// sbatch, squeue and scontrol answer within seconds; a hung controller must
// not hang `list`.
constexpr int scheduler_deadline_seconds = 30;

std::string program(const std::string& name) {
  std::string found = util::find_in_path(name, util::host_path());
  if (found.empty()) {
    throw failure(name + " was not found in PATH", "install Slurm's client commands (slurm-wlm), or run locally");
  }
  return found;
}

util::CapturedRun run_scheduler(std::vector<std::string> argv) {
  argv[0] = program(argv[0]);
  util::SpawnOptions options;
  options.argv = std::move(argv);
  options.env = util::current_environment();
  return util::run_capture(options, {}, {scheduler_deadline_seconds, false});
}

// A path passed to the scheduler: absolute, one line, no NUL.
void check_path(const std::string& path, const std::string& what) {
  if (path.empty() || path[0] != '/' || path.find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
    throw failure("the " + what + " '" + util::terminal_safe(path) + "' cannot be given to the scheduler",
                  "it must be an absolute path on one line");
  }
}

SchedulerStatus status_of(const std::string& state) {
  static const std::vector<std::string> pending = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                                                   "RESV_DEL_HOLD"};
  static const std::vector<std::string> running = {"RUNNING",  "CONFIGURING", "COMPLETING", "SUSPENDED",
                                                   "RESIZING", "SIGNALING",   "STAGE_OUT",  "STOPPED"};
  if (std::find(pending.begin(), pending.end(), state) != pending.end()) return SchedulerStatus::pending;
  if (std::find(running.begin(), running.end(), state) != running.end()) return SchedulerStatus::running;
  return SchedulerStatus::ended;
}

class SlurmEngine : public DispatchEngine {
 public:
  std::string submit(const SubmitRequest& request) override {
    util::write_file(request.script_path, batch_script());
    const auto run = run_scheduler(sbatch_argv(request));
    if (!run.status.success()) {
      throw failure("sbatch refused job " + request.job_id + ": " + util::terminal_safe(util::trim(run.err)),
                    "check [dispatch] in your configuration and that the cluster is up (sinfo)");
    }
    // --parsable: "ID" or "ID;CLUSTER".
    std::string id = util::trim(run.out);
    id = id.substr(0, id.find(';'));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      throw failure("sbatch answered '" + util::terminal_safe(util::first_line(id, 80)) + "', not a job id");
    }
    return id;
  }

  // An array's id cancels every task of it, queued or running.
  void cancel(const std::string& scheduler_id, const std::string& repository_key, const std::string& job_id) override {
    const SchedulerView view = status(scheduler_id, job_id);
    require_this_job(view, scheduler_id, repository_key, job_id);
    // No name: the scheduler has no job of that id (an id it lists only
    // under another, say a task's own id): nothing of ours to cancel.
    if (view.name.empty()) return;
    const auto run = run_scheduler({"scancel", scheduler_id});
    if (!run.status.success()) {
      throw failure("scancel " + scheduler_id + " failed: " + util::terminal_safe(util::trim(run.err)));
    }
  }

  // `scontrol show job -o ID` for each job (an array's id lists all its
  // tasks), never the whole cluster's: other users' jobs are text we do
  // not parse (a job name can spell fields), and a big cluster's list is
  // unbounded.
  SchedulerTable query(const std::vector<std::string>& scheduler_ids) override {
    std::set<std::string> arrays;
    for (const auto& id : scheduler_ids) {
      if (!id.empty()) arrays.insert(array_job_of(id));
    }
    SchedulerTable table{true, {}};
    for (const auto& array : arrays) {
      util::CapturedRun run;
      try {
        run = run_scheduler({"scontrol", "show", "job", "-o", array});
      } catch (const Error&) {
        return {};
      }
      if (run.status.success()) {
        table.jobs.merge(parse_scontrol_jobs(run.out).jobs);
        continue;
      }
      // A job it no longer knows (MinJobAge passed, or a controller that
      // lost its state): ended, for all we can tell.
      if (run.err.find("Invalid job id") == std::string::npos) return {};
    }
    return table;
  }
};

// ArrayTaskId's task numbers: "3", "2-4,7", "1-9:2", "%N" (a throttle) cut
// off. Only the numbers a job of ours can have are entered: a huge array
// of someone else's costs nothing.
std::vector<int> array_tasks_of(const std::string& text) {
  constexpr int highest = max_nodes;
  std::vector<int> tasks;
  for (const auto& part : util::split(text.substr(0, text.find('%')), ',')) {
    const std::string range = part.substr(0, part.find(':'));
    const auto dash = range.find('-');
    const auto number = [](const std::string& digits) {
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
      return std::stoi(digits);
    };
    const int first = number(range.substr(0, dash));
    const int last = dash == std::string::npos ? first : number(range.substr(dash + 1));
    if (first < 0 || last < first) continue;
    for (int task = first; task <= std::min(last, highest); ++task) tasks.push_back(task);
  }
  return tasks;
}

constexpr const char* gone_state = "GONE";

}  // namespace

SchedulerView DispatchEngine::status(const std::string& scheduler_id, const std::string& job_id) {
  return query({scheduler_id}).view(scheduler_id, job_id);
}

SchedulerView SchedulerTable::view(const std::string& scheduler_id, const std::string& job_id) const {
  if (!answered) return {};
  SchedulerView found;
  if (const auto exact = jobs.find(scheduler_id); exact != jobs.end()) {
    found = exact->second;
  } else if (scheduler_id.find('_') == std::string::npos) {
    // An array's own id: its tasks together.
    const std::string prefix = scheduler_id + "_";
    bool any = false;
    for (auto task = jobs.lower_bound(prefix); task != jobs.end() && task->first.starts_with(prefix); ++task) {
      const SchedulerView& view = task->second;
      const bool better = !any ||
                          (view.status == SchedulerStatus::running && found.status != SchedulerStatus::running) ||
                          (view.status == SchedulerStatus::pending && found.status == SchedulerStatus::ended);
      if (better) found = view;
      any = true;
    }
    if (!any) return {SchedulerStatus::ended, gone_state, "the scheduler no longer knows the job", "", "", false};
  } else {
    return {SchedulerStatus::ended, gone_state, "the scheduler no longer knows the job", "", "", false};
  }
  if (!names_job(found.name, job_id)) {
    return {SchedulerStatus::ended,
            "NOT_THIS_JOB",
            "the scheduler's job " + scheduler_id + " is another job (named " +
                util::terminal_safe(util::first_line(found.name, 80)) + ")",
            "",
            found.name,
            true};
  }
  return found;
}

std::string batch_script() {
  return "#!/bin/sh\n# git-mullet: runs its arguments (the binary, __run-dispatched, the job's id)\nexec \"$@\"\n";
}

std::vector<std::string> sbatch_argv(const SubmitRequest& request) {
  check_path(request.binary, "git-mullet binary");
  check_path(request.repository, "repository path");
  check_path(request.script_path, "batch script path");
  check_path(request.output_path, "batch output path");
  if (!is_valid_job_id(request.job_id)) throw failure("internal error: '" + request.job_id + "' is not a job id");
  if (!is_repository_key(request.repository_key)) {
    throw failure("internal error: '" + request.repository_key + "' is not a repository key");
  }
  const std::int64_t minutes = std::max<std::int64_t>(1, (request.time_seconds + 59) / 60 + 1);
  std::vector<std::string> argv = {
      "sbatch", "--parsable", "--job-name=" + scheduler_job_name(request.repository_key, request.job_id),
      // Slurm takes --chdir as it is (22.05: a '%%' in it stays two).
      "--chdir=" + request.repository,
      // --output expands %j, %a...: the path's own '%' doubled, and
      // one log per task of an array (.1, .2...).
      "--output=" + escape_sbatch_pattern(request.output_path) + (request.array_tasks.empty() ? "" : ".%a"),
      "--time=" + std::to_string(minutes), "--cpus-per-task=" + std::to_string(request.dispatch.cpus), "--ntasks=1"};
  if (!request.array_tasks.empty()) {
    std::vector<std::string> tasks;
    for (const int task : request.array_tasks) {
      if (task < 1 || task > max_nodes) throw failure("internal error: array task " + std::to_string(task));
      tasks.push_back(std::to_string(task));
    }
    argv.push_back("--array=" + util::join(tasks, ","));
  }
  if (request.memory_mb > 0) argv.push_back("--mem=" + std::to_string(request.memory_mb) + "M");
  if (!request.dispatch.partition.empty()) argv.push_back("--partition=" + request.dispatch.partition);
  if (!request.dispatch.account.empty()) argv.push_back("--account=" + request.dispatch.account);
  for (const auto& extra : request.dispatch.sbatch_args) argv.push_back(extra);
  // What follows the script is its "$@": no shell parses it.
  argv.insert(argv.end(), {request.script_path, request.binary, "__run-dispatched", request.job_id});
  return argv;
}

bool is_this_job(const SchedulerView& view, const std::string& repository_key, const std::string& job_id) {
  return !view.foreign && view.status != SchedulerStatus::unknown &&
         (view.name.empty() || view.name == scheduler_job_name(repository_key, job_id));
}

void require_this_job(const SchedulerView& view, const std::string& scheduler_id, const std::string& repository_key,
                      const std::string& job_id) {
  if (is_this_job(view, repository_key, job_id)) return;
  const bool named = view.foreign || !view.name.empty();
  throw refused_error(
      "the scheduler's job " + scheduler_id + " is not known to be job " + job_id + " of this repository" +
          (named ? " (it is named '" + util::terminal_safe(view.name) + "')" : "") + "; nothing was cancelled",
      "a record fetched or copied from elsewhere may name any id; see it with: scontrol show job " + scheduler_id);
}

std::string scheduler_job_name(const std::string& repository_key, const std::string& job_id) {
  return "mullet-" + repository_key + "." + job_id;
}

bool names_job(const std::string& name, const std::string& job_id) {
  const std::string prefix = "mullet-";
  const std::string suffix = "." + job_id;
  if (name.size() != prefix.size() + repository_key_length + suffix.size()) return false;
  return name.starts_with(prefix) && name.ends_with(suffix) &&
         is_repository_key(name.substr(prefix.size(), repository_key_length));
}

SchedulerView parse_scontrol_job(const std::string& line) {
  SchedulerView view;
  std::set<std::string> seen;
  for (const auto& field : util::split(line, ' ')) {
    const auto equals = field.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = field.substr(0, equals);
    const std::string value = field.substr(equals + 1);
    if (!seen.insert(key).second) continue;
    if (key == "JobName") view.name = value;
    if (key == "JobState") view.state = value;
    if (key == "Reason") view.reason = value == "None" ? "" : value;
    if (key == "BatchHost" && value != "(null)") view.node = value;
  }
  view.status = view.state.empty() ? SchedulerStatus::unknown : status_of(view.state);
  return view;
}

SchedulerTable parse_scontrol_jobs(const std::string& output) {
  SchedulerTable table;
  table.answered = true;
  for (const auto& line : util::split(output, '\n')) {
    const SchedulerView view = parse_scontrol_job(line);
    if (view.status == SchedulerStatus::unknown) continue;
    std::string job;
    std::string array;
    std::string tasks;
    std::set<std::string> seen;
    for (const auto& field : util::split(line, ' ')) {
      const auto equals = field.find('=');
      if (equals == std::string::npos || !seen.insert(field.substr(0, equals)).second) continue;
      const std::string key = field.substr(0, equals);
      if (key == "JobId") job = field.substr(equals + 1);
      if (key == "ArrayJobId") array = field.substr(equals + 1);
      if (key == "ArrayTaskId") tasks = field.substr(equals + 1);
    }
    const bool array_task = !array.empty() && array != "(null)" && is_scheduler_id(array) && !tasks.empty();
    if (array_task) {
      for (const int task : array_tasks_of(tasks)) table.jobs[array + "_" + std::to_string(task)] = view;
    }
    // A task's own id too (21 for task 20_1): asked for by it, it is that
    // task, never "unknown"; an array's own id stays its tasks together.
    if (!job.empty() && is_scheduler_id(job) && (!array_task || job != array)) table.jobs[job] = view;
  }
  return table;
}

std::string array_job_of(const std::string& scheduler_id) {
  return scheduler_id.substr(0, scheduler_id.find('_'));
}

std::string escape_sbatch_pattern(const std::string& path) {
  std::string escaped;
  for (const char c : path) {
    if (c == '%') escaped += '%';
    escaped += c;
  }
  return escaped;
}

std::unique_ptr<DispatchEngine> make_dispatch_engine(const std::string& name) {
  if (name == "slurm") return std::make_unique<SlurmEngine>();
  throw usage_error("unknown dispatch engine '" + util::terminal_safe(name) + "'", "the engines: slurm");
}

}  // namespace mullet::jobs
