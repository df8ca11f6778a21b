#include "jobs/run_job.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <spdlog/spdlog.h>

#include "executors/executor.hpp"
#include "git/clone.hpp"
#include "git/snapshot.hpp"
#include "jobs/id.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/phases.hpp"
#include "jobs/slots.hpp"
#include "jobs/store.hpp"
#include "sandbox/plan.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

using sandbox::StopReason;

// The capped logs and the tails their phases appended past the cap.
constexpr std::size_t log_kept_bytes = worker_log_cap + (1U << 20U);
constexpr std::size_t events_kept_bytes = events_log_cap + (1U << 20U);
constexpr std::size_t gate_feedback_bytes = 3000;
constexpr const char* local_run_flags_file = "run-flags.json";
constexpr std::size_t local_run_flags_max_bytes = 1U << 20U;

void write_executor_files(const JobPaths& paths, const std::vector<executors::GeneratedFile>& files) {
  if (files.empty()) return;
  util::make_dirs(paths.executor_files, 0755);
  for (const auto& file : files) {
    const std::string path = paths.executor_files + "/" + file.name;
    if (util::exists(path)) ::unlink(path.c_str());
    util::write_file(path, file.content, 0444);
  }
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

std::string snapshot_message(const JobRecord& record, int attempt) {
  return (record.title.empty() ? "git-mullet job " + record.id : record.title) +
         (attempt > 1 ? " (attempt " + std::to_string(attempt) + ")" : "") + "\n\nMade by git-mullet job " + record.id +
         " (executor: " + record.executor.name + ").\n\nMullet-Job: " + record.id +
         "\nMullet-Attempt: " + std::to_string(attempt) + "\n";
}

// How a failed gate ended: "exit code 1", or what stopped it.
std::string how_gate_ended(const GateRecord& gate) {
  const StopReason reason = gate.ended_by.value_or(StopReason::exit);
  return reason == StopReason::exit ? "exit code " + std::to_string(gate.exit_code) : sandbox::describe_stop(reason);
}

std::string gate_feedback(const std::string& task, const GateRecord& gate) {
  return task + "\n\n---\nYour previous attempt is in the work tree, but the check \"" + gate.name + "\" (`" +
         gate.command + "`) failed on it (" + how_gate_ended(gate) + "). The end of its output:\n\n" +
         util::tail(gate.output_tail, gate_feedback_bytes) + "\n\nFix the work so that this check passes.\n";
}

}  // namespace

nlohmann::json run_flags_json(const config::Config& config, const std::vector<config::Gate>& gates) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, entry] : config.entries()) {
    if (entry.source != config::Source::flag) continue;
    if (const auto* text = std::get_if<std::string>(&entry.value)) values[key] = *text;
    if (const auto* number = std::get_if<std::int64_t>(&entry.value)) values[key] = *number;
  }
  nlohmann::json gate_list = nlohmann::json::array();
  for (const auto& gate : gates) {
    gate_list.push_back({{"name", gate.name}, {"command", gate.command}, {"timeout", gate.timeout_seconds}});
  }
  return {{"config", values}, {"gates", gate_list}};
}

namespace {

// One job's run: setup, then attempts of worker, snapshot and gates, until
// the gates pass, the attempts run out or a limit ends it.
class JobRun {
 public:
  JobRun(const git::Repository& repo, const config::Settings& settings, JobStore& store, JobRecord& record,
         const RunRequest& request, const executors::Executor& executor, std::optional<uid_t> sandbox_uid)
      : m_repo(repo),
        m_settings(settings),
        m_store(store),
        m_record(record),
        m_request(request),
        m_executor(executor),
        m_paths(job_paths(repo, record.id)),
        m_sandbox_uid(sandbox_uid),
        m_started(util::monotonic_ms()) {}

