#include "jobs/run_job.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "executors/executor.hpp"
#include "git/clone.hpp"
#include "git/snapshot.hpp"
#include "jobs/id.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "sandbox/host.hpp"
#include "sandbox/policy.hpp"
#include "sandbox/runner.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

constexpr std::size_t log_kept_bytes = 8U << 20U;
constexpr std::size_t phase_tail_bytes = 4096;

sandbox::Plan plan_for(const git::Repository& repo, const config::Config& config, const JobPaths& paths,
                       const executors::WorkerSpec& spec) {
  sandbox::PolicyInputs in;
  in.phase = "worker";
  in.work_tree = paths.work_tree;
  in.clone_git_dir = paths.git_dir;
  in.objects_dir = util::real_path(repo.objects_dir());
  in.home_dir = paths.home;
  in.helper_binary = util::self_executable();
  in.tmp_name = "mullet-" + util::random_hex(4);
  in.root_entries = sandbox::scan_host_root();
  in.host_env = sandbox::current_environment();
  in.extra_env_names = config.list("sandbox.env");
  in.executor_env = spec.env;
  in.executor_mounts = spec.mounts;
  in.command = spec.command;
  in.limits = {config.integer("limits.timeout"), config.integer("limits.inactivity"), config.integer("limits.memory_mb"),
               config.integer("limits.processes"), config.integer("limits.disk_mb")};
  in.feeds_stdin = true;
  if (::geteuid() == 0) {
    in.host_uid = static_cast<uid_t>(config.integer("sandbox.uid"));
    in.host_gid = static_cast<gid_t>(config.integer("sandbox.uid"));
  }
  return sandbox::build_plan(in);
}

std::string snapshot_message(const JobRecord& record) {
  return (record.title.empty() ? "git-mullet job " + record.id : record.title) + "\n\nMade by git-mullet job " +
         record.id + " (executor: " + record.executor.name + ").\n\nMullet-Job: " + record.id + "\n";
}

}  // namespace

int exit_code_for(JobState state) {
  switch (state) {
    case JobState::succeeded:
    case JobState::no_changes:
    case JobState::running: return static_cast<int>(ExitCode::ok);
    case JobState::refused: return static_cast<int>(ExitCode::refused);
    case JobState::failed:
    case JobState::cancelled:
    case JobState::interrupted: return static_cast<int>(ExitCode::job_failed);
  }
  return static_cast<int>(ExitCode::job_failed);
}

sandbox::Plan worker_plan(const git::Repository& repo, const config::Config& config, const std::string& job_id,
                          const std::string& prompt) {
  const auto executor = executors::make_executor(config.string("run.executor"));
  const auto spec = executor->prepare({prompt, config});
  return plan_for(repo, config, job_paths(repo, job_id), spec);
}

RunOutcome run_job(const git::Repository& repo, const config::Config& config, const RunRequest& request) {
  // Everything that can be refused is refused before a job exists.
  const auto executor = executors::make_executor(config.string("run.executor"));
  const auto spec = executor->prepare({request.prompt, config});
  sandbox::find_bwrap();
  ::umask(022);

  JobStore store(repo);
  JobRecord record;
  record.id = new_job_id();
  record.title = request.title.empty() ? util::first_line(request.prompt, 72) : request.title;
  record.prompt = request.prompt;
  record.base = git::oid_to_string(request.base);
  record.executor = spec.record;
  record.created_at = util::now_utc();
  record.runner = current_runner();
  git_oid current = store.create(record);

  const JobPaths paths = job_paths(repo, record.id);
  std::string kept_log;
  std::string hint;
  try {
    util::make_dirs(util::real_path(repo.common_dir()) + "/mullet/jobs", 0700);
    util::make_dirs(paths.root, 0700);
    git::create_private_clone(repo, request.base, {paths.git_dir, paths.work_tree}, sandbox::inside::git_dir);
    util::make_dirs(paths.home, 0700);
    const sandbox::Plan plan = plan_for(repo, config, paths, spec);
    if (plan.host_uid) {
      util::chown_tree(paths.work_tree, *plan.host_uid, *plan.host_gid);
      util::chown_tree(paths.home, *plan.host_uid, *plan.host_gid);
    }

    UniqueFd log_fd(::open(paths.worker_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!log_fd) throw failure("cannot write " + paths.worker_log + ": " + util::errno_text(errno));
    sandbox::RunIo io;
    io.stdin_data = spec.stdin_data;
    io.on_output = [&](std::string_view chunk) {
      [[maybe_unused]] auto ignored = ::write(log_fd.get(), chunk.data(), chunk.size());
      kept_log.append(chunk);
      if (kept_log.size() > 2 * log_kept_bytes) kept_log = util::tail(kept_log, log_kept_bytes);
      if (request.show_worker_output) std::cerr.write(chunk.data(), static_cast<std::streamsize>(chunk.size())).flush();
    };
    const sandbox::RunResult run = sandbox::run_sandboxed(plan, io);
    record.phases.push_back(PhaseRecord{"worker", plan.command, run.status.code, run.ended_by, run.duration_ms,
                                        util::tail(kept_log, phase_tail_bytes)});
    const auto outcome = executor->interpret(run, kept_log);

    const git::Snapshot snapshot = git::take_snapshot(repo, {paths.git_dir, paths.work_tree}, {});
    record.snapshot_warnings = snapshot.warnings;
    const git_oid base_tree = repo.tree_of(request.base);
    const bool changed = git_oid_cmp(&snapshot.tree, &base_tree) != 0;
    if (changed) {
      record.result = git::oid_to_string(git::commit_snapshot(repo, snapshot.tree, request.base, snapshot_message(record)));
    }
    if (run.ended_by == "cancelled") {
      record.state = JobState::cancelled;
      record.error = "cancelled by signal";
    } else if (run.ended_by == "refused") {
      record.state = JobState::refused;
      record.error = "the wall check inside the sandbox failed";
    } else if (!outcome.success) {
      record.state = JobState::failed;
      record.error = outcome.error;
    } else {
      record.state = changed ? JobState::succeeded : JobState::no_changes;
    }
  } catch (const Error& error) {
    record.state = error.code() == ExitCode::refused ? JobState::refused : JobState::failed;
    record.error = error.what();
    hint = error.hint();
  } catch (const std::exception& error) {
    record.state = JobState::failed;
    record.error = std::string("internal error: ") + error.what();
  }
  record.finished_at = util::now_utc();
  std::map<std::string, std::string> files;
  files["worker.log"] = util::tail(kept_log, log_kept_bytes);
  const auto finished = store.update(
      record.id, [&](JobRecord& stored) { stored = record; }, files);
  (void)current;
  return RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
}

}  // namespace mullet::jobs
