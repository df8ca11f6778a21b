// Recording a work tree the worker wrote as a git tree, from the outside.
//
// The walk opens every entry relative to its parent directory with O_NOFOLLOW,
// so no symlink is followed and no FIFO or device is ever opened; file bytes
// are stored exactly as they are (no filters, no line-ending conversion).
// Files whose stat data still matches the clone's index reuse the object id
// git computed at checkout, which keeps large unchanged trees cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "git/authorship.hpp"
#include "git/clone.hpp"
#include "git/repository.hpp"

namespace mullet::git {

// A worker can make a warning of every file it leaves (a FIFO each); the
// record keeps fewer still.
inline constexpr std::size_t max_snapshot_warnings = 1000;

struct SnapshotOptions {
  // Top-level directories never recorded (dependency directories); what the
  // base had there is kept as it was.
  std::vector<std::string> excluded_top_level_dirs;
  // The base commit's tree, where excluded directories are taken from.
  std::optional<git_oid> base_tree;
  // Larger files are left out with a warning (a sparse file can claim a
  // terabyte it never wrote).
  std::uint64_t max_file_bytes = 100ULL << 20U;
  // What new objects may cost the user's disk in all (limits.disk_mb; 0: no
  // cap): each new blob its loose file's allocated size, at least
  // util::min_entry_bytes. Past it, every further new file or symlink is
  // left out, with one warning. The disk watch counts a tree by the same
  // measure, so only a worker that outran it meets this cap.
  std::uint64_t max_new_object_bytes = 0;
};

struct Snapshot {
  git_oid tree{};
  std::vector<std::string> warnings;  // entries left out, and why (at most max_snapshot_warnings)
  std::size_t warnings_not_kept = 0;  // further warnings, only counted
  std::size_t files_hashed = 0;
  // Files whose stat data matched the clone's index (take_snapshot only: an
  // upper snapshot never looks at an unchanged file).
  std::size_t files_reused = 0;
};

// Writes the work tree's blobs and trees into the user's object database and
// returns the root tree. The clone's .git file and any nested .git are never
// recorded; untracked paths that .gitignore ignores are left out.
Snapshot take_snapshot(const Repository& user_repo, const ClonePaths& clone, const SnapshotOptions& options);

// Creates (without moving any ref) a commit of `tree` whose parent is `parent`,
// authored and committed by `identity` where the user set one (else
// git-mullet's own signature).
git_oid commit_snapshot(const Repository& user_repo, const git_oid& tree, const git_oid& parent,
                        const std::string& message, const UserIdentity& identity);

}  // namespace mullet::git
