// Recording a work tree that is a kernel overlay (a pristine checkout of the
// base as its lower dir, the job's own upper dir) from the base commit's tree
// and the upper dir alone, as take_snapshot would record the merged view.
//
// Only what the worker changed is read: an upper entry that is a character
// device 0/0 is a whiteout (the path is deleted); an upper directory whose
// `opaque_xattr` is "y" replaces the base's directory; any other upper
// directory is merged with the base's subtree; a file or symlink replaces what
// the base had. Subtrees the upper dir does not touch keep the base's tree ids
// (never walked, never hashed). The upper dir is walked with the same rules as
// take_snapshot (O_NOFOLLOW, symlinks as symlinks, special files left out,
// .git never recorded, limits.file_mb, untracked ignored paths left out).
// The mount is expected without redirects or metacopy (redirect_dir=off as
// root; with userxattr kernel 6.18 refuses that and wants
// redirect_dir=nofollow; metacopy=off, index=off): no redirect or metacopy
// xattr is ever read, so a worker's own cannot redirect the snapshot.
#pragma once

#include <string>

#include "git/repository.hpp"
#include "git/snapshot.hpp"

namespace mullet::git {

// The opaque xattr names overlayfs uses: as root, and in a user namespace
// (mount option userxattr).
inline constexpr const char* overlay_opaque_xattr_root = "trusted.overlay.opaque";
inline constexpr const char* overlay_opaque_xattr_user = "user.overlay.opaque";
// fuse-overlayfs's upper dir (1.10, its daemon not root): a character
// device 0/0 deletes; a directory is opaque by the first of
// trusted.overlay.opaque, user.fuseoverlayfs.opaque it has (value starting
// with "y"), and its `.wh..wh..opq` and `.wh..opq` markers are left out. Any
// other `.wh.` name, and user.overlay.opaque on a directory, refuse the
// snapshot (refused_error): the worker made them, and fuse-overlayfs shows
// them to the worker otherwise than it reads them afterwards.
inline constexpr const char* fuse_overlayfs_upper = "user.fuseoverlayfs.opaque";

// The first path of `commit`'s tree with a name starting with `.wh.`, or
// empty. fuse-overlayfs reads such a name of its lower layer as a deletion,
// so the worker would see less than the base holds: no fuse-overlayfs work
// tree for such a base.
std::string fuse_reserved_name(const Repository& repo, const git_oid& commit);

// `base_tree` is the tree the lower dir holds; `upper_dir` the overlay's upper
// dir (host path); `opaque_xattr` the name the mount used (one of the two
// above) - no other name is ever honoured - or fuse_overlayfs_upper. options.base_tree, when set, must
// equal `base_tree` (excluded top-level directories keep the base's entries).
Snapshot take_upper_snapshot(const Repository& user_repo, const git_oid& base_tree, const std::string& upper_dir,
                             const std::string& opaque_xattr, const SnapshotOptions& options);

}  // namespace mullet::git
