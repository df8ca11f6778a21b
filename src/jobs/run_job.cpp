#include "jobs/run_job.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <spdlog/spdlog.h>

#include "executors/executor.hpp"
#include "git/cli.hpp"
#include "git/clone.hpp"
#include "git/snapshot.hpp"
#include "jobs/id.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/slots.hpp"
#include "jobs/store.hpp"
#include "sandbox/host.hpp"
#include "sandbox/policy.hpp"
#include "sandbox/proxy.hpp"
#include "sandbox/runner.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

constexpr std::size_t log_kept_bytes = 8U << 20U;
constexpr std::size_t phase_tail_bytes = 4096;
constexpr std::size_t events_kept_bytes = 64U << 20U;

// What one phase runs, before it becomes a sandbox plan.
struct PhaseSpec {
  std::string name;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::vector<sandbox::Mount> mounts;
  std::string stdin_data;
  std::vector<std::string> grants;
  // The worker's session watches its output; stdout is an event stream
  // kept apart (events.jsonl) when structured_stdout.
  executors::WorkerSession* session = nullptr;
  bool structured_stdout = false;
};

sandbox::Plan plan_for(const git::Repository& repo, const config::Config& config, const JobPaths& paths,
                       const PhaseSpec& phase, const std::string& proxy_socket) {
  sandbox::PolicyInputs in;
  in.phase = phase.name;
  in.work_tree = paths.work_tree;
  in.clone_git_dir = paths.git_dir;
  in.objects_dir = util::real_path(repo.objects_dir());
  in.borrowed_objects = git::borrowed_object_dirs(in.objects_dir);
  for (const auto& dir : in.borrowed_objects) {
    if (util::exists(dir + "/info/alternates")) in.dirs_with_alternates.push_back(dir);
  }
  if (util::exists(in.objects_dir + "/info/alternates")) in.dirs_with_alternates.push_back(in.objects_dir);
  in.home_dir = paths.home;
  in.helper_binary = util::self_executable();
  in.empty_file = paths.root + "/empty";
  in.tmp_name = "mullet-" + util::random_hex(4);
  in.root_entries = sandbox::scan_host_root();
  in.host_env = sandbox::current_environment();
  in.extra_env_names = config.list("sandbox.env");
  in.executor_env = phase.env;
  in.executor_mounts = phase.mounts;
  in.command = phase.command;
  in.limits = {config.integer("limits.timeout"), config.integer("limits.inactivity"),
               config.integer("limits.memory_mb"), config.integer("limits.processes"),
               config.integer("limits.disk_mb")};
  in.network = {phase.grants, proxy_socket};
  in.feeds_stdin = !phase.stdin_data.empty();
  if (::geteuid() == 0) {
    in.host_uid = static_cast<uid_t>(config.integer("sandbox.uid"));
    in.host_gid = static_cast<gid_t>(config.integer("sandbox.uid"));
  }
  return sandbox::build_plan(in);
}

PhaseSpec setup_phase(const config::Config& config) {
  return {"setup", {"/bin/sh", "-c", config.string("run.setup")}, {}, {}, {}, config.list("network.setup")};
}

PhaseSpec worker_phase(const config::Config& config, const JobPaths& paths, const executors::WorkerSpec& spec) {
  PhaseSpec phase{"worker", spec.command, spec.env, spec.mounts, spec.stdin_data, config.list("network.worker")};
  for (const auto& grant : spec.grants) {
    if (std::find(phase.grants.begin(), phase.grants.end(), grant) == phase.grants.end()) phase.grants.push_back(grant);
  }
  if (!spec.files.empty()) {
    phase.mounts.push_back({sandbox::MountKind::read_only_bind, paths.executor_files, executors::files_inside});
  }
  phase.structured_stdout = spec.structured_stdout;
  return phase;
}

void write_executor_files(const JobPaths& paths, const std::vector<executors::GeneratedFile>& files) {
  if (files.empty()) return;
  util::make_dirs(paths.executor_files, 0755);
  for (const auto& file : files) util::write_file(paths.executor_files + "/" + file.name, file.content, 0444);
}

// Dependency directories setup created: read-only for every later phase.
std::vector<sandbox::Mount> read_only_mounts(const JobPaths& paths, const std::vector<std::string>& dirs) {
  std::vector<sandbox::Mount> mounts;
  for (const auto& dir : dirs) {
    mounts.push_back({sandbox::MountKind::read_only_bind, paths.work_tree + "/" + dir,
                      std::string(sandbox::inside::work_tree) + "/" + dir});
  }
  return mounts;
}

std::vector<std::string> existing_top_level_dirs(const JobPaths& paths, const std::vector<std::string>& names) {
  std::vector<std::string> found;
  for (const auto& name : names) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == ".git") continue;
    if (util::is_directory(paths.work_tree + "/" + name)) found.push_back(name);
  }
  return found;
}

std::string snapshot_message(const JobRecord& record) {
  return (record.title.empty() ? "git-mullet job " + record.id : record.title) + "\n\nMade by git-mullet job " +
         record.id + " (executor: " + record.executor.name + ").\n\nMullet-Job: " + record.id + "\n";
}

