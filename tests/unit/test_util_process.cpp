#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

using mullet::Error;
using mullet::util::CapturedRun;
using mullet::util::run_capture;
using mullet::util::SpawnOptions;

namespace {

SpawnOptions shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = {{"PATH", "/usr/bin:/bin"}};
  return options;
}

// A file of our own, open without close-on-exec at a high number, as a
// library might leave one.
struct LeakyFile {
  std::string path;
  int fd = -1;
  explicit LeakyFile(int number) {
    std::string pattern = "/tmp/mullet-unit-fd-XXXXXX";
    const int opened = ::mkstemp(pattern.data());
    REQUIRE(opened >= 0);
    path = pattern;
    fd = ::dup2(opened, number);
    REQUIRE(fd == number);
    ::close(opened);
  }
  LeakyFile(const LeakyFile&) = delete;
  LeakyFile& operator=(const LeakyFile&) = delete;
  ~LeakyFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

// What the child's descriptors point at, one per line.
std::string descriptors_seen_by_child(const std::vector<int>& keep) {
  SpawnOptions options = shell("for f in /proc/self/fd/*; do echo \"${f##*/} $(readlink \"$f\")\"; done");
  options.keep_fds = keep;
  const CapturedRun run = run_capture(options);
  REQUIRE(run.status.success());
  return run.out;
}

bool gone_or_zombie(pid_t pid) {
  const auto stat = mullet::util::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  const auto close = stat->rfind(')');
  return close != std::string::npos && stat->compare(close + 2, 1, "Z") == 0;
}

// The message run_capture threw, or "" when it returned.
std::string error_of(const SpawnOptions& options, const mullet::util::CaptureLimits& limits = {}) {
  try {
    run_capture(options, {}, limits);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

bool fail_with_eperm(void* /*data*/) {
  errno = EPERM;
  return false;
}

bool write_marker(void* data) {
  const int fd = *static_cast<int*>(data);
  return ::write(fd, "setup ran", 9) == 9;
}

}  // namespace

TEST_CASE("run_capture feeds stdin and keeps stdout and stderr apart") {
  const std::string input(200000, 'i');  // more than a pipe holds
  const CapturedRun run = run_capture(shell("wc -c; echo to-err >&2"), input);
  CHECK(run.status.success());
  CHECK(run.out == "200000\n");
  CHECK(run.err == "to-err\n");
}

TEST_CASE("exit statuses are decoded") {
  const CapturedRun exited = run_capture(shell("exit 7"));
  CHECK(exited.status.exited());
  CHECK(exited.status.code == 7);
  CHECK_FALSE(exited.status.success());
  CHECK(exited.status.describe() == "exit code 7");

  const CapturedRun killed = run_capture(shell("kill -TERM $$"));
  CHECK_FALSE(killed.status.exited());
  CHECK(killed.status.signal == SIGTERM);
  CHECK(killed.status.code == 128 + SIGTERM);
  CHECK(killed.status.describe().find("killed by signal") == 0);
}

TEST_CASE("a program that cannot start is named") {
  SpawnOptions options;
  options.argv = {"/nonexistent/mullet-program"};
  CHECK(error_of(options).find("cannot start /nonexistent/mullet-program (exec)") != std::string::npos);
}

TEST_CASE("child_setup runs in the child and can fail the spawn") {
  SpawnOptions failing = shell("true");
  failing.child_setup = fail_with_eperm;
  CHECK(error_of(failing).find("(child setup)") != std::string::npos);

  mullet::Pipe pipe = mullet::make_pipe();
  int write_fd = pipe.write_end.get();
  SpawnOptions writing = shell("true");
  writing.child_setup = write_marker;
  writing.child_setup_data = &write_fd;
  CHECK(run_capture(writing).status.success());
  pipe.write_end.reset();
  char buffer[32] = {};
  CHECK(::read(pipe.read_end.get(), buffer, sizeof buffer) == 9);
  CHECK(std::string(buffer) == "setup ran");
}

TEST_CASE("a deadline kills the program and everything in its process group") {
  const std::string pid_file = "/tmp/mullet-unit-deadline-" + std::to_string(::getpid());
  const std::int64_t started = mullet::util::monotonic_ms();
  // The child's own child keeps the pipes open: only the group kill ends it.
  const std::string error = error_of(shell("sleep 1000 & echo $! >" + pid_file + "; wait"), {1, false});
  CHECK(error == "/bin/sh timed out after 1 s");
  const std::int64_t took = mullet::util::monotonic_ms() - started;
  CHECK(took >= 1000);
  CHECK(took < 10000);
  const pid_t grandchild = static_cast<pid_t>(std::atoi(mullet::util::read_file(pid_file).c_str()));
  ::unlink(pid_file.c_str());
  REQUIRE(grandchild > 0);
  // SIGKILL is pending once kill() returns, but the process takes a moment to
  // exit (and init to reap it): wait for that, boundedly.
  bool ended = false;
  for (int tries = 0; tries < 500 && !ended; ++tries) {
    ended = gone_or_zombie(grandchild);
    if (!ended) ::usleep(10000);
  }
  CHECK(ended);
}

TEST_CASE("a program that ends before its deadline is not disturbed") {
  const CapturedRun run = run_capture(shell("echo quick"), {}, {10, true});
  CHECK(run.status.success());
  CHECK(run.out == "quick\n");
}

TEST_CASE("a spawned child inherits no descriptor but 0-2 and the kept ones") {
  const LeakyFile leaked(201);
  const LeakyFile kept(202);
  for (const bool walk : {false, true}) {
    CAPTURE(walk);
    // The walk of /proc/self/fd is what runs where close_range() fails.
    mullet::util::force_fd_walk_for_tests(walk);
    const std::string seen = descriptors_seen_by_child({kept.fd});
    mullet::util::force_fd_walk_for_tests(false);
    CHECK(seen.find(leaked.path) == std::string::npos);
    CHECK(seen.find("202 " + kept.path) != std::string::npos);
    CHECK(seen.find("201 ") == std::string::npos);
  }
}

TEST_CASE("a Child that goes away unwaited is killed and reaped") {
  pid_t pid = -1;
  {
    mullet::util::Child child = mullet::util::spawn(shell("exec sleep 1000"));
    pid = child.pid();
    REQUIRE(pid > 0);
    // Still running: nothing has reaped it.
    int status = 0;
    CHECK(::waitpid(pid, &status, WNOHANG) == 0);
  }
  // Reaped by the destructor: it is no child of ours any more.
  int status = 0;
  CHECK(::waitpid(pid, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("a moved-from Child is inert; wait() reaps and disarms") {
  mullet::util::Child target;
  CHECK(!target);
  pid_t pid = -1;
  {
    mullet::util::Child source = mullet::util::spawn(shell("exec sleep 1000"));
    pid = source.pid();
    target = std::move(source);
    CHECK(!source);
    CHECK(source.pid() == -1);
  }
  // The moved-from one's destruction did not touch the process.
  int status = 0;
  CHECK(::waitpid(pid, &status, WNOHANG) == 0);
  CHECK(target.pid() == pid);
  target.kill(SIGTERM);
  const mullet::util::ExitStatus ended = target.wait();
  CHECK(ended.signal == SIGTERM);
  CHECK(!target);
}

TEST_CASE("a released Child runs on") {
  pid_t pid = -1;
  {
    mullet::util::Child child = mullet::util::spawn(shell("exec sleep 1000"));
    pid = child.release();
    CHECK(!child);
  }
  int status = 0;
  CHECK(::waitpid(pid, &status, WNOHANG) == 0);
  ::kill(pid, SIGKILL);
  CHECK(::waitpid(pid, &status, 0) == pid);
}

TEST_CASE("host_path is $PATH, or the one fallback when it is unset") {
  const char* saved = std::getenv("PATH");
  const std::string before = saved != nullptr ? saved : "";
  ::setenv("PATH", "/a:/b", 1);
  CHECK(mullet::util::host_path() == "/a:/b");
  ::unsetenv("PATH");
  CHECK(mullet::util::host_path() == mullet::util::fallback_path);
  if (saved != nullptr) ::setenv("PATH", before.c_str(), 1);
}
