#include "sandbox/policy.hpp"

#include <algorithm>

namespace mullet::sandbox {
namespace {

constexpr std::uint64_t mebibyte = 1024ULL * 1024ULL;

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

const std::vector<std::string>& system_directories() {
  static const std::vector<std::string> names = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"};
  return names;
}

const std::vector<std::string>& passthrough_env_names() {
  static const std::vector<std::string> names = {"LANG",        "LANGUAGE",   "LC_ALL",     "LC_CTYPE",
                                                 "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME",
                                                 "TERM",        "COLORTERM",  "TZ"};
  return names;
}

std::vector<std::string> socket_paths_from_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> paths;
  for (const char* name : {"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST",
                           "CONTAINER_HOST", "XDG_RUNTIME_DIR", "WAYLAND_DISPLAY"}) {
    const auto found = env.find(name);
    if (found == env.end() || found->second.empty()) continue;
    std::string value = found->second;
    for (const char* scheme : {"unix://", "unix:path="}) {
      if (value.rfind(scheme, 0) == 0) value = value.substr(std::string(scheme).size());
    }
    if (const auto end = value.find_first_of(",;:"); end != std::string::npos) value.resize(end);
    if (!value.empty() && value[0] == '/') paths.push_back(value);
  }
  return paths;
}

namespace {

// Binds the objects directory and any it borrows; answers what
// GIT_ALTERNATE_OBJECT_DIRECTORIES must name inside.
std::string bind_object_dirs(const PolicyInputs& in, Plan& plan) {
  plan.mounts.push_back({MountKind::read_only_bind, in.objects_dir, inside::objects});
  // Borrowed object directories (a repository made by clone --shared): bound
  // too, and the host paths in every alternates file hidden, since git reads
  // them inside; GIT_ALTERNATE_OBJECT_DIRECTORIES names the inside paths.
  const auto has_alternates = [&](const std::string& dir) {
    return std::find(in.dirs_with_alternates.begin(), in.dirs_with_alternates.end(), dir) !=
           in.dirs_with_alternates.end();
  };
  std::string object_dirs = inside::objects;
  if (has_alternates(in.objects_dir)) {
    plan.mounts.push_back({MountKind::mask, in.empty_file, std::string(inside::objects) + "/info/alternates"});
  }
  for (std::size_t i = 0; i < in.borrowed_objects.size(); ++i) {
    const std::string destination = std::string(inside::objects) + "-" + std::to_string(i + 1);
    plan.mounts.push_back({MountKind::read_only_bind, in.borrowed_objects[i], destination});
    if (has_alternates(in.borrowed_objects[i])) {
      plan.mounts.push_back({MountKind::mask, in.empty_file, destination + "/info/alternates"});
    }
    object_dirs += ":" + destination;
  }
  return object_dirs;
}

// Sockets our environment names, wherever they live, are never reachable.
void mask_sockets_named_by_env(const PolicyInputs& in, Plan& plan) {
  for (const auto& socket : socket_paths_from_env(in.host_env)) {
    bool visible = false;
    for (const auto& mount : plan.mounts) {
      if ((mount.kind == MountKind::read_only_bind || mount.kind == MountKind::writable_bind) &&
          is_under(socket, mount.destination) && mount.source == mount.destination) {
        visible = true;
      }
    }
    if (visible) plan.mounts.push_back({MountKind::mask, in.empty_file, socket});
  }
}

}  // namespace

Plan build_plan(const PolicyInputs& in) {
  Plan plan;
  plan.phase = in.phase;
  plan.command = in.command;
  plan.cwd = inside::work_tree;
  plan.limits = in.limits;
  plan.network = in.network;
  plan.feeds_stdin = in.feeds_stdin;
  plan.syscall_filter = syscall_filter(in.nested_sandbox);
  plan.history = in.history;
  plan.work_tree_overlay = in.work_tree_overlay;
  plan.host_uid = in.host_uid;
  plan.host_gid = in.host_gid;

  // A read-only root made only of the system directories.
  for (const auto& entry : in.root_entries) {
    const auto& wanted = system_directories();
    if (std::find(wanted.begin(), wanted.end(), entry.name) == wanted.end()) continue;
    if (entry.is_symlink) {
      plan.mounts.push_back({MountKind::symlink, entry.link_target, "/" + entry.name});
    } else {
      plan.mounts.push_back({MountKind::read_only_bind, "/" + entry.name, "/" + entry.name});
    }
  }
  plan.mounts.push_back({MountKind::proc, "", "/proc"});
  plan.mounts.push_back({MountKind::dev, "", "/dev"});

  // Everything that could hold another user's or another process's data is an
  // empty private tmpfs.
  const std::uint64_t tmp_size =
      static_cast<std::uint64_t>(std::clamp<std::int64_t>(in.limits.memory_mb / 4, 64, 2048)) * mebibyte;
  for (const char* hidden : {"/home", "/root", "/run", "/var/tmp", "/dev/shm", "/mnt", "/media", "/srv"}) {
    plan.mounts.push_back({MountKind::tmpfs, "", hidden, 16 * mebibyte});
    plan.must_be_empty.emplace_back(hidden);
  }
  plan.mounts.push_back({MountKind::symlink, "../run", "/var/run"});
  plan.mounts.push_back({MountKind::tmpfs, "", "/tmp", tmp_size});
  const std::string tmpdir = "/tmp/" + in.tmp_name;
  plan.mounts.push_back({MountKind::directory, "", tmpdir});

  // Everything of the job's is under one sealed directory, made before
  // anything is bound below it.
  plan.mounts.push_back({MountKind::sealed, "", inside::sealed_root});
  plan.must_be_sealed.emplace_back(inside::sealed_root);
  plan.mounts.push_back({MountKind::writable_bind, in.work_tree, inside::work_tree});
  plan.mounts.push_back({MountKind::read_only_bind, in.clone_git_dir, inside::git_dir});
  const std::string object_dirs = bind_object_dirs(in, plan);
  plan.mounts.push_back({MountKind::writable_bind, in.home_dir, inside::home});
  plan.mounts.push_back({MountKind::read_only_bind, in.helper_binary, inside::helper});
  for (const auto& mount : in.executor_mounts) plan.mounts.push_back(mount);
  // The way out, when there is one: the egress proxy's socket, which the
  // wall check's bridge serves as 127.0.0.1:<proxy_port>.
  const bool has_network = !in.network.grants.empty() && !in.network.proxy_socket.empty();
  if (has_network) plan.mounts.push_back({MountKind::read_only_bind, in.network.proxy_socket, inside::proxy_socket});
  // The API, when the phase has one: the credential endpoint's socket, which
  // a second bridge serves as 127.0.0.1:<api_port>.
  const bool has_api = !in.network.api_socket.empty();
  if (has_api) plan.mounts.push_back({MountKind::read_only_bind, in.network.api_socket, inside::api_socket});

  mask_sockets_named_by_env(in, plan);

  // The environment is built, never filtered from ours.
  plan.env["PATH"] = inside::path;
  plan.env["PWD"] = inside::work_tree;  // bwrap sets it with --chdir
  plan.env["HOME"] = inside::home;
  plan.env["TMPDIR"] = tmpdir;
  plan.env["USER"] = "mullet";
  plan.env["LOGNAME"] = "mullet";
  plan.env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = object_dirs;
  if (in.host_uid) {
    // The clone's git dir is root's, which shows inside as the overflow uid,
    // not the sandbox's: git would call it dubious. Command-scope config is
    // protected, so this is honoured (a repository's own config is not).
    plan.env["GIT_CONFIG_COUNT"] = "1";
    plan.env["GIT_CONFIG_KEY_0"] = "safe.directory";
    plan.env["GIT_CONFIG_VALUE_0"] = "*";
  }
  for (const auto& name : passthrough_env_names()) {
    if (const auto found = in.host_env.find(name); found != in.host_env.end()) plan.env[name] = found->second;
  }
  for (const auto& name : in.extra_env_names) {
    if (const auto found = in.host_env.find(name); found != in.host_env.end()) plan.env[name] = found->second;
  }
  if (has_network) {
    const std::string proxy = "http://127.0.0.1:" + std::to_string(inside::proxy_port);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) plan.env[name] = proxy;
    // The API bridge is on the sandbox's own loopback: its requests must not
    // go to the proxy (which would look for 127.0.0.1 on the host). Only
    // then: a granted service on the host's loopback is reached through the
    // proxy as 127.0.0.1:<port>.
    if (has_api) {
      for (const char* name : {"NO_PROXY", "no_proxy"}) plan.env[name] = "127.0.0.1,localhost";
    }
  }
  for (const auto& [name, value] : in.executor_env) plan.env[name] = value;
  return plan;
}

}  // namespace mullet::sandbox
