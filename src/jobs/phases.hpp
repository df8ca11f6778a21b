// Running one phase of a job (setup, worker, a gate) in its own sandbox: the
// plan, the egress proxy when the phase has grants, the logs, the record.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "executors/executor.hpp"
#include "git/repository.hpp"
#include "jobs/layout.hpp"
#include "jobs/record.hpp"
#include "jobs/slots.hpp"
#include "sandbox/plan.hpp"
#include "sandbox/runner.hpp"
#include "util/fd.hpp"

namespace mullet::jobs {

// The directories one sandbox gets: the job's clone, or a gate's checkout.
struct SandboxDirs {
  std::string work_tree;
  std::string git_dir;
  std::string home;
};

// What one phase runs, before it becomes a sandbox plan.
struct PhaseSpec {
  std::string name;  // setup, worker, gate:<name>
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::vector<sandbox::Mount> mounts;
  std::string stdin_data;
  std::vector<std::string> grants;
  std::int64_t wall_seconds = 0;   // this phase's wall-clock limit
  bool wall_is_job_limit = false;  // it is what remains of the job's: a timeout is the job's
  // Watches the worker's output; its stdout is an event stream kept apart
  // (events.jsonl) when structured_stdout.
  executors::WorkerSession* session = nullptr;
  bool structured_stdout = false;
};

PhaseSpec setup_phase(const config::Config& config);
PhaseSpec worker_phase(const config::Config& config, const JobPaths& paths, const executors::WorkerSpec& spec);
PhaseSpec gate_phase(const config::Config& config, const config::Gate& gate);

// `uids`: when git-mullet runs as root, the host uid the sandbox runs as
// (count 1), or before the job starts the range it will get one from.
sandbox::Plan plan_for(const git::Repository& repo, const config::Config& config, const JobPaths& paths,
                       const SandboxDirs& dirs, const PhaseSpec& phase, const std::string& proxy_socket,
                       const std::optional<UidRange>& uids);

// Runs phases of one job: their output goes to the job's log (and our
// stderr), each gets its own egress proxy when it has grants. After each,
// no setuid/setgid bit is left in the directories it could write.
class PhaseRunner {
 public:
  PhaseRunner(const git::Repository& repo, const config::Config& config, const JobPaths& paths, bool echo,
              std::optional<uid_t> sandbox_uid);

  std::pair<sandbox::RunResult, PhaseRecord> run(const PhaseSpec& phase, const SandboxDirs& dirs);

 private:
  const git::Repository& m_repo;
  const config::Config& m_config;
  const JobPaths& m_paths;
  bool m_echo;
  std::optional<uid_t> m_sandbox_uid;
  UniqueFd m_log_fd;
};

}  // namespace mullet::jobs
