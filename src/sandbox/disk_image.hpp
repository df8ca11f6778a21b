// [limits] disk_mb held by the kernel: an ext4 file system of disk_mb in a
// sparse image file, loop-mounted for the phase (Plan::disk_image).
//
// Where: as root, with a kernel overlay work tree (setup and worker; gates
// and shell work in checkouts of their own and keep the watch), when
// `[sandbox] disk_cap` is auto, disk_mb is set, mkfs.ext4 is installed and
// the host has /dev/loop-control. choose_disk_cap decides from those facts
// before the phase starts; once it chose the image, a failure to make or
// mount it refuses the phase (never a silent fall back to the watch).
//
// How: the image is made afresh for each phase (mkfs.ext4 without a
// journal, lazy inode tables: a scratch file system we drain after the
// phase, so there is nothing to replay after a crash), filled from the job's
// upper dir and home, mounted by the staging child with LOOP_CONFIGURE and
// LO_FLAGS_AUTOCLEAR (the loop device goes with the last mount of it, that
// is with the sandbox's namespaces), and drained back into fresh
// directories afterwards. Filling and draining run `cp -a` in a mount
// namespace of its own that has the image mounted; cp never follows a
// symlink of the source and writes only into a directory it creates, so a
// symlink the worker made is copied as a symlink and never written through.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/plan.hpp"
#include "util/fd.hpp"

namespace mullet::sandbox {

// What the work tree of the phase is, for the choice.
enum class DiskCapWorkTree { kernel_overlay, fuse_overlay, checkout };

struct DiskCapInputs {
  bool enabled = true;  // [sandbox] disk_cap = "auto"
  std::int64_t disk_mb = 0;
  bool as_root = false;
  DiskCapWorkTree work_tree = DiskCapWorkTree::checkout;
  std::string mkfs;  // mkfs.ext4's path; empty: not installed
  bool loop_control = false;
};

struct DiskCapChoice {
  bool kernel = false;
  std::string why;  // why not, when not
};

// Pure.
DiskCapChoice choose_disk_cap(const DiskCapInputs& in);
// "ext4 image of N MiB (kernel)" or "watched (polling): <why>".
std::string describe_disk_cap(const DiskCapChoice& choice, std::int64_t disk_mb);

// What the host offers (mkfs.ext4 in PATH or /sbin, /usr/sbin;
// /dev/loop-control).
struct DiskCapHost {
  std::string mkfs;
  bool loop_control = false;
};
DiskCapHost probe_disk_cap_host();

// How close to full the image's file system may be and still not count as
// filled: ext4 keeps a few blocks back, and a write that fails with ENOSPC
// leaves at most that much free.
std::uint64_t disk_full_slack(std::uint64_t image_bytes);

// Makes `image.image` a sparse file of image.bytes (over whatever was there,
// which must be a regular file of ours, never a symlink) and an empty ext4
// file system in it. Throws a refusal on failure.
void make_disk_image(const DiskImage& image, const std::string& mkfs);

// Waits (up to a few seconds) until no loop device is bound to the image
// any more: the sandbox's namespaces go with its last process, and the image
// must never be mounted twice at once. Throws a refusal when it stays bound.
void wait_image_released(const DiskImage& image);

// Runs `argv` (as root, our PATH, no shell) in a mount namespace of its own
// with the image mounted on image.mount_point, and waits for it; throws a
// refusal naming `what` when it fails. Returns what it printed.
std::string run_with_image_mounted(const DiskImage& image, const std::vector<std::string>& argv,
                                   const std::string& what);

// For the child that becomes bwrap (staging.hpp), prepared before the fork.
struct LoopMountChild {
  std::string image;
  std::string mount_point;
  char device[32] = {};
};
// In the child, already in a private mount namespace: binds a free loop
// device to the image (auto-clearing) and mounts its ext4 file system on the
// mount point (nosuid, nodev). Allocates nothing. False with errno set.
bool loop_mount_in_child(LoopMountChild& child);

// The mounted image's root as seen by process `pid` (bwrap, in the staging
// namespace), opened without following any symlink below /proc/<pid>/root;
// holding it keeps the file system readable after the sandbox is gone. An
// invalid descriptor when the path there is not an ext4 file system's root.
UniqueFd open_mounted_image(pid_t pid, const DiskImage& image);

struct ImageUsage {
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  bool full = false;  // free space within disk_full_slack, or no free inode
};
std::optional<ImageUsage> image_usage(int root_fd, std::uint64_t image_bytes);

}  // namespace mullet::sandbox
