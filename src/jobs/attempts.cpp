#include "jobs/attempts.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "jobs/gates.hpp"
#include "jobs/layout.hpp"
#include "jobs/phases.hpp"
#include "jobs/sandbox_objects.hpp"
#include "jobs/snapshot_attempt.hpp"
#include "jobs/workspace.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

using sandbox::StopReason;

constexpr std::chrono::seconds preflight_limit{120};

class JobRun {
 public:
  explicit JobRun(const JobRunContext& job)
      : m_job(job),
        m_settings(job.settings),
        m_record(job.record),
        m_paths(job.paths),
        m_started(util::monotonic_ms()) {}

  std::string run(const git_oid& start, const std::string& first_prompt) {
    make_private_job_dir(m_job.repo, m_record.id, m_paths.below);
    if (!util::exists(m_paths.empty_file)) util::write_file(m_paths.empty_file, "", 0444);
    m_objects = prepare_sandbox_objects(m_job.repo, m_settings.sandbox.history, git::oid_from_string(m_record.base));
    const WorkTreeChoice choice = usable_work_tree(m_job.repo, m_settings);
    spdlog::debug("job {}: the work tree is {}", m_record.id, choice.why);
    m_dirs = make_worker_tree(m_job.repo, start, m_paths, m_job.sandbox_uid, m_objects, choice);
    PhaseRunner phases(m_settings, m_paths, m_objects, m_job.request.show_worker_output, m_job.sandbox_uid);
    m_phases = &phases;

    if (!m_settings.run.setup.empty() && !run_setup()) return m_hint;

    git_oid parent = start;
    std::string prompt = first_prompt;
    const int attempts = m_settings.run.attempts;
    const int first_number = static_cast<int>(m_record.attempts.size()) + 1;
    m_last_attempt = first_number + attempts - 1;
    // One phase alone needs no header; a job of several gets one before each.
    m_headers = !m_settings.run.setup.empty() || attempts > 1 || first_number > 1 ||
                !job_gates(m_settings, m_job.request.gates).empty();
    for (int number = first_number; number < first_number + attempts; ++number) {
      // The attempt is in the record from its start, so every save of the
      // record (after the snapshot, after each gate) keeps what it did.
      m_record.attempts.push_back({});
      m_record.attempts.back().number = number;
      if (number == first_number) m_record.attempts.back().instruction = m_job.request.instruction;
      const bool last = number == first_number + attempts - 1;
      const auto verdict = run_attempt(number, prompt, parent);
      const AttemptRecord& attempt = m_record.attempts.back();
      if (verdict != Verdict::gate_failed || last) break;
      prompt = gate_feedback(first_prompt, attempt.gates.back());
      if (!attempt.result.empty()) parent = git::oid_from_string(attempt.result);
    }
    return m_hint;
  }

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

  // What the job's phases so far sent upstream.
  std::uint64_t uploaded() const {
    std::uint64_t sum = 0;
    for (const auto& phase : m_record.phases) sum += phase.upload ? phase.upload->total() : 0;
    return sum;
  }

  void save() { m_job.save(m_record); }

  // On record as the phase starts, for `show` and `wait`; and for people,
  // the phase's label ("attempt 2/3 · gate tests") and header.
  void entering(PhaseSpec& spec, const std::string& phase, int attempt) {
    // The verdict a failed gate left in m_record is provisional: another
    // attempt runs, and the stored record must read `running` (resume and
    // discard refuse a running job, not a failed one).
    m_record.state = JobState::running;
    m_record.error.clear();
    m_hint.clear();
    m_record.progress = LiveProgress{phase, attempt, attempt == 0 ? 0 : m_last_attempt, util::now_utc_ms()};
    // An attempt is on record from its snapshot on: one whose worker is
    // killed leaves no empty entry (resume numbers its attempts after the
    // snapshotted ones).
    JobRecord now = m_record;
    if (phase == "worker" && !now.attempts.empty()) now.attempts.pop_back();
    m_job.save(now);
    // A gate's name may be its command's whole first line: a label fits a line.
    const std::string shown = phase.rfind("gate:", 0) == 0 ? "gate " + util::first_line(phase.substr(5), 60) : phase;
    spec.label = attempt == 0
                     ? shown
                     : "attempt " + std::to_string(attempt) + "/" + std::to_string(m_last_attempt) + " · " + shown;
    spec.header = m_headers;
    spec.job_started_ms = m_started;
    // A node's phases know which node they are (a command may differ by it).
    if (m_job.node > 0) spec.env["MULLET_NODE"] = std::to_string(m_job.node);
  }

