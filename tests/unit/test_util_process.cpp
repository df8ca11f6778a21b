#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "process_helpers.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/signals.hpp"

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
  // SIGKILL is pending once kill() returns; the process ends a moment later.
  CHECK(mullet::test::ends(grandchild));
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

TEST_CASE("spawn passes argv word for word, argv[0] included") {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c",        "printf '<%s>' \"$0\"; for word; do printf '[%s]' \"$word\"; done",
                  "zeroth",  "two words", "",
                  "$HOME",   "*",         "new\nline",
                  "-n",      "--"};
  const CapturedRun run = run_capture(options);
  CHECK(run.status.success());
  CHECK(run.out == "<zeroth>[two words][][$HOME][*][new\nline][-n][--]");
}

TEST_CASE("spawn gives the child exactly the environment asked for, nothing of ours") {
  ::setenv("MULLET_UNIT_OURS", "must not leak", 1);
  SpawnOptions options;
  options.argv = {mullet::util::find_in_path("env", "/usr/bin:/bin")};
  REQUIRE(!options.argv[0].empty());
  options.env = {{"PLAIN", "1"}, {"SPACES", "x  y"}, {"EMPTY", ""}, {"EQUALS", "a=b=c"}, {"NEWLINE", "1\n2"}};
  const CapturedRun run = run_capture(options);
  ::unsetenv("MULLET_UNIT_OURS");
  CHECK(run.status.success());
  CHECK(run.out == "EMPTY=\nEQUALS=a=b=c\nNEWLINE=1\n2\nPLAIN=1\nSPACES=x  y\n");

  options.env.clear();
  CHECK(run_capture(options).out.empty());
}

TEST_CASE("spawn runs the child in cwd, and names a cwd it cannot enter") {
  const mullet::util::TempDir dir("/tmp", "mullet-unit-cwd-");
  SpawnOptions options = shell("pwd -P");
  options.cwd = dir.path();
  CHECK(run_capture(options).out == mullet::util::real_path(dir.path()) + "\n");

  options.cwd = dir.path() + "/missing";
  CHECK(error_of(options).find("cannot start /bin/sh (chdir): ") == 0);

  // Without one, ours.
  char ours[4096];
  REQUIRE(::getcwd(ours, sizeof ours) != nullptr);
  CHECK(run_capture(shell("pwd -P")).out == mullet::util::real_path(ours) + "\n");
}

TEST_CASE("run_capture feeds stdin while it reads stdout, both more than a pipe holds") {
  std::string input(4 << 20, '\0');
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>(i * 7 % 251);
  SpawnOptions options;
  options.argv = {mullet::util::find_in_path("cat", "/usr/bin:/bin")};
  const CapturedRun run = run_capture(options, input);
  CHECK(run.status.success());
  CHECK(run.out == input);
}

TEST_CASE("run_capture without input gives the child an ended stdin") {
  SpawnOptions options;
  options.argv = {mullet::util::find_in_path("cat", "/usr/bin:/bin")};
  const CapturedRun run = run_capture(options);
  CHECK(run.status.success());
  CHECK(run.out.empty());
}

TEST_CASE("run_capture is not held by a child that exits without reading its input") {
  // As in git-mullet (cli/app.cpp): a write to a pipe nobody reads fails
  // instead of killing us.
  const auto saved = ::signal(SIGPIPE, SIG_IGN);
  const CapturedRun run = run_capture(shell("echo ignored-the-input"), std::string(4 << 20, 'x'));
  ::signal(SIGPIPE, saved);
  CHECK(run.status.success());
  CHECK(run.out == "ignored-the-input\n");
}

TEST_CASE("a cancellable run_capture is stopped by SIGTERM, also while its pipes are quiet") {
  // The cancel flag cannot be taken back, so this runs in a child of ours.
  const pid_t tester = ::fork();
  REQUIRE(tester >= 0);
  if (tester == 0) {
    mullet::util::install_cancel_handlers();
    // Before the run: nothing but its tick can notice, since the program
    // writes nothing and does not end; without the tick, the deadline would.
    ::raise(SIGTERM);
    int outcome = 1;
    try {
      run_capture(shell("exec sleep 1000"), {}, {30, true});
    } catch (const Error& error) {
      if (std::string(error.what()) == "/bin/sh was stopped: git-mullet was interrupted (SIGINT or SIGTERM)") {
        outcome = 0;
      }
    }
    ::_exit(outcome);
  }
  int status = 0;
  REQUIRE(::waitpid(tester, &status, 0) == tester);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a child that leaves the process group holding the pipes does not outlast the deadline") {
  const mullet::util::TempDir dir("/tmp", "mullet-unit-escape-");
  const std::string pid_file = dir.path() + "/pid";
  // The escapee is in a session of its own with our pipes as its stdout and
  // stderr; the child itself exits at once.
  const std::string error =
      error_of(shell("setsid sh -c 'echo $$ >" + pid_file + "; exec sleep 60' & exit 0"), {1, false});
  CHECK(error == "/bin/sh timed out after 1 s");
  const pid_t escapee = static_cast<pid_t>(std::atoi(mullet::util::read_file(pid_file).c_str()));
  REQUIRE(escapee > 0);
  const mullet::UniqueFd escapee_fd = mullet::test::open_pidfd(escapee);
  REQUIRE(escapee_fd);
  // Out of our reach (the group kill did not touch it), and not waited for.
  CHECK_FALSE(mullet::test::has_ended(escapee_fd));
  ::kill(escapee, SIGKILL);
  CHECK(mullet::test::ends(escapee_fd));
}

TEST_CASE("an exception between spawn and wait leaves nothing running, down to the child's process group") {
  SpawnOptions options = shell("sleep 1000 & echo $!; exec sleep 1000");
  options.new_session = true;
  mullet::Pipe out = mullet::make_pipe();
  options.stdout_fd = out.write_end.get();
  pid_t child_pid = -1;
  mullet::UniqueFd child_fd;
  mullet::UniqueFd grandchild_fd;
  CHECK_THROWS_WITH(
      [&] {
        mullet::util::Child child = mullet::util::spawn(options);
        out.write_end.reset();
        child_pid = child.pid();
        std::string line;
        char byte = 0;
        while (::read(out.read_end.get(), &byte, 1) == 1 && byte != '\n') line += byte;
        child_fd = mullet::test::open_pidfd(child_pid);
        grandchild_fd = mullet::test::open_pidfd(static_cast<pid_t>(std::atoi(line.c_str())));
        REQUIRE(child_fd);
        REQUIRE(grandchild_fd);
        CHECK_FALSE(mullet::test::has_ended(child_fd));
        CHECK_FALSE(mullet::test::has_ended(grandchild_fd));
        throw std::runtime_error("thrown between spawn and wait");
      }(),
      "thrown between spawn and wait");
  // The child was killed and reaped before the exception left its scope.
  int status = 0;
  CHECK(::waitpid(child_pid, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  CHECK(mullet::test::has_ended(child_fd));
  // Its group was killed with it; the grandchild ends a moment later.
  CHECK(mullet::test::ends(grandchild_fd));
}
