#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "process_helpers.hpp"
#include "sandbox/host.hpp"
#include "sandbox/policy.hpp"
#include "sandbox/runner.hpp"
#include "util/fs.hpp"

namespace {

// Stands in for our wall check (`__wall-check --report-fd N ... -- command`):
// reports ok and runs the command. What the walls hold is for the security
// suites; here only the runner's handling of the processes matters.
constexpr const char* fake_wall_check = R"(#!/bin/sh
while [ "$1" != "--report-fd" ]; do shift; done
report=$2
while [ "$1" != "--" ]; do shift; done
shift
echo ok >/proc/self/fd/$report
exec "$@"
)";

// A plan for `command` from the policy, over scratch directories under `dir`,
// with the fake wall check as the helper.
mullet::sandbox::Plan plan_in(const std::string& dir, const std::vector<std::string>& command) {
  mullet::sandbox::PolicyInputs in;
  in.phase = "unit";
  for (const char* name : {"work", "git", "objects", "home"}) mullet::util::make_dirs(dir + "/" + name, 0700);
  in.work_tree = dir + "/work";
  in.clone_git_dir = dir + "/git";
  in.objects_dir = dir + "/objects";
  in.home_dir = dir + "/home";
  in.helper_binary = dir + "/wall-check";
  mullet::util::write_file(in.helper_binary, fake_wall_check, 0755);
  in.empty_file = dir + "/empty";
  mullet::util::write_file(in.empty_file, "", 0444);
  in.tmp_name = "mullet-unit";
  in.root_entries = mullet::sandbox::scan_host_root();
  in.command = command;
  return mullet::sandbox::build_plan(in);
}

struct Descendant {
  pid_t pid;
  pid_t parent;
};

// Every process below ours, from /proc.
std::vector<Descendant> our_descendants() {
  std::map<pid_t, pid_t> parents;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid <= 0) continue;
    const auto stat = mullet::util::read_proc_file(entry.path().string() + "/stat");
    if (!stat) continue;
    const auto close = stat->rfind(')');
    if (close == std::string::npos) continue;
    // After ") <state> ": the parent.
    parents[pid] = static_cast<pid_t>(std::atoi(stat->c_str() + close + 4));
  }
  std::vector<Descendant> found;
  std::vector<pid_t> frontier = {::getpid()};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, its_parent] : parents) {
      if (its_parent == parent) {
        found.push_back({pid, parent});
        frontier.push_back(pid);
      }
    }
  }
  return found;
}

}  // namespace

TEST_CASE("runner: an exception while the sandbox runs leaves none of its processes running") {
  const mullet::util::TempDir dir("/tmp", "mullet-unit-runner-");
  const mullet::sandbox::Plan plan = plan_in(dir.path(), {"/bin/sh", "-c", "echo ready; exec sleep 1000"});
  std::vector<pid_t> before;
  for (const auto& process : our_descendants()) before.push_back(process.pid);
  pid_t bwrap = -1;
  std::vector<mullet::UniqueFd> pidfds;
  std::string output;
  mullet::sandbox::RunIo io;
  io.on_output = [&](std::string_view chunk) {
    output.append(chunk);
    if (output.find("ready\n") == std::string::npos) return;
    // bwrap, the sandbox's init and the command are all up now.
    for (const auto& process : our_descendants()) {
      if (std::find(before.begin(), before.end(), process.pid) != before.end()) continue;
      if (process.parent == ::getpid()) bwrap = process.pid;
      auto pidfd = mullet::test::open_pidfd(process.pid);
      REQUIRE(pidfd);
      CHECK_FALSE(mullet::test::has_ended(pidfd));
      pidfds.push_back(std::move(pidfd));
    }
    throw std::runtime_error("thrown while the sandbox runs");
  };
  CHECK_THROWS_WITH(mullet::sandbox::run_sandboxed(plan, io), "thrown while the sandbox runs");
  REQUIRE(output == "ready\n");
  // At least bwrap, the sandbox's pid 1 and the command.
  REQUIRE(pidfds.size() >= 3);
  REQUIRE(bwrap > 0);
  // bwrap, our child, was killed and reaped before the exception left.
  int status = 0;
  CHECK(::waitpid(bwrap, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  // Everything inside dies with it.
  for (const auto& pidfd : pidfds) CHECK(mullet::test::ends(pidfd));
}
