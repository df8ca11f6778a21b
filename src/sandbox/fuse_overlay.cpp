#include "sandbox/fuse_overlay.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/staging.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

// Where the daemon finds its layers, in its own namespace: fuse-overlayfs
// resolves its -o paths with realpath, so descriptors will not do, and the
// job's directory is closed to the sandbox's uid. A tmpfs on the staging
// mount point (empty on the host) holds binds of the three, the lower one
// read-only; bwrap's staging child mounts its own tmpfs over it.
constexpr const char* layer_lower = "/run/git-mullet-stage/lower";
constexpr const char* layer_rw = "/run/git-mullet-stage/layers";  // holds upper/ and work/

// What the daemon's child mounts, made before fork.
struct FuseMount {
  std::string layers[2];  // lower, and the directory of upper/ and work/ (host paths)
  std::string mount_point;
  std::string options;   // fd=...,rootmode=...,user_id=...,group_id=...,default_permissions,allow_other
  char target[32] = {};  // "/proc/self/fd/<fd>", written in the child
};

// Writes "/proc/self/fd/<fd>" into `out` without allocating.
void format_fd_path(char (&out)[32], int fd) {
  static constexpr char prefix[] = "/proc/self/fd/";
  std::size_t at = 0;
  for (const char c : prefix) {
    if (c != '\0') out[at++] = c;
  }
  char digits[12];
  int count = 0;
  for (int value = fd; count == 0 || value > 0; value /= 10) digits[count++] = static_cast<char>('0' + value % 10);
  while (count > 0) out[at++] = digits[--count];
  out[at] = '\0';
}

// Binds `source` (walked without following symlinks, in this namespace) on
// the new directory `target`; read-only when asked.
bool bind_layer(FuseMount& mount, const char* source, const char* target, bool read_only) {
  const int fd = util::open_path_no_symlinks_raw(source);
  if (fd < 0) return false;
  format_fd_path(mount.target, fd);
  bool ok = ::mkdir(target, 0755) == 0 && ::mount(mount.target, target, nullptr, MS_BIND, nullptr) == 0;
  if (ok && read_only) {
    ok = ::mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) == 0;
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// Descriptors from the old namespace cannot be mounted on or bound in the
// new one: everything is opened here, after the unshare.
bool mount_fuse_in_child(void* data) {
  auto& mount = *static_cast<FuseMount*>(data);
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (::mount("mullet-fuse-layers", staging_mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) {
    return false;
  }
  if (!bind_layer(mount, mount.layers[0].c_str(), layer_lower, true) ||
      !bind_layer(mount, mount.layers[1].c_str(), layer_rw, false)) {
    return false;
  }
  const int target = util::open_path_no_symlinks_raw(mount.mount_point.c_str());
  if (target < 0) return false;
  format_fd_path(mount.target, target);
  const bool mounted =
      ::mount("fuse-overlayfs", mount.target, "fuse.fuse-overlayfs", MS_NOSUID | MS_NODEV, mount.options.c_str()) == 0;
  const int saved = errno;
  ::close(target);
  errno = saved;
  return mounted;
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

FuseDaemon start_fuse_overlay(const Overlay& overlay, const std::string& mount_point, uid_t uid, gid_t gid,
                              const std::vector<int>& cgroup_procs_fds) {
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
  // One bind for both: fuse-overlayfs renames from its work dir to its upper.
  const std::string parent = overlay.upper.substr(0, overlay.upper.rfind('/'));
  if (overlay.upper != parent + "/upper" || overlay.work != parent + "/work") {
    throw failure("internal error: fuse-overlayfs's upper and work dirs are not upper/ and work/ of one directory");
  }
  prepare_staging_mountpoint();
  FuseMount mount{{overlay.lower, parent},
                  mount_point,
                  "fd=" + std::to_string(device.get()) + ",rootmode=40000,user_id=" + std::to_string(uid) +
                      ",group_id=" + std::to_string(gid) + ",default_permissions,allow_other"};
  util::SpawnOptions options;
  options.argv = {program, "-f", "-o",
                  std::string("lowerdir=") + layer_lower + ",upperdir=" + layer_rw + "/upper,workdir=" + layer_rw +
                      "/work" + ",squash_to_uid=" + std::to_string(uid) + ",squash_to_gid=" + std::to_string(gid) +
                      ",noacl,noxattrs=1",
                  "/dev/fd/" + std::to_string(device.get())};
  options.env = {{"PATH", util::host_path()}};
  options.cwd = "/";
  options.keep_fds = {device.get()};
  options.die_with_parent = true;
  options.uid = uid;
  options.gid = gid;
  options.cgroup_procs_fds = cgroup_procs_fds;
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
