// Starting and waiting for child processes.
//
// Every process git-mullet starts goes through spawn(): an explicit argv, an
// explicit environment (never inherited), explicit standard streams, and no
// file descriptor leaked except those named in keep_fds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/fd.hpp"

namespace mullet::util {

using Environment = std::map<std::string, std::string>;

struct SpawnOptions {
  std::vector<std::string> argv;
  Environment env;
  std::string cwd;               // empty: inherit ours
  int stdin_fd = -1;             // -1: /dev/null
  int stdout_fd = -1;            // -1: /dev/null
  int stderr_fd = -1;            // -1: /dev/null
  std::vector<int> keep_fds;     // inherited by the child under the same number
  bool new_session = false;      // setsid() in the child
  bool die_with_parent = false;  // PR_SET_PDEATHSIG SIGKILL
  std::optional<uid_t> uid;      // drop to this uid/gid (when we are root)
  std::optional<gid_t> gid;
  // setrlimit(resource, value) in the child, before it drops privileges.
  std::vector<std::pair<int, unsigned long>> rlimits;
  // Open cgroup.procs files (sandbox/cgroup.hpp): the child writes "0" to
  // each first thing, so it and all it starts live in those cgroups.
  std::vector<int> cgroup_procs_fds;
  // Runs in the child after the rlimits, before the uid/gid change, with
  // child_setup_data; returns false (with errno set) to fail the spawn. Other
  // threads may hold the allocator's locks at fork time, so it must not
  // allocate: everything it needs is prepared before spawn().
  bool (*child_setup)(void* data) = nullptr;
  void* child_setup_data = nullptr;
};

struct ExitStatus {
  int code = -1;   // exit code when exited
  int signal = 0;  // terminating signal, 0 when exited
  bool exited() const { return signal == 0; }
  bool success() const { return signal == 0 && code == 0; }
  std::string describe() const;
};

ExitStatus decode_wait_status(int status);

// A started process we are responsible for. Unless it was waited for or
// released, destruction kills it (its whole process group when it leads a
// session of its own) and reaps it, so an exception between spawn and wait
// leaves nothing running. Move-only; a moved-from Child is inert.
class Child {
 public:
  Child() = default;
  Child(pid_t pid, bool leads_group) : m_pid(pid), m_leads_group(leads_group) {}
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return m_pid; }
  explicit operator bool() const { return m_pid > 0; }
  // Sends `signal` to the process, or to its process group when it leads one.
  void kill(int signal) const;
  // Blocks until it ends and reaps it; the Child is inert afterwards.
  ExitStatus wait();
  // Stops owning the process (it runs on, unwatched) and returns its pid.
  pid_t release();

 private:
  void kill_and_reap() noexcept;

  pid_t m_pid = -1;
  bool m_leads_group = false;
};

// Our own environment, as it is now: the one place that reads `environ`.
Environment current_environment();

// Starts the child. Throws mullet::Error when the program cannot be started
// (the message names it).
Child spawn(const SpawnOptions& options);

struct CapturedRun {
  ExitStatus status;
  std::string out;
  std::string err;
};

// Bounds on a program we do not control, so a hung one cannot hang us.
struct CaptureLimits {
  // 0: none. On expiry the child and its process group are killed, reaped,
  // and run_capture throws "<program> timed out after N s".
  int deadline_seconds = 0;
  // SIGINT/SIGTERM (util::cancel_requested) stop it the same way.
  bool cancellable = false;
};

// Runs to completion, feeding `input` on stdin and capturing both outputs.
// With a limit the child runs in a session of its own, so that killing its
// process group reaches what it started.
CapturedRun run_capture(SpawnOptions options, const std::string& input = {}, const CaptureLimits& limits = {});

// The deadline for asking a program about itself (--version, --help, a test
// sandbox): generous for a cold start from a slow disk, short enough that a
// hung binary fails `run` and `doctor` clearly.
inline constexpr int probe_deadline_seconds = 15;

// Test hook: makes spawn() skip close_range() and walk /proc/self/fd, as on
// a kernel without it.
void force_fd_walk_for_tests(bool on);

// The host's PATH, for finding programs and for the environments we build:
// $PATH as set, or when it is unset the one fallback below.
inline constexpr const char* fallback_path = "/usr/local/bin:/usr/bin:/bin";
std::string host_path();

// The directories in PATH searched for `program`; empty when not found.
std::string find_in_path(const std::string& program, const std::string& path_value);
// Our PATH, where every program we start on the host is looked up (bwrap,
// git, the worker CLIs): $PATH, or "/usr/local/bin:/usr/bin:/bin" when it is
// unset.
std::string host_path();

}  // namespace mullet::util
