#include "sandbox/disk_image.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

// How long a released image may stay bound to its loop device: the
// sandbox's last processes are being reaped.
constexpr std::int64_t release_wait_ms = 10000;
// Loop devices another process takes between our LOOP_CTL_GET_FREE and our
// LOOP_CONFIGURE are skipped, this many times at most.
constexpr int loop_attempts = 16;

// Writes "<prefix><number>" into `out` without allocating.
void format_numbered(char* out, std::size_t size, const char* prefix, long number) {
  std::size_t at = 0;
  for (; prefix[at] != '\0' && at + 1 < size; ++at) out[at] = prefix[at];
  char digits[24];
  int count = 0;
  for (long value = number; count == 0 || value > 0; value /= 10) digits[count++] = static_cast<char>('0' + value % 10);
  while (count > 0 && at + 1 < size) out[at++] = digits[--count];
  out[at] = '\0';
}

void close_keeping_errno(int fd) {
  if (fd < 0) return;
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

// Opens a regular file by a walk that follows no symlink, for reading and
// writing (the walk yields an O_PATH descriptor, reopened through /proc).
int open_image_raw(const char* path) {
  const int walked = util::open_path_no_symlinks_raw(path);
  if (walked < 0) return -1;
  char through[40];
  format_numbered(through, sizeof through, "/proc/self/fd/", walked);
  const int fd = ::open(through, O_RDWR | O_CLOEXEC);
  close_keeping_errno(walked);
  return fd;
}

bool mount_image_in_new_namespace(void* data) {
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return loop_mount_in_child(*static_cast<LoopMountChild*>(data));
}

}  // namespace

DiskCapChoice choose_disk_cap(const DiskCapInputs& in) {
  if (in.disk_mb <= 0) return {false, "no disk_mb"};
  if (!in.enabled) return {false, "[sandbox] disk_cap = \"off\""};
  if (!in.as_root) return {false, "not root (a loop mount needs root)"};
  if (in.work_tree == DiskCapWorkTree::fuse_overlay) return {false, "fuse-overlayfs work tree"};
  if (in.work_tree == DiskCapWorkTree::checkout) return {false, "checkout work tree"};
  if (in.mkfs.empty()) return {false, "mkfs.ext4 missing (install e2fsprogs)"};
  if (!in.loop_control) return {false, "no /dev/loop-control"};
  return {true, {}};
}

std::string describe_disk_cap(const DiskCapChoice& choice, std::int64_t disk_mb) {
  if (choice.kernel) return "ext4 image of " + std::to_string(disk_mb) + " MiB (kernel)";
  return "watched (polling): " + choice.why;
}

DiskCapHost probe_disk_cap_host() {
  DiskCapHost host;
  // mkfs.ext4 lives in sbin, which a user's PATH often lacks.
  host.mkfs = util::find_in_path("mkfs.ext4", util::host_path() + ":/usr/sbin:/sbin");
  struct stat info {};
  host.loop_control = ::stat("/dev/loop-control", &info) == 0 && S_ISCHR(info.st_mode);
  return host;
}

std::uint64_t disk_full_slack(std::uint64_t image_bytes) {
  return std::max<std::uint64_t>(image_bytes / 100, 256ULL * 1024ULL);
}