  // Sets up the clone at `start` (the base, or the last snapshot when
  // resuming) and runs the job to its end state.
  void run(const git_oid& start, const std::string& first_prompt) {
    make_private_job_dir("");
    if (!util::exists(m_paths.root + "/empty")) util::write_file(m_paths.root + "/empty", "", 0444);
    make_sandbox_clone(start, worker_dirs());
    PhaseRunner phases(m_repo, m_settings, m_paths, m_request.show_worker_output, m_sandbox_uid);
    m_phases = &phases;

    if (!m_settings.run.setup.empty() && !run_setup()) return;

    git_oid parent = start;
    std::string prompt = first_prompt;
    const int attempts = m_settings.run.attempts;
    const int first_number = static_cast<int>(m_record.attempts.size()) + 1;
    for (int number = first_number; number < first_number + attempts; ++number) {
      // The attempt is in the record from its start, so every save of the
      // record (after the snapshot, after each gate) keeps what it did.
      m_record.attempts.push_back({});
      m_record.attempts.back().number = number;
      const bool last = number == first_number + attempts - 1;
      const auto verdict = run_attempt(number, prompt, parent);
      const AttemptRecord& attempt = m_record.attempts.back();
      if (verdict != Verdict::gate_failed || last) return;
      prompt = gate_feedback(first_prompt, attempt.gates.back());
      if (!attempt.result.empty()) parent = git::oid_from_string(attempt.result);
    }
  }

  const std::string& hint() const { return m_hint; }

 private:
  enum class Verdict { done, stop, gate_failed };

  std::chrono::seconds remaining() const {
    return m_settings.limits.job_timeout - std::chrono::seconds((util::monotonic_ms() - m_started) / 1000);
  }

  // The phase's limit, clipped to what remains of the job's.
  void clip_to_job(PhaseSpec& phase) const {
    const std::chrono::seconds left = std::max(remaining(), std::chrono::seconds(1));
    if (phase.wall_limit <= std::chrono::seconds::zero() || left < phase.wall_limit) {
      phase.wall_limit = left;
      phase.wall_is_job_limit = true;
    }
  }

  bool out_of_time() {
    if (util::cancel_requested()) {
      finish(JobState::cancelled, "cancelled by signal");
      return true;
    }
    if (remaining() <= std::chrono::seconds::zero()) {
      finish(JobState::failed, "stopped: " + sandbox::describe_stop(StopReason::job_timeout));
      return true;
    }
    return false;
  }

  void finish(JobState state, std::string error, std::string hint = {}) {
    m_record.state = state;
    m_record.error = std::move(error);
    m_hint = std::move(hint);
  }

  bool run_setup() {
    const auto before = existing_top_level_dirs(m_paths, m_settings.run.dependency_dirs);
    PhaseSpec setup = setup_phase(m_settings);
    clip_to_job(setup);
    const auto [run, phase] = m_phases->run(setup, worker_dirs());
    m_record.phases.push_back(phase);
    for (const auto& dir : existing_top_level_dirs(m_paths, m_settings.run.dependency_dirs)) {
      if (std::find(before.begin(), before.end(), dir) == before.end()) m_dependency_dirs.push_back(dir);
    }
    const bool by_itself = sandbox::ended_by_itself(run.ended_by);
    if (by_itself && run.status.success()) return true;
    const JobState state = state_after(run.ended_by);
    if (state == JobState::cancelled) {
      finish(state, "cancelled by signal");
    } else if (state == JobState::refused) {
      finish(state, "the wall check inside the sandbox failed");
    } else {
      finish(state, "the setup phase failed (" +
                        (by_itself ? run.status.describe() : sandbox::describe_stop(run.ended_by)) + ")");
    }
    return false;
  }

  // The job's directory (or one below it, like a gate's): 0700 and ours, so
  // no other local user, nor a sandbox's uid on the host, reaches in.
  void make_private_job_dir(const std::string& below) const {
    const std::string common = util::real_path(m_repo.common_dir());
    util::make_private_dirs(common, "mullet/jobs/" + m_record.id + (below.empty() ? "" : "/" + below));
  }

  // A private clone of `commit` and a home, owned by the sandbox's uid when
  // we run as root.
  void make_sandbox_clone(const git_oid& commit, const SandboxDirs& dirs) const {
    git::create_private_clone(m_repo, commit, {dirs.git_dir, dirs.work_tree}, sandbox::inside::git_dir);
    util::make_dirs(dirs.home, 0700);
    // A home kept from an interrupted run (resume) may hold what its
    // sandbox left there.
    util::strip_unsafe_modes(dirs.home);
    if (m_sandbox_uid) {
      util::chown_tree(dirs.work_tree, *m_sandbox_uid, *m_sandbox_uid);
      util::chown_tree(dirs.home, *m_sandbox_uid, *m_sandbox_uid);
      git::refresh_index_after_chown({dirs.git_dir, dirs.work_tree});
    }
  }

