// Running one phase of a job (setup, worker, a gate) in its own sandbox: the
// plan, the egress proxy when the phase has grants, the logs, the record.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/settings.hpp"
#include "executors/executor.hpp"
#include "git/repository.hpp"
#include "jobs/layout.hpp"
#include "jobs/record.hpp"
#include "jobs/sandbox_objects.hpp"
#include "jobs/slots.hpp"
#include "net/credential_endpoint.hpp"
#include "sandbox/plan.hpp"
#include "sandbox/runner.hpp"
#include "util/fd.hpp"

namespace mullet::jobs {

// What one phase runs, before it becomes a sandbox plan.
struct PhaseSpec {
  std::string name;  // setup, worker, gate:<name>
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::vector<sandbox::Mount> mounts;
  std::string stdin_data;
  std::vector<std::string> grants;
  // The worker's model API: the credential endpoint this phase gets (the
  // worker phase only; setup and gates never).
  std::optional<net::CredentialEndpointOptions> api;
  // What the job's earlier phases sent upstream: counted towards
  // limits.egress_mb, one cap per job.
  std::uint64_t uploaded_before = 0;
  std::chrono::seconds wall_limit{};  // 0: none
  bool wall_is_job_limit = false;     // it is what remains of the job's: a timeout is the job's
  // Watches the worker's output; its stdout is an event stream kept apart
  // (events.jsonl) when structured_stdout.
  executors::WorkerSession* session = nullptr;
  bool structured_stdout = false;
  // The command starts a sandbox of its own (WorkerSpec::nested_sandbox).
  bool nested_sandbox = false;
  // Its stdout goes here (up to captured_stdout_cap bytes) instead of the
  // log, for a command whose output we parse; stderr still goes to the log.
  std::string* captured_stdout = nullptr;
  // For people: where the job is ("attempt 2/3 · gate tests"), the status
  // line's text on a terminal and, with `header`, a line written before the
  // phase's output (in the log too), so a job of several phases reads as such.
  std::string label;
  bool header = false;
  std::int64_t job_started_ms = 0;  // util::monotonic_ms() when the job started: the status line's clock
};

inline constexpr std::size_t captured_stdout_cap = 1U << 20U;

PhaseSpec setup_phase(const config::Settings& settings);
PhaseSpec worker_phase(const config::Settings& settings, const JobPaths& paths, const executors::WorkerSpec& spec);
PhaseSpec gate_phase(const config::Settings& settings, const config::Gate& gate);

// `uids`: when git-mullet runs as root, the host uid the sandbox runs as
// (count 1), or before the job starts the range it will get one from.
// `objects`: what the sandbox reads at /mullet/objects (sandbox_objects.hpp).
sandbox::Plan plan_for(const config::Settings& settings, const JobPaths& paths, const SandboxDirs& dirs,
                       const SandboxObjects& objects, const PhaseSpec& phase, const std::string& proxy_socket,
                       const std::string& api_socket, const std::optional<UidRange>& uids);

// The caps on a job's log files. They equal what the record keeps of each
// (run_to_end.cpp), so the record can carry the capped file whole; both count
// against limits.disk_mb.
inline constexpr std::uint64_t worker_log_cap = 8U << 20U;
inline constexpr std::uint64_t events_log_cap = 32U << 20U;
// What a phase keeps in memory of its output past the cap: the end, where
// the error usually is.
inline constexpr std::size_t log_tail_kept = 64U << 10U;

// An append-only log file of a job that stops growing at its cap: past it,
// output is dropped but for the last log_tail_kept bytes, which end_phase()
// writes after one marker line saying how much was left out.
class BoundedLog {
 public:
  BoundedLog(const std::string& path, std::uint64_t cap);
  void write(std::string_view chunk);
  void end_phase();
  // The file's size: what it holds on disk.
  std::uint64_t size() const { return m_size; }

 private:
  void append(std::string_view text);
  UniqueFd m_fd;
  std::uint64_t m_cap;
  std::uint64_t m_size = 0;
  std::uint64_t m_left_out = 0;  // this phase's, past the cap
  std::string m_tail;
  bool m_at_line_start = true;
};

// Runs phases of one job: their output goes to the job's log (and our
// stderr), each gets its own egress proxy when it has grants. After each,
// no setuid/setgid bit is left in the directories it could write.
class PhaseRunner {
 public:
  PhaseRunner(const config::Settings& settings, const JobPaths& paths, const SandboxObjects& objects, bool echo,
              std::optional<uid_t> sandbox_uid);

  std::pair<sandbox::RunResult, PhaseRecord> run(const PhaseSpec& phase, const SandboxDirs& dirs);

 private:
  const config::Settings& m_settings;
  const JobPaths& m_paths;
  const SandboxObjects& m_objects;
  bool m_echo;
  std::optional<uid_t> m_sandbox_uid;
  BoundedLog m_log;
};

}  // namespace mullet::jobs
