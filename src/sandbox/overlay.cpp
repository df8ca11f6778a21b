#include "sandbox/overlay.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

// Appends `text` to the option buffer; false when it does not fit.
bool append(OverlayChild& child, std::size_t& length, const char* text) {
  const std::size_t more = std::strlen(text);
  if (length + more + 1 > sizeof child.options) return false;
  std::memcpy(child.options + length, text, more);
  length += more;
  child.options[length] = '\0';
  return true;
}

// Appends "/proc/self/fd/<fd>" without allocating.
bool append_fd_path(OverlayChild& child, std::size_t& length, int fd) {
  char digits[12];
  int count = 0;
  for (int value = fd; count == 0 || value > 0; value /= 10) digits[count++] = static_cast<char>('0' + value % 10);
  char text[32] = "/proc/self/fd/";
  std::size_t at = std::strlen(text);
  while (count > 0) text[at++] = digits[--count];
  text[at] = '\0';
  return append(child, length, text);
}

bool write_proc_file(const char* path, const char* text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const auto length = static_cast<ssize_t>(std::strlen(text));
  const bool written = ::write(fd, text, static_cast<std::size_t>(length)) == length;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return written;
}

bool enter_user_namespace(const OverlayChild& child) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  if (!write_proc_file("/proc/self/setgroups", "deny")) return false;
  if (!write_proc_file("/proc/self/uid_map", child.uid_map.c_str())) return false;
  if (!write_proc_file("/proc/self/gid_map", child.gid_map.c_str())) return false;
  return ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
}

}  // namespace

OverlayChild prepare_overlay_child(const Overlay& overlay, const std::string& mount_point, bool user_namespace) {
  OverlayChild child;
  child.lower = overlay.lower;
  child.upper = overlay.upper;
  child.work = overlay.work;
  child.mount_point = mount_point;
  child.user_namespace = user_namespace;
  child.uid_map = std::to_string(::getuid()) + " " + std::to_string(::getuid()) + " 1\n";
  child.gid_map = std::to_string(::getgid()) + " " + std::to_string(::getgid()) + " 1\n";
  return child;
}

bool mount_overlay_in_child(OverlayChild& child) {
  int fds[4] = {-1, -1, -1, -1};
  const char* paths[4] = {child.lower.c_str(), child.upper.c_str(), child.work.c_str(), child.mount_point.c_str()};
  bool ok = true;
  for (int i = 0; i < 4 && ok; ++i) {
    fds[i] = util::open_path_no_symlinks_raw(paths[i]);
    ok = fds[i] >= 0;
  }
  std::size_t length = 0;
  child.options[0] = '\0';
  ok = ok && append(child, length, "lowerdir=") && append_fd_path(child, length, fds[0]) &&
       append(child, length, ",upperdir=") && append_fd_path(child, length, fds[1]) &&
       append(child, length, ",workdir=") && append_fd_path(child, length, fds[2]) &&
       append(child, length, ",redirect_dir=nofollow,metacopy=off,index=off") &&
       (!child.user_namespace || append(child, length, ",userxattr"));
  if (ok) {
    char target[32] = {};
    std::size_t target_length = 0;
    // The mount point by its descriptor too: no symlink is followed to it.
    OverlayChild scratch;
    ok = append_fd_path(scratch, target_length, fds[3]);
    std::memcpy(target, scratch.options, target_length + 1);
    ok = ok && ::mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, child.options) == 0;
  }
  const int saved = errno;
  for (const int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  errno = saved;
  return ok;
}

bool overlay_in_user_namespace_child(void* data) {
  auto& child = *static_cast<OverlayChild*>(data);
  if (!enter_user_namespace(child) || !mount_overlay_in_child(child)) return false;
  // The mount point's path now leads into the overlay.
  const int root = util::open_path_no_symlinks_raw(child.mount_point.c_str());
  if (root < 0) return false;
  const bool moved = ::dup2(root, child.work_tree_fd) == child.work_tree_fd;
  const int saved = errno;
  ::close(root);
  errno = saved;
  return moved;
}

std::string probe_overlay(const std::string& scratch, bool user_namespace) {
  util::TempDir dir(scratch, "overlay-probe-");
  const std::string& base = dir.path();
  for (const char* sub : {"/lower", "/upper", "/work", "/merged"}) util::make_dirs(base + sub, 0700);
  util::write_file(base + "/lower/file", "lower\n");
  OverlayChild child =
      prepare_overlay_child({base + "/lower", base + "/upper", base + "/work"}, base + "/merged", user_namespace);
  const std::string file = base + "/merged/file";
  const pid_t pid = ::fork();
  if (pid < 0) return "cannot fork: " + util::errno_text(errno);
  if (pid == 0) {
    bool ok = user_namespace
                  ? enter_user_namespace(child)
                  : ::unshare(CLONE_NEWNS) == 0 && ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    ok = ok && mount_overlay_in_child(child);
    // A copy-up: refused with EOVERFLOW when the lower file's owner is not
    // mapped.
    int fd = -1;
    if (ok) fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    ok = fd >= 0 && ::write(fd, "upper\n", 6) == 6;
    ::_exit(ok ? 0 : (errno & 0xff) == 0 ? 255 : errno & 0xff);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (util::read_file_if_exists(base + "/upper/file").value_or("") != "lower\nupper\n") {
      return "the overlay's upper directory did not get the change";
    }
    return {};
  }
  if (!WIFEXITED(status)) return "the probe was killed";
  return (user_namespace ? "mounting an overlay in a user namespace failed: " : "mounting an overlay failed: ") +
         util::errno_text(WEXITSTATUS(status));
}

}  // namespace mullet::sandbox