  SandboxDirs worker_dirs() const { return {m_paths.work_tree, m_paths.git_dir, m_paths.home}; }

  AttemptRecord& current_attempt() { return m_record.attempts.back(); }

  void save() {
    m_store.update(m_record.id, [&](JobRecord& stored) { stored = m_record; });
  }

  Verdict run_attempt(int number, const std::string& prompt, const git_oid& parent) {
    if (out_of_time()) return Verdict::stop;
    const auto spec = m_executor.prepare({prompt, m_settings, jobs_directory(m_repo)});
    write_executor_files(m_paths, spec.files);
    PhaseSpec worker = worker_phase(m_settings, m_paths, spec);
    clip_to_job(worker);
    for (auto& mount : read_only_mounts(m_paths, m_dependency_dirs)) worker.mounts.push_back(mount);
    const auto session =
        m_executor.start_session(m_request.show_worker_output, {m_settings.limits.turns, m_settings.limits.cost_usd});
    worker.session = session.get();
    auto [run, phase] = m_phases->run(worker, worker_dirs());
    if (number > 1) phase.name += " (attempt " + std::to_string(number) + ")";
    m_record.phases.push_back(phase);
    const auto outcome = session->finish(run);
    m_record.report = outcome.report;

    // What the worker did so far is kept whatever ended it.
    const git_oid commit = take_snapshot(number, parent);
    AttemptRecord& attempt = current_attempt();
    // The executor judges the rest, its own refusal (worker_refused) included.
    if (run.ended_by == StopReason::cancelled || run.ended_by == StopReason::refused) {
      attempt.error =
          run.ended_by == StopReason::cancelled ? "cancelled by signal" : "the wall check inside the sandbox failed";
      finish(state_after(run.ended_by), attempt.error);
      return Verdict::stop;
    }
    if (outcome.kind != executors::WorkerOutcome::Kind::success) {
      attempt.error = outcome.error;
      finish(outcome.kind == executors::WorkerOutcome::Kind::refused ? JobState::refused : JobState::failed,
             outcome.error, outcome.hint);
      return Verdict::stop;
    }
    for (const auto& gate : gates()) {
      if (out_of_time()) return Verdict::stop;
      GateRecord result = run_gate(gate, commit);
      current_attempt().gates.push_back(result);
      save();
      if (result.passed) continue;
      const JobState state = state_after(result.ended_by.value_or(StopReason::exit));
      if (state == JobState::cancelled) {
        finish(state, "cancelled by signal");
        return Verdict::stop;
      }
      if (state == JobState::refused) {
        finish(state, "the wall check inside the sandbox of gate " + gate.name + " failed");
        return Verdict::stop;
      }
      finish(state,
             "gate " + gate.name + " failed (" + how_gate_ended(result) + ")" +
                 (attempt.number > 1 ? " after " + std::to_string(attempt.number) + " attempts" : ""),
             "see its output with: git mullet show " + m_record.id);
      return Verdict::gate_failed;
    }
    finish(m_record.result.empty() ? JobState::no_changes : JobState::succeeded, "");
    return Verdict::done;
  }

  // Snapshots the work tree as a commit on top of the previous attempt's (or
  // the base); none when the tree is still the base's.
  git_oid take_snapshot(int number, const git_oid& parent) {
    const git_oid base = git::oid_from_string(m_record.base);
    const git_oid base_tree = m_repo.tree_of(base);
    const git::Snapshot snapshot =
        git::take_snapshot(m_repo, {m_paths.git_dir, m_paths.work_tree},
                           {m_dependency_dirs, base_tree, m_settings.limits.file_mb.bytes()});
    for (const auto& warning : snapshot.warnings) {
      if (std::find(m_record.snapshot_warnings.begin(), m_record.snapshot_warnings.end(), warning) ==
          m_record.snapshot_warnings.end()) {
        m_record.snapshot_warnings.push_back(warning);
      }
    }
    git::reset_git_file(m_paths.work_tree, sandbox::inside::git_dir);
    spdlog::debug("snapshot of job {}: {} files unchanged since checkout, {} read", m_record.id, snapshot.files_reused,
                  snapshot.files_hashed);
    if (git_oid_cmp(&snapshot.tree, &base_tree) == 0) {
      m_record.result.clear();
      save();
      return base;
    }
    const git_oid commit = git::commit_snapshot(m_repo, snapshot.tree, parent, snapshot_message(m_record, number));
    current_attempt().result = git::oid_to_string(commit);
    m_record.result = current_attempt().result;
    // The record follows each attempt, so a crash later loses nothing.
    save();
    return commit;
  }

