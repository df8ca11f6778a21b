#include "cli/detach.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <initializer_list>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "sandbox/host.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/poll_loop.hpp"
#include "util/process.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

// False when the other end is gone (or the write failed otherwise).
bool write_all(int fd, const std::string& data) {
  std::size_t written = 0;
  while (written < data.size()) {
    const ssize_t put = ::write(fd, data.data() + written, data.size() - written);
    if (put > 0) {
      written += static_cast<std::size_t>(put);
    } else if (put < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

// Our own command line as we were started, with the hidden option right
// after the subcommand (where a later `--` cannot make it an argument) and
// without --detach. Read from /proc rather than rebuilt from parsed options,
// so every option `run` has, now or later, reaches the child unchanged.
std::vector<std::string> child_arguments(int report_fd) {
  const auto cmdline = util::read_proc_file("/proc/self/cmdline");
  if (!cmdline || cmdline->empty()) throw failure("cannot read this process's command line in /proc/self/cmdline");
  auto words = util::split(*cmdline, '\0');
  words.pop_back();  // what follows the last NUL
  std::vector<std::string> argv{util::self_executable()};
  bool placed = false;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == detach_option || word.rfind(std::string(detach_option) + "=", 0) == 0) continue;
    argv.push_back(word);
    if (!placed && word == "run") {
      argv.push_back(std::string(report_id_fd_option) + "=" + std::to_string(report_fd));
      placed = true;
    }
  }
  if (!placed) throw failure("internal error: --detach without `run` in the command line");
  return argv;
}

// The task as a file the child reads as its stdin: a memfd holds any size
// without a writer that must keep up with the reader.
UniqueFd task_file(const std::string& task) {
  UniqueFd fd(::memfd_create("mullet-task", MFD_CLOEXEC));
  if (!fd || !write_all(fd.get(), task) || ::lseek(fd.get(), 0, SEEK_SET) != 0) {
    throw failure("cannot hand the task over to the detached job: " + util::errno_text(errno));
  }
  return fd;
}

// One of the child's pipes, and what came through it.
struct Stream {
  UniqueFd fd;
  std::string text;
};

using Next = util::PollLoop::Next;
using Wake = util::PollLoop::Wake;

// Reads the open streams (a stream is closed at its end) until none is left
// open or `on_wake`, which runs after every wait, says to stop. With a tick
// of 0, no wait blocks.
void pump(std::initializer_list<Stream*> streams, const std::function<Next(const Wake&)>& on_wake,
          std::optional<std::int64_t> tick_ms = std::nullopt) {
  util::PollLoop loop;
  for (Stream* stream : streams) {
    loop.read(stream->fd, [stream](std::string_view chunk) {
      stream->text.append(chunk);
      return Next::keep_going;
    });
  }
  loop.on_wake(on_wake, tick_ms);
  loop.run();
}

// Ctrl-C (or SIGTERM) before the id is known stops the job too: the child is
// in a session of its own, so the terminal does not reach it. A hangup does
// not: surviving the terminal is what --detach is for.
void pass_on_cancel(pid_t child, bool& passed) {
  if (passed || !util::cancel_requested() || util::cancel_signal() == SIGHUP) return;
  ::kill(child, util::cancel_signal());
  passed = true;
}

}  // namespace

int run_detached(const std::optional<std::string>& task_on_stdin, bool json) {
  Pipe id_pipe = make_pipe();
  Pipe out_pipe = make_pipe();
  Pipe err_pipe = make_pipe();
  // The child gets this end under the same number, so it must not be one
  // spawn() hands out as a standard stream.
  UniqueFd id_write(::fcntl(id_pipe.write_end.get(), F_DUPFD_CLOEXEC, 3));
  if (!id_write) throw failure("cannot duplicate a pipe: " + util::errno_text(errno));
  id_pipe.write_end.reset();
  UniqueFd task;
  if (task_on_stdin) task = task_file(*task_on_stdin);

  util::SpawnOptions options;
  options.argv = child_arguments(id_write.get());
  options.env = util::current_environment();
  options.stdin_fd = task ? task.get() : -1;
  options.stdout_fd = out_pipe.write_end.get();
  options.stderr_fd = err_pipe.write_end.get();
  options.keep_fds = {id_write.get()};
  options.new_session = true;  // no terminal: its hangup and Ctrl-C do not reach the job
  // Until the job exists, a failure here ends the child with us (the Child's
  // destructor); once it does, the child is released to run on.
  util::Child child = util::spawn(options);
  id_write.reset();
  out_pipe.write_end.reset();
  err_pipe.write_end.reset();
  task.reset();

  Stream id{std::move(id_pipe.read_end), {}};
  Stream out{std::move(out_pipe.read_end), {}};
  Stream err{std::move(err_pipe.read_end), {}};
  bool cancel_passed = false;
  pump({&id, &out, &err}, [&](const Wake&) {
    pass_on_cancel(child.pid(), cancel_passed);
    return id.fd && id.text.find('\n') == std::string::npos ? Next::keep_going : Next::stop;
  });

  if (const auto newline = id.text.find('\n'); newline != std::string::npos) {
    child.release();
    // The job exists. What the child said before (warnings) is passed on;
    // from now on it writes to /dev/null and its record keeps everything.
    pump(
        {&out, &err}, [](const Wake& wake) { return wake.ready > 0 ? Next::keep_going : Next::stop; }, 0);
    std::cerr << err.text << std::flush;
    std::cout << out.text;
    const std::string job_id = util::trim(id.text.substr(0, newline));
    if (json) {
      std::cout << nlohmann::json{{"id", job_id}}.dump(2) << "\n";
    } else {
      std::cout << job_id << "\n";
    }
    return 0;
  }

  // The child ended before the job existed: say what it said, end as it did.
  pump({&out, &err}, [&](const Wake&) {
    pass_on_cancel(child.pid(), cancel_passed);
    return Next::keep_going;
  });
  const util::ExitStatus status = child.wait();
  std::cout << out.text << std::flush;
  std::cerr << err.text << std::flush;
  if (!status.exited()) {
    throw failure("the detached run was " + status.describe() + " before its job existed");
  }
  if (status.code == 0) throw failure("internal error: the detached run ended without a job");
  return status.code;
}

std::function<void(const std::string& id)> detached_child(int report_fd) {
  if (report_fd < 3 || ::fcntl(report_fd, F_GETFD) < 0) {
    throw usage_error(std::string(report_id_fd_option) + " " + std::to_string(report_fd) +
                      " is not an open file descriptor");
  }
  // Nothing we start needs it (spawn() would not pass it on anyway).
  ::fcntl(report_fd, F_SETFD, FD_CLOEXEC);
  util::ignore_hangup();
  return [report_fd](const std::string& id) {
    // A failed write means the foreground process is gone (its terminal was
    // closed, say); the job goes on all the same.
    write_all(report_fd, id + "\n");
    ::close(report_fd);
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (null) {
      ::dup2(null.get(), STDOUT_FILENO);
      ::dup2(null.get(), STDERR_FILENO);
    }
  };
}

}  // namespace mullet::cli
