// An executor turns a task into the worker's command line inside the sandbox,
// watches the worker while it runs, and turns what it did into an outcome.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"
#include "executors/report.hpp"
#include "sandbox/plan.hpp"
#include "sandbox/runner.hpp"
#include "sandbox/stop_reason.hpp"

namespace mullet::executors {

// Where executors' own files go inside the sandbox (read-only there).
inline constexpr const char* files_inside = "/mullet/etc";

// Which of Claude Code's credential variables carries the sentinel, so that
// it sends it in the header the real credential goes upstream in.
enum class ApiAuth {
  api_key,      // ANTHROPIC_API_KEY: x-api-key
  auth_token,   // ANTHROPIC_AUTH_TOKEN: Authorization: Bearer
  oauth_token,  // CLAUDE_CODE_OAUTH_TOKEN: Authorization: Bearer, as a subscription's
};

// How the worker reaches its model API: the credential endpoint, which the
// sandbox serves at `base_url`, with a sentinel in place of the credential.
struct ApiAccess {
  std::string base_url;  // "http://127.0.0.1:<port>"
  std::string sentinel;
  ApiAuth auth = ApiAuth::api_key;
};

// A variable of git-mullet's environment a worker's credential may come
// from when no [[credential]] is named.
struct HostCredential {
  std::string variable;
  std::string header;  // the upstream header it goes in
  std::string format;  // its value, "{}" standing for the credential
  ApiAuth auth = ApiAuth::api_key;
};

// Where an executor's model API credential comes from: the [[credential]] a
// setting names, else the first of some host variables, sent to a base URL
// (jobs/api_access resolves it).
struct ApiSource {
  std::string setting;          // the key naming a [[credential]], "[claude] credential"
  std::string credential_name;  // its value; empty: the host variables
  std::string base_url;         // where a host variable's credential goes
  std::vector<HostCredential> host_variables;
  std::string worker;  // who needs it, for messages: "Claude Code"
};

struct TaskContext {
  std::string prompt;
  const config::Settings& settings;
  // A directory of ours that outlives jobs, where an executor may cache what
  // it learned about its binary (the jobs directory).
  std::string cache_dir;
  // The worker's API, for executors that need one (null for the others).
  const ApiAccess* api = nullptr;
};

// A file the executor needs inside the sandbox, at files_inside/name.
struct GeneratedFile {
  std::string name;
  std::string content;
};

struct WorkerSpec {
  std::vector<std::string> command;  // argv inside the sandbox
  std::map<std::string, std::string> env;
  std::vector<sandbox::Mount> mounts;
  std::vector<GeneratedFile> files;
  // It talks to a model API: its phase gets the credential endpoint.
  bool uses_api = false;
  std::string stdin_data;
  // Its stdout is a machine-readable stream, kept apart from stderr (and
  // stored as the job's events.jsonl).
  bool structured_stdout = false;
  // The tools it was given, for an executor whose session checks them.
  std::vector<std::string> tools;
  // A command run before the worker, in the same sandbox (its mounts, its
  // environment, no network): the worker's program reports the configuration
  // it resolved, for check_preflight(). Empty: none.
  std::vector<std::string> preflight_command;
  // It runs commands in a sandbox of its own inside ours (Claude Code's Bash):
  // the system call filter leaves it what that needs.
  bool nested_sandbox = false;
  ExecutorRecord record;
};

struct WorkerOutcome {
  enum class Kind { success, failed, refused };
  Kind kind = Kind::failed;
  std::string error;  // why not, when not
  std::string hint;   // what the user can do about it
  WorkerReport report;
};

// Limits only the worker's own output shows (0: none).
struct SessionLimits {
  std::int64_t max_turns = 0;
  double max_cost_usd = 0;
};

// Watches one run of the worker: sees its output as it arrives, may stop it,
// and judges the run once it has ended.
class WorkerSession {
 public:
  WorkerSession() = default;
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;
  virtual ~WorkerSession() = default;

  virtual void on_stdout(std::string_view chunk) = 0;
  virtual void on_stderr(std::string_view chunk) = 0;
  // Called every few hundred milliseconds while the worker runs. A reason:
  // the sandbox must be killed now, and this is why.
  virtual std::optional<sandbox::StopReason> poll() { return std::nullopt; }
  // The whole sandbox has ended.
  virtual WorkerOutcome finish(const sandbox::RunResult& run) = 0;
  // False when it shows the worker's progress itself (an agent's turns and
  // tools); true when it only echoes output, and the phase's status line
  // (jobs/phases) is drawn around it.
  virtual bool wants_status_line() const { return false; }
};

class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  virtual ~Executor() = default;

  virtual std::string name() const = 0;
  // Whether its worker talks to a model API (then TaskContext::api is set,
  // and the worker phase gets the credential endpoint).
  virtual bool needs_api() const { return false; }
  // Where the credential of that API comes from (for executors that need one).
  virtual ApiSource api_source(const config::Settings& /*settings*/) const { return {}; }
  // Throws a usage error when the task cannot be prepared (missing command),
  // a refusal when the worker cannot be run safely.
  virtual WorkerSpec prepare(const TaskContext& task) const = 0;
  // For the worker `spec` (from prepare). show_progress: print what the
  // worker is doing on our stderr. The limits are enforced where the
  // executor can see turns and cost.
  virtual std::unique_ptr<WorkerSession> start_session(const WorkerSpec& spec, bool show_progress,
                                                       const SessionLimits& limits) const;
  // What differs between what spec.preflight_command printed and what the
  // worker must run with; empty when nothing does. A difference refuses the job.
  virtual std::string check_preflight(const WorkerSpec& /*spec*/, std::string_view /*printed*/) const { return {}; }
  // Why the worker must not start in this work tree (a host path), checked
  // before each attempt; empty when nothing stops it.
  virtual std::string check_work_tree(const std::string& /*work_tree*/) const { return {}; }
};

// The verdict on a worker that prints plain text: success is exit code 0.
WorkerOutcome plain_outcome(const sandbox::RunResult& run);

// The hint for tool uses the worker's own permission rules refused (each
// described in the executor's words): what they were and, when a shell
// command was among them, the key that allows commands (`[claude]
// allow_bash`). Empty when nothing was refused.
std::string refused_uses_hint(const std::vector<std::string>& refused_uses, bool a_command_was_refused,
                              const std::string& allow_key);

// One event of a worker's structured output (events.jsonl) as lines a person
// reads, in the dialect of the executor that recorded it; empty for events
// not worth a line.
std::string render_event(const std::string& executor_name, const nlohmann::json& event);

// Throws a usage error for an unknown executor.
std::unique_ptr<Executor> make_executor(const std::string& name);

}  // namespace mullet::executors