// Runs phases of one job: their output goes to the job's log (and our
// stderr), each gets its own egress proxy when it has grants.
class PhaseRunner {
 public:
  PhaseRunner(const git::Repository& repo, const config::Config& config, const JobPaths& paths, bool echo)
      : m_repo(repo), m_config(config), m_paths(paths), m_echo(echo) {
    m_log_fd = open_log(paths.worker_log);
  }

  std::pair<sandbox::RunResult, PhaseRecord> run(const PhaseSpec& phase) {
    std::unique_ptr<sandbox::EgressProxy> proxy;
    std::string proxy_dir;
    std::string socket;
    if (!phase.grants.empty()) {
      // A short path of our own: unix socket paths are limited to 107 bytes.
      proxy_dir = util::make_temp_dir("/tmp", "mullet-proxy-");
      socket = proxy_dir + "/proxy.sock";
      proxy = std::make_unique<sandbox::EgressProxy>(phase.grants, socket);
      proxy->start();
    }
    const sandbox::Plan plan = plan_for(m_repo, m_config, m_paths, phase, socket);
    std::string output;
    sandbox::RunIo io;
    io.stdin_data = phase.stdin_data;
    const auto to_log = [&](std::string_view chunk) {
      [[maybe_unused]] auto ignored = ::write(m_log_fd.get(), chunk.data(), chunk.size());
      output.append(chunk);
      if (output.size() > 2 * log_kept_bytes) output = util::tail(output, log_kept_bytes);
    };
    UniqueFd events_fd;
    if (phase.session == nullptr) {
      io.on_output = [&](std::string_view chunk) {
        to_log(chunk);
        if (m_echo) std::cerr.write(chunk.data(), static_cast<std::streamsize>(chunk.size())).flush();
      };
    } else if (!phase.structured_stdout) {
      io.on_output = [&](std::string_view chunk) {
        to_log(chunk);
        phase.session->on_stdout(chunk);
      };
    } else {
      events_fd = open_log(m_paths.events_log);
      io.on_output = [&](std::string_view chunk) {
        [[maybe_unused]] auto ignored = ::write(events_fd.get(), chunk.data(), chunk.size());
        phase.session->on_stdout(chunk);
      };
      io.on_error_output = [&](std::string_view chunk) {
        to_log(chunk);
        phase.session->on_stderr(chunk);
      };
    }
    if (phase.session != nullptr) io.poll = [&] { return phase.session->poll(); };
    auto cleanup = [&] {
      if (proxy) proxy->stop();
      if (!proxy_dir.empty()) util::remove_tree(proxy_dir);
    };
    sandbox::RunResult result;
    try {
      result = sandbox::run_sandboxed(plan, io);
    } catch (...) {
      cleanup();
      throw;
    }
    PhaseRecord record{phase.name,      plan.command,           result.status.code,
                       result.ended_by, result.duration_ms,     util::tail(output, phase_tail_bytes),
                       phase.grants,    nlohmann::json::array()};
    if (proxy) {
      proxy->stop();
      record.network = proxy->decisions_json();
    }
    cleanup();
    m_log += output;
    if (m_log.size() > 2 * log_kept_bytes) m_log = util::tail(m_log, log_kept_bytes);
    return {result, record};
  }

  const std::string& log() const { return m_log; }

 private:
  static UniqueFd open_log(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw failure("cannot write " + path + ": " + util::errno_text(errno));
    return fd;
  }

  const git::Repository& m_repo;
  const config::Config& m_config;
  const JobPaths& m_paths;
  bool m_echo;
  UniqueFd m_log_fd;
  std::string m_log;
};