  std::vector<config::Gate> gates() const {
    std::vector<config::Gate> all = m_settings.gates;
    for (const auto& gate : m_request.gates) all.push_back(gate);
    return all;
  }

  // Runs one gate in a fresh checkout of exactly `commit`: nothing it writes
  // can reach the result, and no gate sees what another wrote.
  GateRecord run_gate(const config::Gate& gate, const git_oid& commit) {
    const std::string root = m_paths.root + "/gate";
    util::remove_tree(root);
    const SandboxDirs dirs{root + "/work", root + "/git", root + "/home"};
    make_private_job_dir("gate");
    make_sandbox_clone(commit, dirs);
    PhaseSpec phase = gate_phase(m_settings, gate);
    clip_to_job(phase);
    // The dependencies setup installed, read-only, as the worker saw them.
    for (auto& mount : read_only_mounts(m_paths, m_dependency_dirs)) phase.mounts.push_back(mount);
    const auto [run, record] = m_phases->run(phase, dirs);
    m_record.phases.push_back(record);
    util::remove_tree(root);
    GateRecord result;
    result.name = gate.name;
    result.command = gate.command;
    result.commit = git::oid_to_string(commit);
    result.exit_code = run.status.code;
    result.ended_by = run.ended_by;
    result.duration_ms = run.duration_ms;
    result.passed = run.ended_by == StopReason::exit && run.status.code == 0;
    result.output_tail = record.output_tail;
    return result;
  }

  const git::Repository& m_repo;
  const config::Settings& m_settings;
  JobStore& m_store;
  JobRecord& m_record;
  const RunRequest& m_request;
  const executors::Executor& m_executor;
  JobPaths m_paths;
  std::optional<uid_t> m_sandbox_uid;
  std::int64_t m_started;
  PhaseRunner* m_phases = nullptr;
  std::vector<std::string> m_dependency_dirs;
  std::string m_hint;
};

// Runs the job and stores its final record, whatever happens.
RunOutcome run_and_record(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                          JobRecord& record, const RunRequest& request, const executors::Executor& executor,
                          const git_oid& start, const std::string& prompt) {
  const JobPaths paths = job_paths(repo, record.id);
  const Slot slot = acquire_slot(
      util::real_path(repo.common_dir()) + "/mullet/slots", settings.run.max_parallel,
      [] { return util::cancel_requested(); },
      [&] {
        if (request.show_worker_output) {
          std::cerr << "git mullet: job " << record.id
                    << " waits for a free slot ([run] max_parallel = " << settings.run.max_parallel << ")\n";
        }
      });
  std::string hint;
  try {
    // As root, every job's sandboxes run as a uid of their own: no job's
    // files are another's, and a uid's process limit is the job's.
    ClaimedUid claimed;
    std::optional<uid_t> sandbox_uid;
    record.sandbox_uid.reset();
    if (::geteuid() == 0) {
      claimed = claim_sandbox_uid(sandbox_uid_range(settings.sandbox));
      sandbox_uid = claimed.uid;
      record.sandbox_uid = claimed.uid;
      // On record while the job runs, not only once it ends.
      store.update(record.id, [&](JobRecord& stored) { stored.sandbox_uid = record.sandbox_uid; });
    }
    JobRun job(repo, settings, store, record, request, executor, sandbox_uid);
    job.run(start, prompt);
    hint = job.hint();
  } catch (const Error& error) {
    record.state = error.code() == ExitCode::refused ? JobState::refused : JobState::failed;
    // What a signal stopped (the clone's checkout) ends the job as cancelled.
    if (record.state == JobState::failed && util::cancel_requested()) record.state = JobState::cancelled;
    record.error = error.what();
    hint = error.hint();
  } catch (const std::exception& error) {
    record.state = JobState::failed;
    record.error = std::string("internal error: ") + error.what();
  }
  if (record.state == JobState::running) {
    record.state = JobState::failed;
    record.error = "internal error: the job ended without a verdict";
  }
  record.finished_at = util::now_utc();
  std::map<std::string, std::string> files;
  // The record is stored whatever happened to the logs.
  const auto log_tail = [](const std::string& path, std::size_t bytes) -> std::optional<std::string> {
    try {
      return util::read_file_tail(path, bytes);
    } catch (const Error& error) {
      return "[git-mullet: " + std::string(error.what()) + "]\n";
    }
  };
  files["worker.log"] = log_tail(paths.worker_log, log_kept_bytes).value_or("");
  if (auto events = log_tail(paths.events_log, events_kept_bytes)) files["events.jsonl"] = *events;
  const auto finished = store.update(
      record.id, [&](JobRecord& stored) { stored = record; }, files);
  return RunOutcome{finished.record, static_cast<ExitCode>(exit_code_for(finished.record.state)), hint};
}

}  // namespace

