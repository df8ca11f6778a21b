#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sandbox/bwrap.hpp"
#include "sandbox/plan.hpp"

using mullet::sandbox::BindSource;
using mullet::sandbox::bwrap_arguments;
using mullet::sandbox::Mount;
using mullet::sandbox::MountKind;
using mullet::sandbox::Plan;
using mullet::sandbox::wall_check_arguments;
using Strings = std::vector<std::string>;

namespace {

// A plan with one mount of every kind, and sources aligned with its mounts.
struct Fixture {
  Plan plan;
  std::vector<BindSource> sources;
};

Fixture sample() {
  Fixture f;
  f.plan.phase = "worker";
  f.plan.command = {"sh", "-c", "make fix && echo done"};
  f.plan.cwd = "/mullet/work";
  f.plan.mounts = {
      {MountKind::read_only_bind, "/usr", "/usr"},                               // 0: fd 11
      {MountKind::symlink, "usr/bin", "/bin"},                                   // 1
      {MountKind::proc, "", "/proc"},                                            // 2
      {MountKind::dev, "", "/dev"},                                              // 3
      {MountKind::tmpfs, "", "/home", 16ULL << 20U},                             // 4
      {MountKind::tmpfs, "", "/tmp", 512ULL << 20U},                             // 5
      {MountKind::directory, "", "/tmp/mullet-1a2b"},                            // 6
      {MountKind::writable_bind, "/srv/job/work", "/mullet/work"},               // 7: fd 12
      {MountKind::read_only_bind, "/srv/job/git", "/mullet/git"},                // 8: staged
      {MountKind::writable_bind, "/srv/job/home", "/mullet/home"},               // 9: staged
      {MountKind::read_only_bind, "/opt/git-mullet", "/mullet/bin/git-mullet"},  // 10: fd 13
      {MountKind::mask, "/srv/job/empty", "/usr/agent.sock"},                    // 11: fd 14
      {MountKind::sealed, "", "/sealed"},                                        // 12
  };
  f.plan.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/mullet/home"}, {"TMPDIR", "/tmp/mullet-1a2b"}};
  f.plan.must_be_empty = {"/home", "/run"};
  f.sources.resize(f.plan.mounts.size());
  f.sources[0].fd = 11;
  f.sources[7].fd = 12;
  f.sources[8].staged_path = "/run/mullet/stage/git";
  f.sources[9].staged_path = "/run/mullet/stage/home";
  f.sources[10].fd = 13;
  f.sources[10].is_directory = false;
  f.sources[11].fd = 14;
  f.sources[11].is_directory = false;
  return f;
}

std::ptrdiff_t find_sequence(const Strings& args, const Strings& sequence) {
  const auto it = std::search(args.begin(), args.end(), sequence.begin(), sequence.end());
  return it == args.end() ? -1 : it - args.begin();
}

bool has_sequence(const Strings& args, const Strings& sequence) {
  return find_sequence(args, sequence) >= 0;
}

std::size_t count(const Strings& args, const std::string& word) {
  return static_cast<std::size_t>(std::count(args.begin(), args.end(), word));
}

}  // namespace

TEST_CASE("bwrap_arguments unshares every namespace strictly") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  INFO(args.size());
  for (const char* option : {"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                             "--unshare-cgroup", "--die-with-parent", "--new-session"}) {
    INFO(option);
    CHECK(count(args, option) == 1);
  }
  CHECK(has_sequence(args, {"--cap-drop", "ALL"}));
  CHECK(has_sequence(args, {"--hostname", "mullet"}));
  // --unshare-all only tries the user namespace; --share-net would undo --unshare-net.
  for (const char* absent : {"--unshare-all", "--unshare-user-try", "--unshare-cgroup-try", "--share-net", "--cap-add",
                             "--bind-try", "--dev-bind", "--dev-bind-try"}) {
    INFO(absent);
    CHECK(count(args, absent) == 0);
  }
}

