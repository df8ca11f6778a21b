// A work tree that is a kernel overlay of a pristine checkout (Plan's
// work_tree_overlay), mounted by the child that becomes bwrap in a mount
// namespace of ours, so the host never has it mounted and it dies with the
// sandbox:
// - as root, in the staging namespace (staging.hpp), before the binds are
//   opened there, so the work tree's staged bind is the overlay;
// - as an unprivileged user, in a user namespace of its own (our uid and gid
//   mapped to themselves, setgroups denied), where bwrap then runs nested;
//   the descriptor bwrap's --bind-fd names is replaced by the mounted
//   overlay's.
// Options are explicit: redirect_dir=nofollow (no redirect made or followed;
// the kernel refuses "off" with userxattr, which it reads as "follow"),
// metacopy=off and index=off keep the upper dir plain files, whiteouts and
// opaque directories (what the snapshot reads), `userxattr` in a user
// namespace. The layers are named
// /proc/self/fd/N of directories the child opens without following any
// symlink, so no path's ',' ':' or '\' reaches the option string.
#pragma once

#include <sys/types.h>

#include <string>

#include "sandbox/plan.hpp"

namespace mullet::sandbox {

// Everything the child needs, made before fork (nothing in the child
// allocates).
struct OverlayChild {
  std::string lower;
  std::string upper;
  std::string work;
  std::string mount_point;  // the work tree bind's source (an empty directory on the host)
  bool user_namespace = false;
  std::string uid_map;  // "<uid> <uid> 1\n"
  std::string gid_map;
  // Unprivileged: the descriptor number bwrap's --bind-fd names for the
  // work tree, replaced by the overlay's root after the mount.
  int work_tree_fd = -1;
  char options[160] = {};
};

OverlayChild prepare_overlay_child(const Overlay& overlay, const std::string& mount_point, bool user_namespace);

// In the child, already in a private mount namespace: mounts the overlay
// on its mount point. False with errno set.
bool mount_overlay_in_child(OverlayChild& child);

// SpawnOptions::child_setup for an unprivileged run (data: OverlayChild*):
// enters a user and mount namespace of its own, mounts the overlay and puts
// its root at work_tree_fd. False with errno set.
bool overlay_in_user_namespace_child(void* data);

// Whether this kernel mounts an overlay the way a job would (as root, or in
// a user namespace) and copies a file up through it, tried in a forked
// child over directories made under `scratch` (removed afterwards). Empty
// when it works, else why not.
std::string probe_overlay(const std::string& scratch, bool user_namespace);

}  // namespace mullet::sandbox
