#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/plan.hpp"
#include "sandbox/policy.hpp"

using mullet::sandbox::build_plan;
using mullet::sandbox::Mount;
using mullet::sandbox::MountKind;
using mullet::sandbox::passthrough_env_names;
using mullet::sandbox::Plan;
using mullet::sandbox::PolicyInputs;
using mullet::sandbox::RootEntry;
using mullet::sandbox::socket_paths_from_env;
using mullet::sandbox::system_directories;
using Strings = std::vector<std::string>;
namespace inside = mullet::sandbox::inside;

namespace {

constexpr std::uint64_t mib = 1024ULL * 1024ULL;

PolicyInputs representative_inputs() {
  PolicyInputs in;
  in.phase = "worker";
  in.work_tree = "/home/alice/src/proj/.git/mullet/jobs/0123abcdef/work";
  in.clone_git_dir = "/home/alice/src/proj/.git/mullet/jobs/0123abcdef/git";
  in.objects_dir = "/home/alice/src/proj/.git/objects";
  in.home_dir = "/home/alice/src/proj/.git/mullet/jobs/0123abcdef/home";
  in.helper_binary = "/usr/local/bin/git-mullet";
  in.empty_file = "/srv/jobs/abc/empty";
  in.tmp_name = "mullet-1a2b";
  in.root_entries = {{"usr", false, ""},        {"bin", true, "usr/bin"}, {"lib", true, "usr/lib"},
                     {"lib64", false, ""},      {"etc", false, ""},       {"opt", false, ""},
                     {"home", false, ""},       {"root", false, ""},      {"var", false, ""},
                     {"tmp", false, ""},        {"boot", false, ""},      {"snap", true, "/var/lib/snapd/snap"},
                     {"sbin", true, "usr/sbin"}};
  in.host_env = {{"HOME", "/home/alice"},
                 {"USER", "alice"},
                 {"PATH", "/home/alice/bin:/usr/bin"},
                 {"LANG", "en_GB.UTF-8"},
                 {"TERM", "xterm-256color"},
                 {"TZ", "Europe/London"},
                 {"AWS_SECRET_ACCESS_KEY", "hunter2"},
                 {"GITHUB_TOKEN", "ghp_secret"},
                 {"ANTHROPIC_API_KEY", "sk-secret"},
                 {"LD_PRELOAD", "/home/alice/evil.so"},
                 {"GOFLAGS", "-mod=vendor"},
                 {"SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.123"}};
  in.extra_env_names = {"GOFLAGS", "CARGO_HOME"};
  in.executor_env = {{"MULLET_PROMPT", "do the thing"}, {"LANG", "C.UTF-8"}};
  in.executor_mounts = {{MountKind::read_only_bind, "/opt/claude/bin/claude", "/mullet/bin/claude"}};
  in.command = {"sh", "-c", "make fix"};
  in.limits = {3600, 1800, 8192, 1024, 10240, {}, {}};
  in.network.grants = {"api.example.com:443"};
  in.feeds_stdin = true;
  return in;
}

std::vector<Mount> mounts_at(const Plan& plan, const std::string& destination) {
  std::vector<Mount> found;
  for (const auto& mount : plan.mounts) {
    if (mount.destination == destination) found.push_back(mount);
  }
  return found;
}

// The one mount at `destination`; fails the test when there is not exactly one.
Mount mount_at(const Plan& plan, const std::string& destination) {
  const auto found = mounts_at(plan, destination);
  INFO("destination: " << destination);
  REQUIRE(found.size() == 1);
  return found.front();
}

std::ptrdiff_t index_of(const Plan& plan, const std::string& destination) {
  const auto it = std::find_if(plan.mounts.begin(), plan.mounts.end(),
                               [&](const Mount& mount) { return mount.destination == destination; });
  return it == plan.mounts.end() ? -1 : it - plan.mounts.begin();
}

bool has(const Strings& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

TEST_CASE("the system directory and pass-through lists") {
  CHECK(system_directories() == Strings{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"});
  const auto& names = passthrough_env_names();
  CHECK(has(names, "LANG"));
  CHECK(has(names, "TERM"));
  CHECK(has(names, "TZ"));
  for (const char* secret : {"HOME", "PATH", "USER", "SSH_AUTH_SOCK", "LD_PRELOAD", "AWS_SECRET_ACCESS_KEY"}) {
    CHECK_FALSE(has(names, secret));
  }
}

TEST_CASE("build_plan copies the phase, command, limits and network") {
  const auto in = representative_inputs();
  const Plan plan = build_plan(in);
  CHECK(plan.phase == "worker");
  CHECK(plan.command == Strings{"sh", "-c", "make fix"});
  CHECK(plan.cwd == "/mullet/work");
  CHECK(plan.limits.wall_seconds == 3600);
  CHECK(plan.limits.inactivity_seconds == 1800);
  CHECK(plan.limits.memory_mb == 8192);
  CHECK(plan.limits.processes == 1024);
  CHECK(plan.limits.disk_mb == 10240);
  CHECK(plan.network.grants == Strings{"api.example.com:443"});
  CHECK(plan.feeds_stdin);
  CHECK_FALSE(plan.host_uid.has_value());
  CHECK_FALSE(plan.host_gid.has_value());

  auto as_root = in;
  as_root.host_uid = 65534;
  as_root.host_gid = 65533;
  const Plan root_plan = build_plan(as_root);
  REQUIRE(root_plan.host_uid.has_value());
  CHECK(*root_plan.host_uid == 65534U);
  REQUIRE(root_plan.host_gid.has_value());
  CHECK(*root_plan.host_gid == 65533U);
}

TEST_CASE("system directories are bound read-only; symlinked ones become symlinks") {
  const Plan plan = build_plan(representative_inputs());
  for (const char* dir : {"/usr", "/lib64", "/etc", "/opt"}) {
    const Mount mount = mount_at(plan, dir);
    CHECK(mount.kind == MountKind::read_only_bind);
    CHECK(mount.source == dir);
  }
  CHECK(mount_at(plan, "/bin") == Mount{MountKind::symlink, "usr/bin", "/bin"});
  CHECK(mount_at(plan, "/lib") == Mount{MountKind::symlink, "usr/lib", "/lib"});
  CHECK(mount_at(plan, "/sbin") == Mount{MountKind::symlink, "usr/sbin", "/sbin"});
  // Nothing outside the system list is bound from the host root.
  for (const char* hidden : {"/boot", "/snap", "/var", "/lib32"}) {
    INFO(hidden);
    CHECK(mounts_at(plan, hidden).empty());
  }
  // No host path is bound writable except the job's own directories.
  for (const auto& mount : plan.mounts) {
    if (mount.kind != MountKind::writable_bind) continue;
    INFO(mount.source);
    CHECK((mount.destination == "/mullet/work" || mount.destination == "/mullet/home"));
  }
  CHECK(mount_at(plan, "/proc").kind == MountKind::proc);
  CHECK(mount_at(plan, "/dev").kind == MountKind::dev);
}

TEST_CASE("places that can hold other users' data are empty tmpfs and checked empty") {
  const Plan plan = build_plan(representative_inputs());
  for (const char* hidden : {"/home", "/root", "/run", "/var/tmp", "/dev/shm", "/mnt", "/media", "/srv"}) {
    INFO(hidden);
    const Mount mount = mount_at(plan, hidden);
    CHECK(mount.kind == MountKind::tmpfs);
    CHECK(mount.source.empty());
    CHECK(mount.size_bytes == 16 * mib);
    CHECK(has(plan.must_be_empty, hidden));
  }
  CHECK(plan.must_be_empty.size() == 8);
  // /dev/shm must come after /dev, or the minimal /dev would hide it.
  CHECK(index_of(plan, "/dev/shm") > index_of(plan, "/dev"));
  CHECK(mount_at(plan, "/var/run") == Mount{MountKind::symlink, "../run", "/var/run"});
}

TEST_CASE("/tmp is a private tmpfs holding the job's TMPDIR") {
  auto in = representative_inputs();
  const Plan plan = build_plan(in);
  const Mount tmp = mount_at(plan, "/tmp");
  CHECK(tmp.kind == MountKind::tmpfs);
  CHECK(tmp.size_bytes == 2048 * mib);  // a quarter of 8192 MiB
  const Mount dir = mount_at(plan, "/tmp/mullet-1a2b");
  CHECK(dir.kind == MountKind::directory);
  CHECK(index_of(plan, "/tmp/mullet-1a2b") > index_of(plan, "/tmp"));
  CHECK(plan.env.at("TMPDIR") == "/tmp/mullet-1a2b");
  // Unix socket paths are short (108 bytes): keep TMPDIR itself short.
  CHECK(plan.env.at("TMPDIR").size() < 20);

  SUBCASE("the /tmp size follows the memory limit within 64 MiB .. 2 GiB") {
    in.limits.memory_mb = 1024;
    CHECK(mount_at(build_plan(in), "/tmp").size_bytes == 256 * mib);
    in.limits.memory_mb = 100;
    CHECK(mount_at(build_plan(in), "/tmp").size_bytes == 64 * mib);
    in.limits.memory_mb = 1 << 20;
    CHECK(mount_at(build_plan(in), "/tmp").size_bytes == 2048 * mib);
  }
}

TEST_CASE("the job's directories appear at fixed paths inside") {
  const auto in = representative_inputs();
  const Plan plan = build_plan(in);
  CHECK(mount_at(plan, "/mullet/work") == Mount{MountKind::writable_bind, in.work_tree, "/mullet/work"});
  CHECK(mount_at(plan, "/mullet/git") == Mount{MountKind::read_only_bind, in.clone_git_dir, "/mullet/git"});
  CHECK(mount_at(plan, "/mullet/objects") == Mount{MountKind::read_only_bind, in.objects_dir, "/mullet/objects"});
  CHECK(mount_at(plan, "/mullet/home") == Mount{MountKind::writable_bind, in.home_dir, "/mullet/home"});
  CHECK(mount_at(plan, "/mullet/bin/git-mullet") ==
        Mount{MountKind::read_only_bind, in.helper_binary, "/mullet/bin/git-mullet"});
  CHECK(mount_at(plan, "/mullet/bin/claude") ==
        Mount{MountKind::read_only_bind, "/opt/claude/bin/claude", "/mullet/bin/claude"});
  // The job's directories are mounted after the tmpfs that would hide them
  // (the host work tree lives under /home).
  CHECK(index_of(plan, "/mullet/work") > index_of(plan, "/home"));
  // Nothing reveals the user's name inside.
  for (const auto& mount : plan.mounts) CHECK(mount.destination.find("alice") == std::string::npos);
}

TEST_CASE("/mullet is sealed before anything is bound below it, and the wall check proves it") {
  const Plan plan = build_plan(representative_inputs());
  CHECK(mount_at(plan, "/mullet") == Mount{MountKind::sealed, "", "/mullet"});
  CHECK(mounts_at(plan, "/mullet").size() == 1);
  CHECK(plan.must_be_sealed == Strings{"/mullet"});
  // Every path of the job's is below it (the home among them), and made after it.
  for (const auto& mount : plan.mounts) {
    if (mount.destination.rfind("/mullet/", 0) != 0) continue;
    INFO(mount.destination);
    CHECK(index_of(plan, mount.destination) > index_of(plan, "/mullet"));
  }
  CHECK(std::string(mullet::sandbox::inside::home).rfind("/mullet/", 0) == 0);
}

TEST_CASE("the environment is built from an allowlist, never copied") {
  const Plan plan = build_plan(representative_inputs());
  CHECK(plan.env.at("PATH") == inside::path);
  CHECK(plan.env.at("PATH") == "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
  CHECK(plan.env.at("HOME") == "/mullet/home");
  CHECK(plan.env.at("PWD") == "/mullet/work");
  CHECK(plan.env.at("USER") == "mullet");
  CHECK(plan.env.at("LOGNAME") == "mullet");
  CHECK(plan.env.at("GIT_ALTERNATE_OBJECT_DIRECTORIES") == "/mullet/objects");
  CHECK(plan.env.at("TERM") == "xterm-256color");
  CHECK(plan.env.at("TZ") == "Europe/London");
  // The user's extra names pass only when set on the host.
  CHECK(plan.env.at("GOFLAGS") == "-mod=vendor");
  CHECK(plan.env.count("CARGO_HOME") == 0);
  // The executor's own variables win over anything copied.
  CHECK(plan.env.at("LANG") == "C.UTF-8");
  CHECK(plan.env.at("MULLET_PROMPT") == "do the thing");
  for (const char* secret : {"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "LD_PRELOAD",
                             "SSH_AUTH_SOCK", "LC_ALL", "COLORTERM"}) {
    INFO(secret);
    CHECK(plan.env.count(secret) == 0);
  }
  // Exactly these names, nothing else.
  Strings names;
  for (const auto& [name, value] : plan.env) names.push_back(name);
  CHECK(names == Strings{"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GOFLAGS", "HOME", "LANG", "LOGNAME", "MULLET_PROMPT",
                         "PATH", "PWD", "TERM", "TMPDIR", "TZ", "USER"});
  // No value leaks the host user's home.
  for (const auto& [name, value] : plan.env) CHECK(value.find("/home/alice") == std::string::npos);
}

TEST_CASE("LANG is passed from the host when the executor does not set it") {
  auto in = representative_inputs();
  in.executor_env.erase("LANG");
  CHECK(build_plan(in).env.at("LANG") == "en_GB.UTF-8");
  in.host_env.erase("LANG");
  CHECK(build_plan(in).env.count("LANG") == 0);
}

TEST_CASE("socket_paths_from_env finds sockets named by the environment") {
  CHECK(socket_paths_from_env({}).empty());
  CHECK(socket_paths_from_env({{"SSH_AUTH_SOCK", "/tmp/ssh-abc/agent.1"}}) == Strings{"/tmp/ssh-abc/agent.1"});
  CHECK(socket_paths_from_env({{"DOCKER_HOST", "unix:///x"}}) == Strings{"/x"});
  CHECK(socket_paths_from_env({{"DOCKER_HOST", "unix:///var/run/docker.sock"}}) == Strings{"/var/run/docker.sock"});
  CHECK(socket_paths_from_env({{"DBUS_SESSION_BUS_ADDRESS", "unix:path=/x,guid=0123456789abcdef"}}) == Strings{"/x"});
  CHECK(socket_paths_from_env({{"DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus;unix:abstract=/tmp/y"}}) ==
        Strings{"/run/user/1000/bus"});
  CHECK(socket_paths_from_env({{"GPG_AGENT_INFO", "/run/user/1000/gnupg/S.gpg-agent:0:1"}}) ==
        Strings{"/run/user/1000/gnupg/S.gpg-agent"});
  CHECK(socket_paths_from_env({{"CONTAINER_HOST", "unix:///run/podman/podman.sock"}}) ==
        Strings{"/run/podman/podman.sock"});
  CHECK(socket_paths_from_env({{"XDG_RUNTIME_DIR", "/run/user/1000"}}) == Strings{"/run/user/1000"});
  // Not paths: TCP addresses, relative names, empty values; and names not on the list.
  CHECK(socket_paths_from_env({{"DOCKER_HOST", "tcp://127.0.0.1:2375"}}).empty());
  CHECK(socket_paths_from_env({{"WAYLAND_DISPLAY", "wayland-0"}}).empty());
  CHECK(socket_paths_from_env({{"SSH_AUTH_SOCK", ""}}).empty());
  CHECK(socket_paths_from_env({{"MY_SOCKET", "/x"}}).empty());

  const auto all = socket_paths_from_env({{"SSH_AUTH_SOCK", "/a"}, {"DOCKER_HOST", "unix:///b"}, {"HOME", "/c"}});
  CHECK(all.size() == 2);
  CHECK(has(all, "/a"));
  CHECK(has(all, "/b"));
}

TEST_CASE("sockets that would be visible through a bind are masked") {
  auto in = representative_inputs();
  in.host_env["SSH_AUTH_SOCK"] = "/etc/agent/ssh.sock";
  in.host_env["DOCKER_HOST"] = "unix:///usr/local/docker.sock";
  in.host_env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/run/user/1000/bus,guid=ff";  // under a tmpfs
  in.host_env["XDG_RUNTIME_DIR"] = "/usrx/run";                                      // not under /usr
  const Plan plan = build_plan(in);
  CHECK(mount_at(plan, "/etc/agent/ssh.sock") == Mount{MountKind::mask, in.empty_file, "/etc/agent/ssh.sock"});
  CHECK(mount_at(plan, "/usr/local/docker.sock") == Mount{MountKind::mask, in.empty_file, "/usr/local/docker.sock"});
  CHECK(mounts_at(plan, "/run/user/1000/bus").empty());
  CHECK(mounts_at(plan, "/usrx/run").empty());
  // A mask comes after the bind it punches through.
  CHECK(index_of(plan, "/etc/agent/ssh.sock") > index_of(plan, "/etc"));
  CHECK(index_of(plan, "/usr/local/docker.sock") > index_of(plan, "/usr"));

  std::size_t masks = 0;
  for (const auto& mount : plan.mounts) masks += mount.kind == MountKind::mask ? 1 : 0;
  CHECK(masks == 2);

  SUBCASE("a socket in /tmp needs no mask: /tmp is a fresh tmpfs") {
    CHECK(mounts_at(build_plan(representative_inputs()), "/tmp/ssh-XXXX/agent.123").empty());
  }
}

TEST_CASE("the credential endpoint's socket is bound in only when the phase has one") {
  auto in = representative_inputs();
  in.network.proxy_socket = "/tmp/mullet-proxy-1/proxy.sock";
  const auto has_api_bind = [](const Plan& plan) {
    return std::any_of(plan.mounts.begin(), plan.mounts.end(), [](const Mount& mount) {
      return mount.kind == MountKind::read_only_bind && mount.destination == inside::api_socket;
    });
  };
  const Plan without = build_plan(in);
  CHECK_FALSE(has_api_bind(without));
  CHECK(without.network.api_socket.empty());
  // Without an API, loopback goes through the proxy like any destination.
  CHECK(without.env.count("NO_PROXY") == 0);

  in.network.api_socket = "/tmp/mullet-proxy-1/api.sock";
  in.network.api_upstream = "https://api.anthropic.com";
  const Plan with = build_plan(in);
  CHECK(has_api_bind(with));
  // With grants too, loopback (where the API bridge listens) bypasses the proxy.
  CHECK(with.env.at("NO_PROXY") == "127.0.0.1,localhost");
  CHECK(with.env.at("no_proxy") == "127.0.0.1,localhost");
  CHECK(with.network.api_upstream == "https://api.anthropic.com");

  in.network.grants.clear();
  in.network.proxy_socket.clear();
  const Plan api_only = build_plan(in);
  CHECK(has_api_bind(api_only));
  CHECK(api_only.env.count("HTTPS_PROXY") == 0);
  CHECK(api_only.env.count("NO_PROXY") == 0);
}

TEST_CASE("an overlaid work tree is in the plan as data, and printed; no layer is bound") {
  PolicyInputs in = representative_inputs();
  const std::string job = "/home/alice/src/proj/.git/mullet/jobs/0123abcdef";
  const mullet::sandbox::Overlay overlay{"/home/alice/src/proj/.git/mullet/pristine/0123-1000/tree", job + "/upper",
                                         job + "/overlay-work"};
  in.work_tree_overlay = overlay;
  Plan plan = mullet::sandbox::build_plan(in);
  REQUIRE(plan.work_tree_overlay.has_value());
  CHECK(*plan.work_tree_overlay == overlay);
  // The worker still gets one writable tree at /mullet/work: the overlay's
  // mount point, bound as the work tree always is.
  CHECK(mount_at(plan, inside::work_tree).kind == MountKind::writable_bind);
  CHECK(mount_at(plan, inside::work_tree).source == in.work_tree);
  for (const auto& mount : plan.mounts) {
    INFO(mount.source);
    CHECK(mount.source.find("/pristine/") == std::string::npos);
    CHECK(mount.source.find("/upper") == std::string::npos);
    CHECK(mount.source.find("/overlay-work") == std::string::npos);
  }
  plan.work_tree_note = "an overlay of the base's pristine checkout";
  const std::string text = mullet::sandbox::describe(plan);
  CHECK(text.find("work tree:   an overlay of the base's pristine checkout") != std::string::npos);
  CHECK(text.find("lower " + overlay.lower) != std::string::npos);
  CHECK(mullet::sandbox::to_json(plan)["work_tree_overlay"]["upper"] == overlay.upper);
}
