#include "sandbox/host.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>

namespace mullet::sandbox {

std::vector<RootEntry> scan_host_root() {
  std::vector<RootEntry> entries;
  for (const auto& name : system_directories()) {
    const std::string path = "/" + name;
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) continue;
    RootEntry entry{name, S_ISLNK(info.st_mode), {}};
    if (entry.is_symlink) {
      char target[PATH_MAX];
      const ssize_t length = ::readlink(path.c_str(), target, sizeof target - 1);
      if (length <= 0) continue;
      entry.link_target.assign(target, static_cast<std::size_t>(length));
    } else if (!S_ISDIR(info.st_mode)) {
      continue;
    }
    entries.push_back(entry);
  }
  return entries;
}

}  // namespace mullet::sandbox
