#include "sandbox/staging.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {

void prepare_staging_mountpoint() {
  if (::mkdir(staging_mountpoint, 0755) != 0 && errno != EEXIST) {
    throw refused_error(std::string("cannot create ") + staging_mountpoint + ": " + util::errno_text(errno));
  }
  struct stat info {};
  if (::lstat(staging_mountpoint, &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != 0) {
    throw refused_error(std::string(staging_mountpoint) + " is not a directory owned by root; remove it");
  }
}

std::string staged_path(std::size_t index) {
  return std::string(staging_root) + "/" + std::to_string(index);
}

bool stage_binds_in_child(void* data) {
  auto& staging = *static_cast<Staging*>(data);
  auto& binds = staging.binds;
  if (staging.join_mount_ns >= 0 && ::setns(staging.join_mount_ns, CLONE_NEWNS) != 0) return false;
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (staging.disk != nullptr && !loop_mount_in_child(*staging.disk)) return false;
  if (staging.overlay != nullptr && !mount_overlay_in_child(*staging.overlay)) return false;
  // Open before the tmpfs goes on: nothing may be hidden by it, but the
  // descriptors must belong to this namespace.
  for (auto& bind : binds) {
    bind.fd = util::open_path_no_symlinks_raw(bind.source_path.c_str());
    if (bind.fd < 0) return false;
  }
  if (::mount("mullet-stage", staging_mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    return false;
  }
  if (::mkdir(staging_root, 0755) != 0) return false;
  for (const auto& bind : binds) {
    if (bind.is_directory) {
      if (::mkdir(bind.staged_path.c_str(), 0755) != 0) return false;
    } else {
      const int fd = ::open(bind.staged_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return false;
      ::close(fd);
    }
    // "/proc/self/fd/<fd>", formatted on the stack.
    char source[32] = "/proc/self/fd/";
    char digits[12];
    int count = 0;
    for (int value = bind.fd; count == 0 || value > 0; value /= 10)
      digits[count++] = static_cast<char>('0' + value % 10);
    std::size_t length = std::strlen(source);
    while (count > 0) source[length++] = digits[--count];
    source[length] = '\0';
    // Recursive, as bwrap's own binds are: mounts below /usr or /etc look the
    // same to a sandbox whether or not git-mullet runs as root.
    if (::mount(source, bind.staged_path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  }
  return true;
}

}  // namespace mullet::sandbox
