// Bind sources for a sandbox that runs as another uid.
//
// When git-mullet runs as root, bubblewrap runs as an unprivileged uid, which
// may not be allowed to walk to the sources (a repository under /root). The
// child that will become bwrap enters a private mount namespace, opens each
// source again with the same no-symlink walk (a descriptor from the old
// namespace cannot be bound in the new one), and binds it under a fresh tmpfs
// at a path every uid can walk; bwrap then binds from there. The host's mounts
// never change.
#pragma once

#include <string>
#include <vector>

#include "sandbox/disk_image.hpp"
#include "sandbox/overlay.hpp"

namespace mullet::sandbox {

struct StagedBind {
  std::string source_path;
  std::string staged_path;  // under staging_root
  bool is_directory;
  int fd = -1;  // set by the child in its copy: the source opened in its namespace
};

// An empty directory on the host; only our private mount namespace ever has
// anything mounted on it. Not under /tmp, where the bwrap we run may live.
inline constexpr const char* staging_mountpoint = "/run/git-mullet-stage";
inline constexpr const char* staging_root = "/run/git-mullet-stage/binds";

// Creates the mount point (root only), refusing one that is not a plain
// directory.
void prepare_staging_mountpoint();

// The staged path for the n-th bind.
std::string staged_path(std::size_t index);

// What the child stages: the binds, and the work tree's overlay when there
// is one (and the disk image below it), mounted on its source before the
// binds are opened.
struct Staging {
  std::vector<StagedBind> binds;
  // The disk image (disk_image.hpp), mounted first: the overlay's upper and
  // work dirs and the home are in it.
  LoopMountChild* disk = nullptr;
  OverlayChild* overlay = nullptr;
  // When >= 0: a mount namespace (a fuse-overlayfs daemon's, the work tree
  // mounted in it) the child joins before making its own from it.
  int join_mount_ns = -1;
};

// Runs in the forked child (root only) as SpawnOptions::child_setup, with a
// Staging* as its data; allocates nothing. False with errno set on failure.
bool stage_binds_in_child(void* binds);

}  // namespace mullet::sandbox