bool ended_normally(const sandbox::RunResult& run) {
  return run.ended_by == "exit" || run.ended_by == "signal";
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

std::vector<sandbox::Plan> job_plans(const git::Repository& repo, const config::Config& config,
                                     const std::string& job_id, const std::string& prompt) {
  const auto executor = executors::make_executor(config.string("run.executor"));
  util::make_dirs(jobs_directory(repo), 0711);
  const auto spec = executor->prepare({prompt, config, jobs_directory(repo)});
  const JobPaths paths = job_paths(repo, job_id);
  const std::string socket_placeholder = "/tmp/mullet-proxy-XXXXXX/proxy.sock";
  std::vector<sandbox::Plan> plans;
  if (!config.string("run.setup").empty()) {
    const auto setup = setup_phase(config);
    plans.push_back(plan_for(repo, config, paths, setup, setup.grants.empty() ? "" : socket_placeholder));
  }
  const auto worker = worker_phase(config, paths, spec);
  plans.push_back(plan_for(repo, config, paths, worker, worker.grants.empty() ? "" : socket_placeholder));
  return plans;
}

RunOutcome run_job(const git::Repository& repo, const config::Config& config, const RunRequest& request) {
  // Everything that can be refused is refused before a job exists.
  const auto executor = executors::make_executor(config.string("run.executor"));
  util::make_dirs(jobs_directory(repo), 0711);
  const auto spec = executor->prepare({request.prompt, config, jobs_directory(repo)});
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
  store.create(record);
  if (request.on_created) request.on_created(record.id);

  const JobPaths paths = job_paths(repo, record.id);
  const Slot slot = acquire_slot(
      util::real_path(repo.common_dir()) + "/mullet/slots", config.integer("run.max_parallel"),
      [] { return util::cancel_requested(); },
      [&] {
        if (request.show_worker_output) {
          std::cerr << "git mullet: job " << record.id << " waits for a free slot ([run] max_parallel = "
                    << config.integer("run.max_parallel") << ")\n";
        }
      });
  std::string log;
  std::string hint;
  try {
    util::make_dirs(paths.root, 0711);
    git::create_private_clone(repo, request.base, {paths.git_dir, paths.work_tree}, sandbox::inside::git_dir);
    util::make_dirs(paths.home, 0700);
    util::write_file(paths.root + "/empty", "", 0444);
    write_executor_files(paths, spec.files);
    if (::geteuid() == 0) {
      const auto uid = static_cast<uid_t>(config.integer("sandbox.uid"));
      util::chown_tree(paths.work_tree, uid, uid);
      util::chown_tree(paths.home, uid, uid);
      git::refresh_index_after_chown({paths.git_dir, paths.work_tree});
    }
    PhaseRunner phases(repo, config, paths, request.show_worker_output);

    std::vector<std::string> dependency_dirs;
    bool setup_ok = true;
    if (!config.string("run.setup").empty()) {
      const auto before = existing_top_level_dirs(paths, config.list("run.dependency_dirs"));
      const auto [run, phase] = phases.run(setup_phase(config));
      record.phases.push_back(phase);
      for (const auto& dir : existing_top_level_dirs(paths, config.list("run.dependency_dirs"))) {
        if (std::find(before.begin(), before.end(), dir) == before.end()) dependency_dirs.push_back(dir);
      }
      setup_ok = ended_normally(run) && run.status.success();
      if (!setup_ok) {
        record.state = run.ended_by == "cancelled" ? JobState::cancelled : JobState::failed;
        record.error = "the setup phase failed (" + (ended_normally(run) ? run.status.describe() : run.ended_by) + ")";
      }
    }

    if (setup_ok) {
      PhaseSpec worker = worker_phase(config, paths, spec);
      for (auto& mount : read_only_mounts(paths, dependency_dirs)) worker.mounts.push_back(mount);
      const auto session = executor->start_session(request.show_worker_output);
      worker.session = session.get();
      const auto [run, phase] = phases.run(worker);
      record.phases.push_back(phase);
      const auto outcome = session->finish(run);
      record.report = outcome.report;

      const git::Snapshot snapshot =
          git::take_snapshot(repo, {paths.git_dir, paths.work_tree},
                             {dependency_dirs, repo.tree_of(request.base),
                              static_cast<std::uint64_t>(config.integer("limits.file_mb")) << 20U});
      record.snapshot_warnings = snapshot.warnings;
      git::reset_git_file(paths.work_tree, paths.git_dir);
      spdlog::debug("snapshot of job {}: {} files unchanged since checkout, {} read", record.id, snapshot.files_reused,
                    snapshot.files_hashed);
      const git_oid base_tree = repo.tree_of(request.base);
      const bool changed = git_oid_cmp(&snapshot.tree, &base_tree) != 0;
      if (changed) {
        record.result =
            git::oid_to_string(git::commit_snapshot(repo, snapshot.tree, request.base, snapshot_message(record)));
      }
      if (run.ended_by == "cancelled") {
        record.state = JobState::cancelled;
        record.error = "cancelled by signal";
      } else if (run.ended_by == "refused") {
        record.state = JobState::refused;
        record.error = "the wall check inside the sandbox failed";
      } else if (outcome.kind != executors::WorkerOutcome::Kind::success) {
        record.state =
            outcome.kind == executors::WorkerOutcome::Kind::refused ? JobState::refused : JobState::failed;
        record.error = outcome.error;
        hint = outcome.hint;
      } else {
        record.state = changed ? JobState::succeeded : JobState::no_changes;
      }
    }
    log = phases.log();
  } catch (const Error& error) {
    record.state = error.code() == ExitCode::refused ? JobState::refused : JobState::failed;
    record.error = error.what();
    hint = error.hint();
  } catch (const std::exception& error) {
    record.state = JobState::failed;
    record.error = std::string("internal error: ") + error.what();
  }
  if (log.empty()) log = util::read_file_if_exists(paths.worker_log).value_or("");
  record.finished_at = util::now_utc();
  std::map<std::string, std::string> files;
  files["worker.log"] = util::tail(log, log_kept_bytes);
  if (auto events = util::read_file_if_exists(paths.events_log)) {
    files["events.jsonl"] = events->size() > events_kept_bytes ? util::tail(*events, events_kept_bytes) : *events;
  }
  const auto finished = store.update(
      record.id, [&](JobRecord& stored) { stored = record; }, files);
  return RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
}

}  // namespace mullet::jobs
