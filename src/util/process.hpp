// Starting and waiting for child processes.
//
// Every process git-mullet starts goes through spawn(): an explicit argv, an
// explicit environment (never inherited), explicit standard streams, and no
// file descriptor leaked except those named in keep_fds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
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
  // Runs in the child after the rlimits, before the uid/gid change; returns
  // false (with errno set) to fail the spawn. Only for single-threaded callers.
  std::function<bool()> child_setup;
};

// Starts the child and returns its pid. Throws mullet::Error when the program
// cannot be started (the message names it).
pid_t spawn(const SpawnOptions& options);

struct ExitStatus {
  int code = -1;   // exit code when exited
  int signal = 0;  // terminating signal, 0 when exited
  bool exited() const { return signal == 0; }
  bool success() const { return signal == 0 && code == 0; }
  std::string describe() const;
};

ExitStatus decode_wait_status(int status);
// Blocks until pid ends.
ExitStatus wait_for(pid_t pid);

struct CapturedRun {
  ExitStatus status;
  std::string out;
  std::string err;
};

// Runs to completion, feeding `input` on stdin and capturing both outputs.
CapturedRun run_capture(SpawnOptions options, const std::string& input = {});

// The directories in PATH searched for `program`; empty when not found.
std::string find_in_path(const std::string& program, const std::string& path_value);

}  // namespace mullet::util
