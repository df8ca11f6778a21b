// The objects a sandbox reads instead of the user's whole object store: a
// pack of exactly what the base commit reaches (its ancestry, or only the
// commit and its tree), made once per base by our hardened git and shared by
// every job on that base, at
//   <common git dir>/mullet/bases/<base>-<base|none>/objects/pack/
// The entry is built in a temporary directory beside it and renamed into
// place, so jobs that race on one base each build and one rename wins; an
// entry is never changed afterwards, so removing the whole bases directory
// while no job runs is always safe (the next job builds it again).
//
// Objects a clone needs beyond the base's (a resumed job's snapshots, the
// attempt's snapshot a gate checks) go into a small pack in that clone's own
// git dir, so nothing else of the user's store is ever bound into a sandbox.
#pragma once

#include <string>

#include "git/repository.hpp"

namespace mullet::git {

enum class BaseHistory {
  ancestry,     // the base commit and everything it reaches
  commit_only,  // the base commit and its tree: a clone shallow at the base
};

struct BaseObjects {
  std::string objects_dir;  // the entry's objects directory (a real path)
  // What each clone's `shallow` file holds, so git inside never looks for a
  // parent the pack does not have: the base for commit_only, and for
  // ancestry the user's shallow commits the base reaches (when the user's
  // repository is itself shallow). Empty: no shallow file.
  std::string shallow;
};

// Refuses (exit 3) unless `path` is a directory, not a symlink, owned by the
// user running git-mullet; `entry` is what the hint says to remove.
void check_directory_of_ours(const std::string& path, const std::string& entry);

// The entry's name below mullet/bases/: "<base>-base" or "<base>-none".
std::string base_objects_entry_name(const git_oid& base, BaseHistory history);
// Where the entry for `base` is or will be, without looking.
std::string base_objects_dir(const Repository& repo, const git_oid& base, BaseHistory history);

// The entry for `base`: reused when it exists (after checking that it is a
// directory of ours, not a symlink, holding a pack), built when it does not.
// Throws a refusal for an entry that is not ours, a failure when git cannot
// build the pack (objects missing from a partial clone, say).
BaseObjects ensure_base_objects(const Repository& repo, const git_oid& base, BaseHistory history);

// Packs the objects `commit` reaches that `base` does not into
// `clone_git_dir`/objects/pack, read from the user's store (nothing when
// `commit` is `base`). `base` must be an ancestor of `commit`.
void add_objects_beyond_base(const Repository& repo, const std::string& clone_git_dir, const git_oid& commit,
                             const git_oid& base);

}  // namespace mullet::git