std::optional<nlohmann::json> local_run_flags(const git::Repository& repo, const std::string& id) {
  try {
    const auto text = util::read_regular_file_if_exists(job_paths(repo, id).root + "/" + local_run_flags_file,
                                                        local_run_flags_max_bytes);
    if (!text) return std::nullopt;
    auto parsed = nlohmann::json::parse(*text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
    return parsed;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::vector<config::Gate> restore_run_flags(const JobRecord& record, config::Config& config,
                                            const std::optional<nlohmann::json>& local_run_flags) {
  const auto& flags = record.run_flags;
  const std::string origin = "the command line of job " + record.id;
  if (const auto values = flags.find("config"); values != flags.end() && values->is_object()) {
    for (const auto& [key, value] : values->items()) {
      if (config.entries().count(key) == 0) continue;
      // The record may come from a fetch: like a repository's .mullet.toml it
      // may not choose what only the user's own configuration chooses.
      const bool started_here_with_it = local_run_flags && local_run_flags->contains("config") &&
                                        (*local_run_flags)["config"].is_object() &&
                                        (*local_run_flags)["config"].value(key, nlohmann::json()) == value;
      if ((key == "run.command" || key == "run.executor") && value.is_string() && !started_here_with_it &&
          value.get<std::string>() != std::get<std::string>(config.entry(key).value)) {
        throw usage_error(
            "job " + record.id + "'s record asks resume to set " + key + ", which only your own configuration may set",
            "if you started it with that " + key + ", set it in your config file and resume again");
      }
      if (value.is_string()) config.set_from_flag(key, value.get<std::string>(), origin);
      if (value.is_number_integer()) config.set_from_flag(key, value.get<std::int64_t>(), origin);
    }
  }
  std::vector<config::Gate> gates;
  if (const auto list = flags.find("gates"); list != flags.end() && list->is_array()) {
    for (const auto& gate : *list) {
      if (!gate.is_object() || !gate.contains("command") || !gate["command"].is_string()) continue;
      const bool named = gate.contains("name") && gate["name"].is_string();
      const bool timed = gate.contains("timeout") && gate["timeout"].is_number_integer();
      gates.push_back({named ? gate["name"].get<std::string>() : "gate", gate["command"].get<std::string>(),
                       timed ? gate["timeout"].get<std::int64_t>() : 0, "--gate"});
    }
  }
  return gates;
}

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

std::vector<sandbox::Plan> job_plans(const git::Repository& repo, const config::Settings& settings,
                                     const std::string& job_id, const std::string& prompt,
                                     const std::vector<config::Gate>& extra_gates) {
  const auto executor = executors::make_executor(settings.run.executor);
  const auto spec = executor->prepare({prompt, settings, jobs_directory(repo)});
  const JobPaths paths = job_paths(repo, job_id);
  const SandboxDirs dirs{paths.work_tree, paths.git_dir, paths.home};
  const std::string socket_placeholder = "/tmp/mullet-proxy-XXXXXX/proxy.sock";
  const std::optional<UidRange> uids =
      ::geteuid() == 0 ? std::optional<UidRange>(sandbox_uid_range(settings.sandbox)) : std::nullopt;
  std::vector<sandbox::Plan> plans;
  if (!settings.run.setup.empty()) {
    const auto setup = setup_phase(settings);
    plans.push_back(plan_for(repo, settings, paths, dirs, setup, setup.grants.empty() ? "" : socket_placeholder, uids));
  }
  const auto worker = worker_phase(settings, paths, spec);
  plans.push_back(plan_for(repo, settings, paths, dirs, worker, worker.grants.empty() ? "" : socket_placeholder, uids));
  std::vector<config::Gate> gates = settings.gates;
  gates.insert(gates.end(), extra_gates.begin(), extra_gates.end());
  const SandboxDirs gate_dirs{paths.root + "/gate/work", paths.root + "/gate/git", paths.root + "/gate/home"};
  for (const auto& gate : gates)
    plans.push_back(plan_for(repo, settings, paths, gate_dirs, gate_phase(settings, gate), "", uids));
  return plans;
}

RunOutcome run_job(const git::Repository& repo, const config::Settings& settings, const RunRequest& request) {
  // Everything that can be refused is refused before a job exists.
  const auto executor = executors::make_executor(settings.run.executor);
  const auto spec = executor->prepare({request.prompt, settings, jobs_directory(repo)});
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);
  util::make_private_dirs(util::real_path(repo.common_dir()), "mullet/jobs");

  JobStore store(repo);
  JobRecord record;
  record.id = new_job_id();
  record.title = request.title.empty() ? util::first_line(request.prompt, 72) : request.title;
  record.prompt = request.prompt;
  record.base = git::oid_to_string(request.base);
  record.executor = spec.record;
  record.created_at = util::now_utc();
  record.runner = current_runner();
  record.run_flags = request.run_flags;
  store.create(record);
  // What this machine started the job with, where no fetch reaches: resume
  // trusts the record's user-only flags only when they match this copy.
  util::make_private_dirs(util::real_path(repo.common_dir()), "mullet/jobs/" + record.id);
  util::write_file(job_paths(repo, record.id).root + "/" + local_run_flags_file, record.run_flags.dump(), 0600);
  if (request.on_created) request.on_created(record.id);
  return run_and_record(repo, settings, store, record, request, *executor, request.base, request.prompt);
}

RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request) {
  const auto executor = executors::make_executor(settings.run.executor);
  JobStore store(repo);
  const auto found = store.find(job_name);
  const JobState state = effective_state(found.record);
  if (state != JobState::interrupted && state != JobState::failed && state != JobState::cancelled) {
    throw usage_error("job " + found.record.id + " is " + state_name(state) + "; only an interrupted, failed or " +
                          "cancelled job can be resumed",
                      state == JobState::running ? "wait for it: git mullet wait " + found.record.id : "");
  }
  const std::string prompt = found.record.prompt;
  const auto spec = executor->prepare({prompt, settings, jobs_directory(repo)});
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);

  // Claim the job: the compare-and-swap on its ref lets one resume win.
  JobRecord record;
  const auto claimed = store.update(found.record.id, [&](JobRecord& stored) {
    const JobState now = effective_state(stored);
    if (now != JobState::interrupted && now != JobState::failed && now != JobState::cancelled) {
      throw usage_error("job " + stored.id + " is " + state_name(now) + " now; it cannot be resumed");
    }
    stored.state = JobState::running;
    stored.error.clear();
    stored.finished_at.clear();
    stored.runner = current_runner();
    stored.executor = spec.record;
  });
  record = claimed.record;
  if (request.on_created) request.on_created(record.id);

  // Continue from the last snapshot in a fresh clone of it: whatever the
  // interrupted worker left unsnapshotted is not trusted.
  const JobPaths paths = job_paths(repo, record.id);
  util::remove_tree(paths.git_dir);
  util::remove_tree(paths.work_tree);
  util::remove_tree(paths.root + "/gate");
  const git_oid start = git::oid_from_string(record.result.empty() ? record.base : record.result);
  const std::string resumed_prompt =
      prompt + (record.result.empty()
                    ? std::string()
                    : "\n\n---\nThis task was started before and interrupted; the work tree holds the work done so "
                      "far. Continue from there.\n");
  return run_and_record(repo, settings, store, record, request, *executor, start, resumed_prompt);
}

}  // namespace mullet::jobs