TEST_CASE("binds go through descriptors, or staged paths when staged") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  CHECK(has_sequence(args, {"--ro-bind-fd", "11", "/usr"}));
  CHECK(has_sequence(args, {"--bind-fd", "12", "/mullet/work"}));
  CHECK(has_sequence(args, {"--ro-bind", "/run/mullet/stage/git", "/mullet/git"}));
  CHECK(has_sequence(args, {"--bind", "/run/mullet/stage/home", "/mullet/home"}));
  CHECK(has_sequence(args, {"--ro-bind-fd", "13", "/mullet/bin/git-mullet"}));
  // A host path is never handed to bwrap for a bind: it could be swapped for a symlink.
  for (const char* host_path : {"/srv/job/work", "/srv/job/git", "/srv/job/home", "/opt/git-mullet"}) {
    INFO(host_path);
    CHECK(count(args, host_path) == 0);
  }
  CHECK(count(args, "--ro-bind-fd") == 3);
  CHECK(count(args, "--bind-fd") == 1);
}

TEST_CASE("the other mount kinds") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  CHECK(has_sequence(args, {"--symlink", "usr/bin", "/bin"}));
  CHECK(has_sequence(args, {"--proc", "/proc"}));
  CHECK(has_sequence(args, {"--dev", "/dev"}));
  CHECK(has_sequence(args, {"--size", std::to_string(16ULL << 20U), "--tmpfs", "/home"}));
  CHECK(has_sequence(args, {"--size", std::to_string(512ULL << 20U), "--perms", "1777", "--tmpfs", "/tmp"}));
  CHECK(has_sequence(args, {"--perms", "0700", "--dir", "/tmp/mullet-1a2b"}));
  CHECK(has_sequence(args, {"--ro-bind-fd", "14", "/usr/agent.sock"}));
  CHECK(count(args, "--tmpfs") == 2);

  SUBCASE("a tmpfs without a size gets no --size") {
    Fixture g = sample();
    g.plan.mounts = {{MountKind::tmpfs, "", "/scratch"}};
    g.sources.resize(1);
    const Strings plain = bwrap_arguments(g.plan, g.sources, 7, 9);
    CHECK(count(plain, "--size") == 0);
    CHECK(has_sequence(plain, {"--tmpfs", "/scratch"}));
  }
}

TEST_CASE("mounts keep the plan's order and the root is remounted read-only after them") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  const auto usr = find_sequence(args, {"--ro-bind-fd", "11", "/usr"});
  const auto tmp = find_sequence(args, {"--tmpfs", "/tmp"});
  const auto dir = find_sequence(args, {"--dir", "/tmp/mullet-1a2b"});
  const auto work = find_sequence(args, {"--bind-fd", "12", "/mullet/work"});
  const auto mask = find_sequence(args, {"--ro-bind-fd", "14", "/usr/agent.sock"});
  const auto remount = find_sequence(args, {"--remount-ro", "/"});
  REQUIRE(usr >= 0);
  REQUIRE(remount >= 0);
  CHECK(usr < tmp);
  CHECK(tmp < dir);
  CHECK(dir < work);
  CHECK(work < mask);
  CHECK(mask < remount);
  // /dev is bwrap's own tmpfs, writable unless remounted: no memory to fill.
  const auto dev = find_sequence(args, {"--remount-ro", "/dev"});
  REQUIRE(dev >= 0);
  CHECK(mask < dev);
  CHECK(count(args, "--remount-ro") == 2);
}

TEST_CASE("environment values never appear on bwrap's command line") {
  // argv is world-readable through /proc/<pid>/cmdline; values (API keys the
  // user lets in) travel in bwrap's own environment instead.
  auto f = sample();
  f.plan.env["ANTHROPIC_API_KEY"] = "sk-secret-value";
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  CHECK(count(args, "--setenv") == 0);
  CHECK(count(args, "--clearenv") == 0);
  for (const auto& word : args) CHECK(word.find("sk-secret-value") == std::string::npos);
}