  bool run_setup() {
    const auto before = existing_top_level_dirs(m_dirs, m_settings.run.dependency_dirs);
    PhaseSpec setup = setup_phase(m_settings);
    clip_to_job(setup);
    m_headers = true;
    entering(setup, "setup", 0);
    setup.uploaded_before = uploaded();
    const auto [run, phase] = m_phases->run(setup, m_dirs);
    m_record.phases.push_back(phase);
    for (const auto& dir : existing_top_level_dirs(m_dirs, m_settings.run.dependency_dirs)) {
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

  Verdict run_attempt(int number, const std::string& prompt, const git_oid& parent) {
    if (out_of_time()) return Verdict::stop;
    const auto& api = m_job.api;
    const auto spec =
        m_job.executor.prepare({prompt, m_settings, jobs_directory(m_job.repo), api ? &api->access : nullptr});
    write_executor_files(m_paths, spec.files);
    PhaseSpec worker = worker_phase(m_settings, m_paths, spec);
    clip_to_job(worker);
    if (spec.uses_api && api) {
      // The budget is the job's: what earlier attempts spent is gone.
      const double spent = m_record.cost_usd.value_or(0);
      if (spent >= m_settings.limits.cost_usd) {
        m_record.attempts.back().error = "the job's metered API cost reached limits.cost_usd before this attempt";
        finish(JobState::failed, m_record.attempts.back().error, "raise [limits] cost_usd to let it spend more");
        return Verdict::stop;
      }
      worker.api = api->endpoint;
      worker.api->budget_usd = m_settings.limits.cost_usd;
      worker.api->spent_before_usd = spent;
    }
    // The upload cap is the job's too.
    worker.uploaded_before = uploaded();
    if ((!worker.grants.empty() || worker.api) && worker.uploaded_before >= m_settings.limits.egress_mb.bytes()) {
      m_record.attempts.back().error = "the job's uploads reached limits.egress_mb before this attempt";
      finish(JobState::failed, m_record.attempts.back().error, "raise [limits] egress_mb to let it send more");
      return Verdict::stop;
    }
    for (auto& mount : read_only_mounts(m_dirs, m_dependency_dirs)) worker.mounts.push_back(mount);
    entering(worker, "worker", number);
    // With the credential endpoint metering what was really spent, the
    // worker's own estimate no longer stops it (it would race the figure the
    // job is charged by).
    const double estimated_cost_limit = worker.api ? 0 : m_settings.limits.cost_usd;
    if (!passes_preflight(spec, worker)) return Verdict::stop;
    const auto session = m_job.executor.start_session(spec, m_job.request.show_worker_output,
                                                      {m_settings.limits.turns, estimated_cost_limit});
    worker.session = session.get();
    auto [run, phase] = m_phases->run(worker, m_dirs);
    if (number > 1) phase.name += " (attempt " + std::to_string(number) + ")";
    if (phase.api.is_object()) {
      m_record.cost_usd = m_record.cost_usd.value_or(0) + phase.api["totals"].value("cost_usd", 0.0);
    }
    m_record.phases.push_back(phase);
    auto outcome = session->finish(run);
    if (run.ended_by == StopReason::api_down) name_api_failure(phase, outcome);
    m_record.report = outcome.report;

    // What the worker did so far is kept whatever ended it; the record
    // follows each attempt, so a crash later loses nothing.
    // The result commit's Mullet-Model: the model asked for ([claude] model,
    // [opencode] model, --model), else the one the worker said it used.
    const std::string model = !m_record.executor.model.empty() ? m_record.executor.model : m_record.report.model;
    const git_oid commit =
        snapshot_attempt(m_job.repo, m_dirs, m_record, number, parent, m_dependency_dirs,
                         {m_settings.limits.file_mb.bytes(), m_settings.limits.disk_mb.bytes()}, model);
    save();
    AttemptRecord& attempt = m_record.attempts.back();
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
    return run_gates(commit);
  }

  // Why the endpoint could not reach the API, as it saw it.
  static void name_api_failure(const PhaseRecord& phase, executors::WorkerOutcome& outcome) {
    if (!phase.api.is_object()) return;
    const auto& failure = phase.api["totals"].value("last_failure", nlohmann::json::object());
    const std::string reason = failure.is_object() ? failure.value("reason", "") : "";
    if (!reason.empty()) outcome.error += " (the last: " + reason + ")";
    outcome.hint = "check that the API at " + phase.api.value("upstream", std::string("its base URL")) +
                   " is up and that its base URL is right ([[credential]] base_url, or [claude] base_url)";
  }

  // The worker's program reports the configuration it resolved, from inside
  // the worker's own sandbox but without network: anything but ours refuses
  // the job before the worker starts (as Claude Code's init event does).
  bool passes_preflight(const executors::WorkerSpec& spec, const PhaseSpec& worker) {
    // An overlay's merged view: what its upper dir has (a whiteout there
    // stands for a name the pristine tree has), then the pristine tree.
    std::string why = m_job.executor.check_work_tree(written_tree(m_dirs));
    if (why.empty() && m_dirs.overlay) why = m_job.executor.check_work_tree(m_dirs.overlay->lower);
    if (!why.empty()) {
      m_record.attempts.back().error = m_job.executor.name() + " cannot run here: " + why;
      finish(JobState::refused, m_record.attempts.back().error,
             "remove it from the base commit (or from the work tree, if an earlier attempt wrote it), or use "
             "another executor");
      return false;
    }
    if (spec.preflight_command.empty()) return true;
    PhaseSpec preflight = worker;
    preflight.name = "worker preflight";
    preflight.header = false;
    preflight.command = spec.preflight_command;
    preflight.stdin_data.clear();
    preflight.grants.clear();
    preflight.api.reset();
    preflight.session = nullptr;
    preflight.structured_stdout = false;
    std::string printed;
    preflight.captured_stdout = &printed;
    // Reporting a configuration takes seconds: a hang is not worth the job's time.
    if (preflight.wall_limit > preflight_limit) {
      preflight.wall_limit = preflight_limit;
      preflight.wall_is_job_limit = false;
    }
    const auto [run, phase] = m_phases->run(preflight, m_dirs);
    m_record.phases.push_back(phase);
    AttemptRecord& attempt = m_record.attempts.back();
    if (run.ended_by == StopReason::cancelled || run.ended_by == StopReason::refused) {
      attempt.error =
          run.ended_by == StopReason::cancelled ? "cancelled by signal" : "the wall check inside the sandbox failed";
      finish(state_after(run.ended_by), attempt.error);
      return false;
    }
    const std::string program = m_job.executor.name();
    if (!sandbox::ended_by_itself(run.ended_by) || !run.status.success()) {
      attempt.error =
          program + " could not report the configuration it would run with (" +
          (sandbox::ended_by_itself(run.ended_by) ? run.status.describe() : sandbox::describe_stop(run.ended_by)) + ")";
    } else if (const std::string differs = m_job.executor.check_preflight(spec, printed); !differs.empty()) {
      attempt.error = program + " would not run with git-mullet's configuration: " + differs;
    } else {
      return true;
    }
    finish(JobState::refused, attempt.error, "its output is in: git mullet log " + m_record.id);
    return false;
  }

  Verdict run_gates(const git_oid& commit) {
    const int number = m_record.attempts.back().number;
    for (const auto& gate : job_gates(m_settings, m_job.request.gates)) {
      if (out_of_time()) return Verdict::stop;
      const GateRecord result = run_gate(gate, commit);
      m_record.attempts.back().gates.push_back(result);
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
                 (number > 1 ? " after " + std::to_string(number) + " attempts" : ""),
             "see its output with: git mullet show " + m_record.id);
      return Verdict::gate_failed;
    }
    finish(m_record.result.empty() ? JobState::no_changes : JobState::succeeded, "");
    return Verdict::done;
  }

  // Runs one gate in a fresh checkout of exactly `commit`: nothing it writes
  // can reach the result, and no gate sees what another wrote.
  GateRecord run_gate(const config::Gate& gate, const git_oid& commit) {
    util::remove_tree(m_paths.gate);
    const SandboxDirs dirs = gate_dirs(m_paths);
    make_private_job_dir(m_job.repo, m_record.id, m_paths.below.empty() ? "gate" : m_paths.below + "/gate");
    make_sandbox_clone(m_job.repo, commit, dirs, m_job.sandbox_uid, m_objects);
    PhaseSpec phase = gate_phase(m_settings, gate);
    clip_to_job(phase);
    entering(phase, "gate:" + gate.name, m_record.attempts.back().number);
    // The dependencies setup installed, read-only, as the worker saw them.
    for (auto& mount : read_only_mounts(m_dirs, m_dependency_dirs)) phase.mounts.push_back(mount);
    const auto [run, record] = m_phases->run(phase, dirs);
    m_record.phases.push_back(record);
    util::remove_tree(m_paths.gate);
    return gate_record(gate, commit, run, record);
  }

  const JobRunContext& m_job;
  const config::Settings& m_settings;
  JobRecord& m_record;
  JobPaths m_paths;
  std::int64_t m_started;
  SandboxObjects m_objects;
  SandboxDirs m_dirs;
  PhaseRunner* m_phases = nullptr;
  std::vector<std::string> m_dependency_dirs;
  std::string m_hint;
  int m_last_attempt = 0;
  bool m_headers = false;
};

}  // namespace

std::string run_attempts(const JobRunContext& job, const git_oid& start, const std::string& first_prompt) {
  return JobRun(job).run(start, first_prompt);
}

}  // namespace mullet::jobs
