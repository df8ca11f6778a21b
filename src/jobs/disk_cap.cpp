#include "jobs/disk_cap.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

// The last component of one of the job's paths (layout.cpp names them).
std::string name_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

std::string program(const std::string& name) {
  std::string found = util::find_in_path(name, util::host_path());
  if (found.empty()) throw refused_error(name + " is not installed; the disk image cannot be filled or drained");
  return found;
}

// The length from which a path in the image is removed before the drain:
// cp copies by path name, and the kernel refuses one of PATH_MAX bytes or
// more. A copied entry's path grows by `grows_by` on the way out; a removed
// one is at most a name longer than the limit, and rm must still reach it.
std::size_t drain_path_limit(std::size_t grows_by) {
  constexpr std::size_t path_max = PATH_MAX;
  constexpr std::size_t name_max = NAME_MAX;
  return std::min(path_max - name_max - 1, path_max - grows_by);
}

std::size_t count_nul_terminated(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\0'));
}

}  // namespace

sandbox::DiskCapChoice disk_cap_choice(const config::Settings& settings, bool as_root,
                                       sandbox::DiskCapWorkTree work_tree) {
  sandbox::DiskCapInputs in;
  in.enabled = settings.sandbox.disk_cap == config::DiskCap::automatic;
  in.disk_mb = static_cast<std::int64_t>(settings.limits.disk_mb.count());
  in.as_root = as_root;
  in.work_tree = work_tree;
  const sandbox::DiskCapHost host = sandbox::probe_disk_cap_host();
  in.mkfs = host.mkfs;
  in.loop_control = host.loop_control;
  return sandbox::choose_disk_cap(in);
}

sandbox::Overlay image_overlay(const JobPaths& paths, const sandbox::Overlay& overlay) {
  sandbox::Overlay in_image = overlay;
  in_image.upper = paths.disk_mount + "/" + name_of(paths.upper);
  in_image.work = paths.disk_mount + "/" + name_of(paths.overlay_work);
  return in_image;
}

std::string image_home(const JobPaths& paths) {
  return paths.disk_mount + "/" + name_of(paths.home);
}

PhaseDisk::PhaseDisk(const JobPaths& paths, const sandbox::DiskImage& image, const SandboxDirs& dirs)
    : m_paths(paths), m_image(image), m_dirs(dirs) {
  if (!dirs.overlay || dirs.overlay->upper != paths.upper || dirs.home != paths.home) {
    throw failure("internal error: a disk image for directories that are not the job's");
  }
  m_lock = UniqueFd(::open(image.image.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!m_lock) throw refused_error("cannot open the disk image " + image.image + ": " + util::errno_text(errno));
  if (::flock(m_lock.get(), LOCK_EX | LOCK_NB) != 0) {
    throw refused_error("another runner is using this job's disk image " + image.image + "; nothing was run");
  }
  // The empty mount point, and below it what the parent opens before the
  // staging child mounts the image over them (the home bind's source).
  const std::string below = paths.disk_mount.substr(paths.root.size() + 1);
  for (const std::string& dir : {paths.upper, paths.overlay_work, paths.home}) {
    util::make_private_dirs(paths.root, below + "/" + name_of(dir));
  }
  const sandbox::DiskCapHost host = sandbox::probe_disk_cap_host();
  sandbox::make_disk_image(image, host.mkfs);
  // cp -a keeps owners, modes, xattrs (an overlay's opaque marks), whiteouts
  // and symlinks as they are, following none.
  sandbox::run_with_image_mounted(
      image, {program("cp"), "-a", "-t", image.mount_point + "/", "--", paths.upper, paths.overlay_work, paths.home},
      "fill");
}

std::size_t PhaseDisk::drain() {
  // Fresh directories of ours that cp creates: nothing the worker left on
  // the host side is written through, and the image's names go nowhere but
  // below them.
  const std::string fresh = util::make_temp_dir(m_paths.root, "drain-");
  std::size_t dropped = 0;
  try {
    // A worker's chain of directories can be deeper than any path cp can
    // name (the snapshot reads 128 levels at most): what lies below that
    // length is removed first. find and rm walk by descriptor, at any depth;
    // -regex's dot matches every byte, newlines included, in the C locale.
    const std::size_t limit = drain_path_limit(fresh.size() - m_image.mount_point.size());
    const std::string long_path = ".\\{" + std::to_string(limit) + ",\\}";
    dropped = count_nul_terminated(sandbox::run_with_image_mounted(
        m_image,
        {program("find"), "-P", image_overlay(m_paths, {}).upper, image_home(m_paths), "-regextype", "posix-basic",
         "-regex", long_path, "-prune", "-print0", "-exec", program("rm"), "-rf", "--", "{}", "+"},
        "prune"));
    sandbox::run_with_image_mounted(
        m_image, {program("cp"), "-a", "-t", fresh + "/", "--", image_overlay(m_paths, {}).upper, image_home(m_paths)},
        "drain");
    for (const std::string& dir : {m_paths.upper, m_paths.home}) {
      util::remove_tree(dir);
      if (std::rename((fresh + "/" + name_of(dir)).c_str(), dir.c_str()) != 0) {
        throw refused_error("cannot put the drained " + dir + " in place: " + util::errno_text(errno));
      }
    }
  } catch (...) {
    util::remove_tree(fresh);
    throw;
  }
  util::remove_tree(fresh);
  // Its blocks go back; the next phase makes it afresh.
  if (::ftruncate(m_lock.get(), 0) != 0) {
    throw refused_error("cannot empty the disk image " + m_image.image + ": " + util::errno_text(errno));
  }
  return dropped;
}

}  // namespace mullet::jobs
