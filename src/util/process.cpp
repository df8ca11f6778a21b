#include "util/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/poll_loop.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet {

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw failure("cannot create a pipe: " + util::errno_text(errno));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace mullet

namespace mullet::util {
namespace {

// Only async-signal-safe calls from here on: this runs in the forked child.
[[noreturn]] void child_fail(int report_fd, const char* step) {
  const int saved = errno;
  // The parent reads "<step>:<errno>" to build its message.
  char buffer[128];
  std::size_t length = 0;
  for (const char* p = step; *p != '\0' && length < 100; ++p) buffer[length++] = *p;
  buffer[length++] = ':';
  char digits[16];
  int count = 0;
  int value = saved;
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && count < 15);
  while (count > 0) buffer[length++] = digits[--count];
  [[maybe_unused]] auto ignored = ::write(report_fd, buffer, length);
  ::_exit(127);
}

bool force_fd_walk = false;

// For kernels where close_range() fails (ENOSYS before 5.9, EINVAL for
// CLOSE_RANGE_CLOEXEC before 5.11): marks every descriptor from 3 up
// close-on-exec by listing /proc/self/fd. Opened here, in the child, since a
// descriptor the parent opened would list the parent's table; raw getdents64
// into the stack, since opendir/readdir allocate.
bool cloexec_by_walking_fds() {
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char entries[4096];
  while (true) {
    const ssize_t got = ::getdents64(dir, entries, sizeof entries);
    if (got < 0) {
      const int saved = errno;
      ::close(dir);
      errno = saved;
      return false;
    }
    if (got == 0) break;
    for (ssize_t offset = 0; offset < got;) {
      unsigned short record_length = 0;
      std::memcpy(&record_length, entries + offset + offsetof(struct dirent64, d_reclen), sizeof record_length);
      const char* name = entries + offset + offsetof(struct dirent64, d_name);
      offset += record_length;
      int fd = 0;
      bool number = *name != '\0';
      for (const char* p = name; *p != '\0'; ++p) {
        if (*p < '0' || *p > '9' || fd > 100000000) {
          number = false;
          break;
        }
        fd = fd * 10 + (*p - '0');
      }
      if (!number || fd < 3 || fd == dir) continue;
      const int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
        ::close(dir);
        return false;
      }
    }
  }
  ::close(dir);
  return true;
}

int open_dev_null(int flags) {
  return ::open("/dev/null", flags | O_CLOEXEC);
}

}  // namespace

Child::Child(Child&& other) noexcept : m_pid(other.m_pid), m_leads_group(other.m_leads_group) {
  other.m_pid = -1;
}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    m_pid = other.m_pid;
    m_leads_group = other.m_leads_group;
    other.m_pid = -1;
  }
  return *this;
}

Child::~Child() {
  kill_and_reap();
}

void Child::kill(int signal) const {
  if (m_pid > 0) ::kill(m_leads_group ? -m_pid : m_pid, signal);
}

ExitStatus Child::wait() {
  if (m_pid <= 0) throw failure("internal error: waiting for a process that is not ours");
  int status = 0;
  while (::waitpid(m_pid, &status, 0) < 0) {
    if (errno != EINTR) {
      const int saved = errno;
      m_pid = -1;
      throw failure("waitpid failed: " + errno_text(saved));
    }
  }
  m_pid = -1;
  return decode_wait_status(status);
}

pid_t Child::release() {
  const pid_t pid = m_pid;
  m_pid = -1;
  return pid;
}

void Child::kill_and_reap() noexcept {
  if (m_pid <= 0) return;
  kill(SIGKILL);
  int status = 0;
  while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
  }
  m_pid = -1;
}

Environment current_environment() {
  Environment env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view pair(*entry);
    const auto equals = pair.find('=');
    if (equals != std::string_view::npos) env[std::string(pair.substr(0, equals))] = pair.substr(equals + 1);
  }
  return env;
}

namespace {

// What the child wrote to its report pipe before exec ("step:errno"), or
// nothing once exec closed the pipe.
std::string read_child_report(int fd) {
  std::string message;
  char buffer[128];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      message.append(buffer, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return message;
  }
}

}  // namespace

