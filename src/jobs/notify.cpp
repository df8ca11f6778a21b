#include "jobs/notify.hpp"

#include "util/strings.hpp"

namespace mullet::jobs {

util::Environment notify_environment(const util::Environment& ours, const JobRecord& record) {
  util::Environment env = ours;
  env["MULLET_JOB_ID"] = record.id;
  env["MULLET_JOB_STATE"] = state_name(record.state);
  return env;
}

std::string notify_job_end(const std::vector<std::string>& command, const JobRecord& record) {
  if (command.empty()) return {};
  const std::string shown =
      "[run] notify (" + util::terminal_safe(util::first_line(util::shell_join(command), 80)) + ")";
  try {
    util::SpawnOptions options;
    options.argv = command;
    options.argv[0] = util::find_in_path(command[0], util::host_path());
    if (options.argv[0].empty()) return shown + ": " + util::terminal_safe(command[0]) + " is not found on PATH";
    options.env = notify_environment(util::current_environment(), record);
    // Not cancellable: a job stopped by a signal is one to be told about.
    const auto run = util::run_capture(options, to_json(record).dump() + "\n", {notify_deadline_seconds, false});
    if (run.status.success()) return {};
    std::string problem = shown + " " + run.status.describe();
    // Its own words, which may quote the record: one safe line.
    if (const std::string said = util::trim(util::tail(run.err, 200)); !said.empty()) {
      problem += ": " + util::terminal_safe(util::first_line(said, 200));
    }
    return problem;
  } catch (const std::exception& error) {
    return shown + ": " + util::terminal_safe(error.what());
  }
}

}  // namespace mullet::jobs
