#include "util/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
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

int open_dev_null(int flags) {
  return ::open("/dev/null", flags | O_CLOEXEC);
}

}  // namespace

pid_t spawn(const SpawnOptions& options) {
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
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    for (const int fd : options.keep_fds) {
      if (::fcntl(fd, F_SETFD, 0) != 0) child_fail(report_fd, "keep-fd");
    }
    signal(SIGPIPE, SIG_DFL);
    sigset_t all_signals;
    sigemptyset(&all_signals);
    sigprocmask(SIG_SETMASK, &all_signals, nullptr);
    for (const auto& [resource, value] : options.rlimits) {
      const rlimit limit{value, value};
      if (::setrlimit(resource, &limit) != 0) child_fail(report_fd, "setrlimit");
    }
    if (options.child_setup && !options.child_setup()) child_fail(report_fd, "child setup");
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
  report.write_end.reset();
  std::string message;
  char buffer[128];
  while (true) {
    const ssize_t got = ::read(report.read_end.get(), buffer, sizeof buffer);
    if (got > 0) {
      message.append(buffer, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break;
  }
  if (!message.empty()) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    const auto colon = message.rfind(':');
    const int error_number = std::atoi(message.c_str() + colon + 1);
    const std::string step = message.substr(0, colon);
    throw failure("cannot start " + options.argv[0] + " (" + step + "): " + errno_text(error_number));
  }
  return pid;
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

ExitStatus wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw failure("waitpid failed: " + errno_text(errno));
  }
  return decode_wait_status(status);
}

CapturedRun run_capture(SpawnOptions options, const std::string& input) {
  Pipe in = make_pipe();
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  options.stdin_fd = in.read_end.get();
  options.stdout_fd = out.write_end.get();
  options.stderr_fd = err.write_end.get();
  const pid_t pid = spawn(options);
  in.read_end.reset();
  out.write_end.reset();
  err.write_end.reset();
  ::fcntl(in.write_end.get(), F_SETFL, O_NONBLOCK);

  CapturedRun run;
  std::size_t written = 0;
  if (input.empty()) in.write_end.reset();
  char buffer[65536];
  while (out.read_end || err.read_end) {
    pollfd fds[3];
    nfds_t count = 0;
    int out_index = -1;
    int err_index = -1;
    int in_index = -1;
    if (out.read_end) {
      out_index = static_cast<int>(count);
      fds[count++] = {out.read_end.get(), POLLIN, 0};
    }
    if (err.read_end) {
      err_index = static_cast<int>(count);
      fds[count++] = {err.read_end.get(), POLLIN, 0};
    }
    if (in.write_end) {
      in_index = static_cast<int>(count);
      fds[count++] = {in.write_end.get(), POLLOUT, 0};
    }
    if (::poll(fds, count, -1) < 0) {
      if (errno == EINTR) continue;
      throw failure("poll failed: " + errno_text(errno));
    }
    auto drain = [&](int index, UniqueFd& fd, std::string& sink) {
      if (index < 0 || fds[index].revents == 0) return;
      const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
      if (got > 0) {
        sink.append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fd.reset();
      }
    };
    drain(out_index, out.read_end, run.out);
    drain(err_index, err.read_end, run.err);
    if (in_index >= 0 && fds[in_index].revents != 0) {
      const ssize_t put = ::write(in.write_end.get(), input.data() + written, input.size() - written);
      if (put > 0) written += static_cast<std::size_t>(put);
      if (put < 0 && errno != EAGAIN && errno != EINTR) in.write_end.reset();
      if (written >= input.size()) in.write_end.reset();
    }
  }
  in.write_end.reset();
  run.status = wait_for(pid);
  return run;
}

std::string find_in_path(const std::string& program, const std::string& path_value) {
  if (program.find('/') != std::string::npos) return program;
  for (const auto& dir : split(path_value, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

}  // namespace mullet::util