TEST_CASE("the command runs behind the wall check") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 9, 11);
  const Strings expected_tail = {"--seccomp",
                                 "11",
                                 "--chdir",
                                 "/mullet/work",
                                 "--",
                                 "/mullet/bin/git-mullet",
                                 "__wall-check",
                                 "--report-fd",
                                 "9",
                                 "--empty",
                                 "/home",
                                 "--empty",
                                 "/run",
                                 "--env",
                                 "HOME",
                                 "--env",
                                 "PATH",
                                 "--env",
                                 "TMPDIR",
                                 "--",
                                 "sh",
                                 "-c",
                                 "make fix && echo done"};
  REQUIRE(args.size() > expected_tail.size());
  const Strings tail(args.end() - static_cast<std::ptrdiff_t>(expected_tail.size()), args.end());
  CHECK(tail == expected_tail);
  // The first "--" ends bwrap's options: nothing of the plan's command comes before it.
  const auto first_separator = find_sequence(args, {"--"});
  CHECK(first_separator == static_cast<std::ptrdiff_t>(args.size() - expected_tail.size() + 4));
}

TEST_CASE("bwrap_arguments makes a sealed directory execute-only, before the root turns read-only") {
  const auto f = sample();
  const Strings args = bwrap_arguments(f.plan, f.sources, 7, 9);
  const auto sealed = find_sequence(args, {"--perms", "0111", "--dir", "/sealed"});
  CHECK(sealed >= 0);
  CHECK(sealed < find_sequence(args, {"--remount-ro", "/"}));
}

TEST_CASE("wall_check_arguments lists the report fd, empty and sealed dirs, env names, then the command") {
  Plan plan;
  plan.command = {"claude", "-p", "--", "literal --env"};
  plan.must_be_empty = {"/home"};
  plan.must_be_sealed = {"/mullet"};
  plan.env = {{"B", "2"}, {"A", "1"}};
  CHECK(wall_check_arguments(plan, 5) == Strings{"__wall-check", "--report-fd", "5", "--empty", "/home", "--sealed",
                                                 "/mullet", "--env", "A", "--env", "B", "--", "claude", "-p", "--",
                                                 "literal --env"});
  // No values of the environment are passed on the command line.
  plan.env = {{"TOKEN", "sk-secret"}};
  const Strings args = wall_check_arguments(plan, 5);
  CHECK(count(args, "sk-secret") == 0);
}

TEST_CASE("bwrap_arguments needs a source for every bind") {
  auto f = sample();
  f.sources.resize(3);  // shorter than the mounts: the /mullet/work bind has none
  CHECK_THROWS_AS(bwrap_arguments(f.plan, f.sources, 7, 9), std::out_of_range);
}

TEST_CASE("wall_check_arguments asks for one bridge per socket: the egress proxy's and the API's") {
  namespace inside = mullet::sandbox::inside;
  Plan plan;
  plan.command = {"true"};
  const std::string proxy_bridge = std::to_string(inside::proxy_port) + ":" + inside::proxy_socket;
  const std::string api_bridge = std::to_string(inside::api_port) + ":" + inside::api_socket;
  CHECK(count(wall_check_arguments(plan, 5), "--bridge") == 0);
  plan.network.api_socket = "/tmp/mullet-proxy-1/api.sock";
  Strings args = wall_check_arguments(plan, 5);
  CHECK(count(args, "--bridge") == 1);
  CHECK(has_sequence(args, {"--bridge", api_bridge}));
  plan.network.grants = {"example.com:443"};
  plan.network.proxy_socket = "/tmp/mullet-proxy-1/proxy.sock";
  args = wall_check_arguments(plan, 5);
  CHECK(count(args, "--bridge") == 2);
  CHECK(has_sequence(args, {"--bridge", proxy_bridge, "--bridge", api_bridge}));
}

TEST_CASE("wall_check_arguments asks for the controlling terminal only for a plan with one, before the command") {
  Plan plan;
  plan.command = {"bash", "--terminal"};
  CHECK(count(wall_check_arguments(plan, 5), "--terminal") == 1);  // the command's own word only
  plan.controlling_terminal = true;
  const Strings args = wall_check_arguments(plan, 5);
  CHECK(count(args, "--terminal") == 2);
  CHECK(has_sequence(args, {"__wall-check", "--report-fd", "5", "--terminal"}));
  CHECK(has_sequence(args, {"--", "bash", "--terminal"}));
}
