#include "sandbox/fuse_overlay.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

// What the daemon's child mounts, made before fork.
struct FuseMount {
  std::string target;   // /proc/self/fd/<the mount point>
  std::string options;  // fd=...,rootmode=...,user_id=...,group_id=...,default_permissions
};

bool mount_fuse_in_child(void* data) {
  const auto& mount = *static_cast<const FuseMount*>(data);
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return ::mount("fuse-overlayfs", mount.target.c_str(), "fuse.fuse-overlayfs", MS_NOSUID | MS_NODEV,
                 mount.options.c_str()) == 0;
}

std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

std::string find_fuse_overlayfs() {
  return util::find_in_path("fuse-overlayfs", util::host_path());
}

}  // namespace

std::string probe_fuse_overlay() {
  if (find_fuse_overlayfs().empty()) return "fuse-overlayfs is not installed";
  const UniqueFd device(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!device) return "cannot open /dev/fuse: " + util::errno_text(errno);
  if (::geteuid() != 0) return "fuse-overlayfs serves a job's work tree only when git-mullet runs as root";
  return {};
}

FuseDaemon start_fuse_overlay(const Overlay& overlay, const std::string& mount_point, uid_t uid, gid_t gid) {
  const std::string program = find_fuse_overlayfs();
  if (program.empty()) {
    throw refused_error("fuse-overlayfs is not installed, so the work tree cannot be served by it; nothing was run",
                        "install it (apt-get install fuse-overlayfs), or set [sandbox] work_tree = \"auto\"");
  }
  const UniqueFd device(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!device) {
    throw refused_error("cannot open /dev/fuse for fuse-overlayfs: " + util::errno_text(errno) + "; nothing was run",
                        "set [sandbox] work_tree = \"auto\" or \"checkout\"");
  }
  const UniqueFd lower = util::open_path_no_symlinks(overlay.lower);
  const UniqueFd upper = util::open_path_no_symlinks(overlay.upper);
  const UniqueFd work = util::open_path_no_symlinks(overlay.work);
  const UniqueFd target = util::open_path_no_symlinks(mount_point);
  FuseMount mount{fd_path(target.get()), "fd=" + std::to_string(device.get()) +
                                             ",rootmode=40000,user_id=" + std::to_string(uid) +
                                             ",group_id=" + std::to_string(gid) + ",default_permissions"};
  util::SpawnOptions options;
  options.argv = {program, "-f", "-o",
                  "lowerdir=" + fd_path(lower.get()) + ",upperdir=" + fd_path(upper.get()) +
                      ",workdir=" + fd_path(work.get()) + ",squash_to_uid=" + std::to_string(uid) +
                      ",squash_to_gid=" + std::to_string(gid) + ",noacl",
                  "/dev/fd/" + std::to_string(device.get())};
  options.env = {{"PATH", util::host_path()}};
  options.cwd = "/";
  options.keep_fds = {device.get(), lower.get(), upper.get(), work.get()};
  options.die_with_parent = true;
  options.uid = uid;
  options.gid = gid;
  options.child_setup = mount_fuse_in_child;
  options.child_setup_data = &mount;
  FuseDaemon started;
  try {
    started.daemon = util::spawn(options);
  } catch (const Error& error) {
    throw refused_error(std::string("fuse-overlayfs could not mount the work tree, so nothing ran: ") + error.what(),
                        "set [sandbox] work_tree = \"auto\" or \"checkout\"");
  }
  started.mount_ns =
      UniqueFd(::open(("/proc/" + std::to_string(started.daemon.pid()) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
  if (!started.mount_ns) throw failure("fuse-overlayfs ended before the sandbox started: " + util::errno_text(errno));
  return started;
}

}  // namespace mullet::sandbox
