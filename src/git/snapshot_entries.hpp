// What both snapshots do with one entry the worker left: take_snapshot walks
// a whole work tree, take_upper_snapshot an overlay's upper dir over the
// base's tree; each decides what is tracked and what is ignored, and records
// every directory, file and symlink it keeps through this one mechanism.
// Every entry is opened relative to its directory with O_NOFOLLOW: no symlink
// is followed, no FIFO or device is opened, bytes are stored as they are.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "git/handles.hpp"
#include "git/repository.hpp"
#include "git/snapshot.hpp"
#include "util/fd.hpp"

namespace mullet::git::detail {

// An entry of a tree: its object id and mode.
using TreeEntry = std::pair<git_oid, git_filemode_t>;

// A .gitignore larger than this (or not a regular file) is not read: no
// ignore rule applies below its directory.
inline constexpr off_t max_gitignore_bytes = 1 << 20;

class EntryRecorder {
 public:
  EntryRecorder(const Repository& user_repo, const SnapshotOptions& options, Snapshot& result);

  const Repository& repo() const { return m_user_repo; }

  // False, with a warning, when `rel` (a directory, "" or ending in '/') is
  // nested deeper than the depth limit: it is left out.
  bool within_depth(const std::string& rel, int depth);
  // The names in a directory, sorted. Throws when the listing stopped early:
  // what it missed would become deletions.
  std::vector<std::string> list(int dir_fd, const std::string& rel);
  // `.git` is never recorded (the clone's own at the top, a nested one with a
  // warning below it).
  bool is_git_dir_entry(const std::string& name, const std::string& rel);
  // The warning for a .gitignore that is not a regular file of at most 1 MiB.
  void warn_unusable_gitignore(const std::string& rel);
  // The top-level directory `name` is a dependency directory: what the base
  // had there (nothing, when nothing) is recorded instead.
  bool is_excluded_top_level(const std::string& rel, const std::string& name) const;
  std::optional<TreeEntry> base_top_level_entry(const std::string& name) const;

  // Opens the directory `name` the worker left (made readable if needed);
  // throws when it cannot: a directory never read must not become a deletion.
  UniqueFd open_directory(int dir_fd, const std::string& name, const std::string& path);
  // Hashes the regular file `name` (`info` its lstat) into the user's
  // objects; nullopt, with a warning, when it is over limits.file_mb.
  std::optional<TreeEntry> store_file(int dir_fd, const std::string& name, const std::string& path,
                                      const struct stat& info);
  std::optional<TreeEntry> store_symlink(int dir_fd, const std::string& name, const std::string& path,
                                         const struct stat& info);
  void warn_special_file(const std::string& path);
  void warn_uninspectable(const std::string& path, int error);
  // 100755 when the owner may execute the file, else 100644.
  static git_filemode_t file_mode(const struct stat& info);

  // A tree builder, empty or starting from `source`'s entries.
  TreeBuilderPtr new_builder(const git_tree* source = nullptr);
  // Inserts (replacing what `name` held); false, with a warning, when git
  // cannot record the name.
  bool insert(git_treebuilder* builder, const std::string& name, const std::string& path, const TreeEntry& entry);
  // Writes the tree; nullopt when it has no entries (git records no empty
  // directory).
  std::optional<git_oid> write(git_treebuilder* builder);
  git_oid empty_tree();

  void warn(const std::string& path, const std::string& why);

 private:
  std::optional<git_oid> hash_file(int fd, std::size_t size, const std::string& path);
  // Writes a blob held in memory, unless the new-object budget is spent.
  std::optional<git_oid> write_blob(const std::string& content, const std::string& path);
  // False, with the one warning, once new objects have cost
  // SnapshotOptions::max_new_object_bytes.
  bool within_budget(const std::string& path);
  // Charges the loose object `oid` was written as (it was not there before).
  void charge(const git_oid& oid);

  const Repository& m_user_repo;
  const SnapshotOptions& m_options;
  Snapshot& m_result;
  OdbPtr m_odb;
  TreePtr m_base_tree;
  std::string m_objects_dir;  // where the user's loose objects are written
  std::uint64_t m_new_object_bytes = 0;
  bool m_budget_spent = false;
};

// Whether `repo` (which has a work tree) ignores `path` ("dir/" for a
// directory), by the .gitignore files its work tree holds.
bool path_is_ignored(git_repository* repo, const std::string& path);

}  // namespace mullet::git::detail
