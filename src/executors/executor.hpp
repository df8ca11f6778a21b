// An executor turns a task into the worker's command line inside the sandbox,
// and turns what the worker did into an outcome.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "jobs/record.hpp"
#include "sandbox/plan.hpp"
#include "sandbox/runner.hpp"

namespace mullet::executors {

struct TaskContext {
  std::string prompt;
  const config::Config& config;
};

struct WorkerSpec {
  std::vector<std::string> command;  // argv inside the sandbox
  std::map<std::string, std::string> env;
  std::vector<sandbox::Mount> mounts;
  std::string stdin_data;
  jobs::ExecutorRecord record;
};

struct WorkerOutcome {
  bool success = false;
  std::string error;  // why not, when not
};

class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  virtual ~Executor() = default;

  virtual std::string name() const = 0;
  // Throws a usage error when the task cannot be prepared (missing command).
  virtual WorkerSpec prepare(const TaskContext& task) const = 0;
  virtual WorkerOutcome interpret(const sandbox::RunResult& run, const std::string& output) const;
};

// Throws a usage error for an unknown or unavailable executor.
std::unique_ptr<Executor> make_executor(const std::string& name);

}  // namespace mullet::executors