Child spawn(const SpawnOptions& options) {
  if (options.argv.empty()) throw failure("internal error: spawn without a program");

  std::vector<std::string> env_strings;
  env_strings.reserve(options.env.size());
  for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv;
  for (auto& word : argv_strings) argv.push_back(word.data());
  argv.push_back(nullptr);

  UniqueFd null_in(open_dev_null(O_RDONLY));
  UniqueFd null_out(open_dev_null(O_WRONLY));
  if (!null_in || !null_out) throw failure("cannot open /dev/null: " + errno_text(errno));
  const int in_fd = options.stdin_fd >= 0 ? options.stdin_fd : null_in.get();
  const int out_fd = options.stdout_fd >= 0 ? options.stdout_fd : null_out.get();
  const int err_fd = options.stderr_fd >= 0 ? options.stderr_fd : null_out.get();

  Pipe report = make_pipe();
  const pid_t parent_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw failure("cannot fork: " + errno_text(errno));
  if (pid == 0) {
    const int report_fd = report.write_end.get();
    if (options.new_session && ::setsid() < 0) child_fail(report_fd, "setsid");
    // Move the standard streams into place; dup2 clears close-on-exec.
    int fds[3] = {in_fd, out_fd, err_fd};
    for (int& fd : fds) {
      if (fd <= 2) {
        const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (moved < 0) child_fail(report_fd, "dup");
        fd = moved;
      }
    }
    for (int target = 0; target < 3; ++target) {
      if (::dup2(fds[target], target) < 0) child_fail(report_fd, "dup2");
    }
    // Nothing else leaks: mark every descriptor close-on-exec, then reopen the
    // ones the caller passes on on purpose.
    if (force_fd_walk || ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      if (!cloexec_by_walking_fds()) child_fail(report_fd, "close-on-exec");
    }
    for (const int fd : options.keep_fds) {
      if (::fcntl(fd, F_SETFD, 0) != 0) child_fail(report_fd, "keep-fd");
    }
    signal(SIGPIPE, SIG_DFL);
    sigset_t all_signals;
    sigemptyset(&all_signals);
    sigprocmask(SIG_SETMASK, &all_signals, nullptr);
    for (const int fd : options.cgroup_procs_fds) {
      if (::write(fd, "0", 1) != 1) child_fail(report_fd, "joining the cgroup");
    }
    for (const auto& [resource, value] : options.rlimits) {
      const rlimit limit{value, value};
      if (::setrlimit(resource, &limit) != 0) child_fail(report_fd, "setrlimit");
    }
    if (options.child_setup != nullptr && !options.child_setup(options.child_setup_data)) {
      child_fail(report_fd, "child setup");
    }
    if (options.gid && (::setgroups(0, nullptr) != 0 || ::setgid(*options.gid) != 0)) {
      child_fail(report_fd, "setgid");
    }
    if (options.uid && ::setuid(*options.uid) != 0) child_fail(report_fd, "setuid");
    // After the uid change: changing credentials clears the death signal.
    if (options.die_with_parent) {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report_fd, "prctl");
      if (::getppid() != parent_pid) ::_exit(127);
    }
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) child_fail(report_fd, "chdir");
    ::execve(argv[0], argv.data(), envp.data());
    child_fail(report_fd, "exec");
  }
  // Ours from here: an exception before the caller has it kills and reaps it.
  Child child(pid, options.new_session);
  report.write_end.reset();
  const std::string message = read_child_report(report.read_end.get());
  if (!message.empty()) {
    // It is exiting; the Child reaps it as the exception leaves.
    const auto colon = message.rfind(':');
    const int error_number = std::atoi(message.c_str() + colon + 1);
    const std::string step = message.substr(0, colon);
    throw failure("cannot start " + options.argv[0] + " (" + step + "): " + errno_text(error_number));
  }
  return child;
}

std::string ExitStatus::describe() const {
  if (signal != 0) return std::string("killed by signal ") + ::strsignal(signal);
  return "exit code " + std::to_string(code);
}

ExitStatus decode_wait_status(int status) {
  ExitStatus result;
  if (WIFEXITED(status)) {
    result.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.code = 128 + result.signal;
  }
  return result;
}

void force_fd_walk_for_tests(bool on) {
  force_fd_walk = on;
}

CapturedRun run_capture(SpawnOptions options, const std::string& input, const CaptureLimits& limits) {
  const bool bounded = limits.deadline_seconds > 0 || limits.cancellable;
  if (bounded) options.new_session = true;
  Pipe in = make_pipe();
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  options.stdin_fd = in.read_end.get();
  options.stdout_fd = out.write_end.get();
  options.stderr_fd = err.write_end.get();
  const std::int64_t started = monotonic_ms();
  Child child = spawn(options);
  in.read_end.reset();
  out.write_end.reset();
  err.write_end.reset();

  CapturedRun run;
  std::string stopped;
  PollLoop loop;
  loop.read(out.read_end, [&](std::string_view chunk) {
    run.out.append(chunk);
    return PollLoop::Next::keep_going;
  });
  loop.read(err.read_end, [&](std::string_view chunk) {
    run.err.append(chunk);
    return PollLoop::Next::keep_going;
  });
  loop.write(in.write_end, input);
  if (limits.deadline_seconds > 0) loop.set_deadline(started + limits.deadline_seconds * 1000LL);
  if (limits.cancellable) {
    // A signal may land on another thread, so cancellation is polled.
    loop.on_wake(
        [&](const PollLoop::Wake&) {
          if (!cancel_requested()) return PollLoop::Next::keep_going;
          stopped = "was stopped: git-mullet was interrupted (SIGINT or SIGTERM)";
          return PollLoop::Next::stop;
        },
        250);
  }
  // On an exception the Child kills (its group, when bounded) and reaps.
  if (loop.run() == PollLoop::Ended::deadline) {
    stopped = "timed out after " + std::to_string(limits.deadline_seconds) + " s";
  }
  if (!stopped.empty()) child.kill(SIGKILL);
  in.write_end.reset();
  // Something that left the process group may still hold the pipes: we do
  // not wait for it.
  out.read_end.reset();
  err.read_end.reset();
  run.status = child.wait();
  if (!stopped.empty()) throw failure(options.argv[0] + " " + stopped);
  return run;
}

std::string host_path() {
  const char* path = std::getenv("PATH");
  return path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
}

std::string find_in_path(const std::string& program, const std::string& path_value) {
  if (program.find('/') != std::string::npos) return program;
  for (const auto& dir : split(path_value, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

}  // namespace mullet::util
