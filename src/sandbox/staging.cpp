#include "sandbox/staging.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

bool stage_binds_in_child(const std::vector<StagedBind>& binds) {
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  // Open before the tmpfs goes on: nothing may be hidden by it, but the
  // descriptors must belong to this namespace.
  std::vector<int> fds;
  for (const auto& bind : binds) {
    fds.push_back(util::open_path_no_symlinks_raw(bind.source_path));
    if (fds.back() < 0) return false;
  }
  if (::mount("mullet-stage", staging_mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    return false;
  }
  if (::mkdir(staging_root, 0755) != 0) return false;
  for (std::size_t i = 0; i < binds.size(); ++i) {
    const StagedBind& bind = binds[i];
    if (bind.is_directory) {
      if (::mkdir(bind.staged_path.c_str(), 0755) != 0) return false;
    } else {
      const int fd = ::open(bind.staged_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return false;
      ::close(fd);
    }
    const std::string source = "/proc/self/fd/" + std::to_string(fds[i]);
    // Recursive, as bwrap's own binds are: mounts below /usr or /etc look the
    // same to a sandbox whether or not git-mullet runs as root.
    if (::mount(source.c_str(), bind.staged_path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  }
  return true;
}

}  // namespace mullet::sandbox