void make_disk_image(const DiskImage& image, const std::string& mkfs) {
  {
    const UniqueFd fd(::open(image.image.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    struct stat info {};
    if (!fd || ::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid()) {
      throw refused_error("cannot make the disk image " + image.image + ": " +
                          (fd ? std::string("not a regular file of ours") : util::errno_text(errno)));
    }
    // Emptied first: the blocks of the last phase's image go back.
    if (::ftruncate(fd.get(), 0) != 0 || ::ftruncate(fd.get(), static_cast<off_t>(image.bytes)) != 0) {
      throw refused_error("cannot size the disk image " + image.image + ": " + util::errno_text(errno));
    }
  }
  // No journal: the image is scratch, drained after the phase, and never
  // replayed after a crash (resume starts from the last snapshot). No
  // reserved blocks: the whole size is the worker's. An inode per 16 KiB
  // (mke2fs's default for all but small file systems, which get one per 4
  // KiB and lose 8% of a 256 MiB image to inode tables): 64 per MiB, so
  // 10 GiB holds 655,360 files. Lazy inode tables make mkfs write almost
  // nothing; nodiscard skips punching the sparse file.
  util::SpawnOptions options;
  options.argv = {
      mkfs, "-q",       "-F", "-m", "0", "-O", "^has_journal", "-i", "16384", "-E", "lazy_itable_init=1,nodiscard",
      "--", image.image};
  options.env = {{"PATH", util::host_path()}};
  const util::CapturedRun run = util::run_capture(options, {}, {util::probe_deadline_seconds, true});
  if (!run.status.success()) {
    throw refused_error("mkfs.ext4 could not make the disk image " + image.image + " (" + run.status.describe() +
                            "): " + util::first_line(util::terminal_safe(util::trim(run.err)), 300),
                        "set [sandbox] disk_cap = \"off\" in your user config to hold disk_mb by the watch alone");
  }
}

void wait_image_released(const DiskImage& image) {
  const std::int64_t until = util::monotonic_ms() + release_wait_ms;
  while (true) {
    bool bound = false;
    util::DirectoryReader listing(AT_FDCWD, "/sys/block");
    while (const auto entry = listing.next()) {
      if (entry->name.rfind("loop", 0) != 0) continue;
      const auto backing = util::read_proc_file("/sys/block/" + entry->name + "/loop/backing_file");
      if (backing && util::trim(*backing) == image.image) bound = true;
    }
    if (!bound) return;
    if (util::monotonic_ms() > until) {
      throw refused_error("the disk image " + image.image + " is still mounted after its sandbox ended",
                          "see `losetup -a`; the job can be resumed once it is released");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string run_with_image_mounted(const DiskImage& image, const std::vector<std::string>& argv,
                                   const std::string& what) {
  wait_image_released(image);
  LoopMountChild child{image.image, image.mount_point, {}};
  util::SpawnOptions options;
  options.argv = argv;
  options.env = {{"PATH", util::host_path()}, {"LC_ALL", "C"}};
  options.child_setup = mount_image_in_new_namespace;
  options.child_setup_data = &child;
  const util::CapturedRun run = util::run_capture(options);
  if (!run.status.success()) {
    throw refused_error("cannot " + what + " the disk image " + image.image + " (" + run.status.describe() +
                        "): " + util::first_line(util::terminal_safe(util::trim(run.err)), 300));
  }
  // Its namespace went with it; the loop device follows.
  wait_image_released(image);
  return run.out;
}

bool loop_mount_in_child(LoopMountChild& child) {
  const int image = open_image_raw(child.image.c_str());
  if (image < 0) return false;
  const int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) {
    close_keeping_errno(image);
    return false;
  }
  int loop = -1;
  for (int attempt = 0; attempt < loop_attempts && loop < 0; ++attempt) {
    const long number = ::ioctl(control, LOOP_CTL_GET_FREE);
    if (number < 0) break;
    format_numbered(child.device, sizeof child.device, "/dev/loop", number);
    const int device = ::open(child.device, O_RDWR | O_CLOEXEC);
    if (device < 0) break;
    loop_config config{};
    config.fd = static_cast<__u32>(image);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (::ioctl(device, LOOP_CONFIGURE, &config) == 0) {
      loop = device;
    } else {
      const bool taken = errno == EBUSY;
      close_keeping_errno(device);
      if (!taken) break;
    }
  }
  close_keeping_errno(control);
  close_keeping_errno(image);
  if (loop < 0) {
    if (errno == 0) errno = EBUSY;
    return false;
  }
  // The mount point by its descriptor: no symlink is followed to it.
  const int target = util::open_path_no_symlinks_raw(child.mount_point.c_str());
  bool mounted = false;
  if (target >= 0) {
    char through[40];
    format_numbered(through, sizeof through, "/proc/self/fd/", target);
    // noinit_itable: no background thread zeroing the lazy inode tables
    // (the image is scratch, and that would fill the sparse file).
    mounted = ::mount(child.device, through, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable") == 0;
    close_keeping_errno(target);
  }
  // The mount holds the device now; without it, closing clears the device.
  close_keeping_errno(loop);
  return mounted;
}

UniqueFd open_mounted_image(pid_t pid, const DiskImage& image) {
  // /proc/<pid>/root is the staging namespace's root; the path below it is
  // the job's, ours, and walked without following symlinks.
  const UniqueFd root(::open(("/proc/" + std::to_string(pid) + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return {};
  UniqueFd current(::dup(root.get()));
  for (const auto& part : util::split(image.mount_point, '/')) {
    if (part.empty()) continue;
    if (part == "..") return {};
    UniqueFd next(::openat(current.get(), part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return {};
    current = std::move(next);
  }
  struct statfs info {};
  if (::fstatfs(current.get(), &info) != 0 || info.f_type != EXT4_SUPER_MAGIC) return {};
  return current;
}

std::optional<ImageUsage> image_usage(int root_fd, std::uint64_t image_bytes) {
  struct statvfs info {};
  if (::fstatvfs(root_fd, &info) != 0) return std::nullopt;
  ImageUsage usage;
  usage.used_bytes = static_cast<std::uint64_t>(info.f_blocks - info.f_bfree) * info.f_frsize;
  usage.free_bytes = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  usage.full = usage.free_bytes <= disk_full_slack(image_bytes) || info.f_favail == 0;
  return usage;
}

}  // namespace mullet::sandbox
