#include "sandbox/bwrap.hpp"

#include <sys/stat.h>

#include "util/error.hpp"
#include "util/fs.hpp"

namespace mullet::sandbox {

OpenedBinds open_bind_sources(const Plan& plan) {
  OpenedBinds opened;
  for (const auto& mount : plan.mounts) {
    BindSource source;
    if (mount.kind == MountKind::read_only_bind || mount.kind == MountKind::writable_bind ||
        mount.kind == MountKind::mask) {
      opened.owned.push_back(util::open_path_no_symlinks(mount.source));
      source.fd = opened.owned.back().get();
      struct stat info {};
      source.is_directory = ::fstat(source.fd, &info) == 0 && S_ISDIR(info.st_mode);
    }
    opened.sources.push_back(source);
  }
  return opened;
}

std::vector<std::string> wall_check_arguments(const Plan& plan, int report_fd) {
  std::vector<std::string> args = {"__wall-check", "--report-fd", std::to_string(report_fd)};
  if (plan.controlling_terminal) args.emplace_back("--terminal");
  for (const auto& dir : plan.must_be_empty) {
    args.push_back("--empty");
    args.push_back(dir);
  }
  for (const auto& dir : plan.must_be_sealed) {
    args.push_back("--sealed");
    args.push_back(dir);
  }
  for (const auto& [name, value] : plan.env) {
    args.push_back("--env");
    args.push_back(name);
  }
  if (!plan.network.grants.empty() && !plan.network.proxy_socket.empty()) {
    args.push_back("--bridge");
    args.push_back(std::to_string(inside::proxy_port) + ":" + inside::proxy_socket);
  }
  if (!plan.network.api_socket.empty()) {
    args.push_back("--bridge");
    args.push_back(std::to_string(inside::api_port) + ":" + inside::api_socket);
  }
  args.push_back("--");
  args.insert(args.end(), plan.command.begin(), plan.command.end());
  return args;
}

std::vector<std::string> bwrap_arguments(const Plan& plan, const std::vector<BindSource>& sources, int report_fd,
                                         int syscall_filter_fd) {
  // Every namespace, unshared strictly: --unshare-all would only *try* the
  // user and cgroup namespaces and carry on without them.
  std::vector<std::string> args = {
      "--unshare-user",    "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup",
      "--die-with-parent", "--new-session", "--cap-drop",    "ALL",           "--hostname",    "mullet"};
  for (std::size_t i = 0; i < plan.mounts.size(); ++i) {
    const Mount& mount = plan.mounts[i];
    switch (mount.kind) {
      case MountKind::read_only_bind:
      case MountKind::mask:
      case MountKind::writable_bind: {
        const BindSource& source = sources.at(i);
        const bool writable = mount.kind == MountKind::writable_bind;
        if (!source.staged_path.empty()) {
          args.insert(args.end(), {writable ? "--bind" : "--ro-bind", source.staged_path, mount.destination});
        } else {
          args.insert(args.end(),
                      {writable ? "--bind-fd" : "--ro-bind-fd", std::to_string(source.fd), mount.destination});
        }
        break;
      }
      case MountKind::tmpfs:
        if (mount.size_bytes > 0) args.insert(args.end(), {"--size", std::to_string(mount.size_bytes)});
        if (mount.destination == "/tmp") args.insert(args.end(), {"--perms", "1777"});
        args.insert(args.end(), {"--tmpfs", mount.destination});
        break;
      case MountKind::proc: args.insert(args.end(), {"--proc", mount.destination}); break;
      case MountKind::dev: args.insert(args.end(), {"--dev", mount.destination}); break;
      case MountKind::directory: args.insert(args.end(), {"--perms", "0700", "--dir", mount.destination}); break;
      // Before anything is bound below it; the root's --remount-ro then
      // keeps its mode from being changed.
      case MountKind::sealed: args.insert(args.end(), {"--perms", "0111", "--dir", mount.destination}); break;
      case MountKind::symlink: args.insert(args.end(), {"--symlink", mount.source, mount.destination}); break;
    }
  }
  // bwrap leaves its own root tmpfs and its /dev tmpfs writable unless told
  // otherwise (device nodes stay usable on a read-only /dev).
  args.insert(args.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
  // Applied by bwrap last, just before it runs the wall check: the wall
  // check, the worker and anything they start are under it.
  args.insert(args.end(), {"--seccomp", std::to_string(syscall_filter_fd)});
  args.insert(args.end(), {"--chdir", plan.cwd, "--", inside::helper});
  for (auto& word : wall_check_arguments(plan, report_fd)) args.push_back(std::move(word));
  return args;
}

}  // namespace mullet::sandbox
