// A work tree served by fuse-overlayfs (Overlay::fuse), for where the kernel
// refuses an overlay; as root only.
//
// The daemon is a Child the runner owns (killed when the sandbox ends; its
// death signal, set after the uid change, kills it with us). Its child, still
// root, enters a mount namespace of its own, binds the layers on a tmpfs
// over the staging mount point (the lower one read-only; each opened without
// following symlinks), mounts a fuse file system on the work tree's mount
// point there (fd= a /dev/fuse descriptor we opened, user_id/group_id the
// sandbox's, default_permissions so the kernel checks modes; allow_other, as
// bwrap's staging child is root when it opens the mount to bind it, and no
// process outside the namespaces we make can reach the mount), then drops to
// the sandbox's uid and execs fuse-overlayfs on /dev/fd/<that descriptor>.
// Its -o names only those fixed staging paths and numbers: no path of the
// user's reaches it (no ',' ':' '=' or backslash injection). squash_to_uid/gid,
// noacl, noxattrs=1 (the worker reads and sets no xattr, so not
// user.overlay.opaque, which fuse-overlayfs would honour). fuse-overlayfs
// resolves every path inside a layer (openat2 RESOLVE_IN_ROOT), makes no
// redirects and no metacopy; its upper dir is read by take_upper_snapshot's
// fuse rules, which refuse what it reads otherwise than it showed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sandbox/plan.hpp"
#include "util/fd.hpp"
#include "util/process.hpp"

namespace mullet::sandbox {

struct FuseDaemon {
  util::Child daemon;
  UniqueFd mount_ns;  // its mount namespace, the work tree mounted on `mount_point` there
};

// Starts fuse-overlayfs for `overlay` on `mount_point`, serving as `uid`/`gid`,
// in the sandbox's cgroup when it has one (`cgroup_procs_fds`, as
// util::SpawnOptions takes them): the daemon does the worker's writes, so
// its memory and threads count against the job's limits.
FuseDaemon start_fuse_overlay(const Overlay& overlay, const std::string& mount_point, uid_t uid, gid_t gid,
                              const std::vector<int>& cgroup_procs_fds);

// Why fuse-overlayfs cannot serve a job's work tree here, or empty: it is
// installed and /dev/fuse opens (as root; an unprivileged user is refused).
std::string probe_fuse_overlay();

}  // namespace mullet::sandbox
