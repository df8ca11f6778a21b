// The private clone a job works in: a git dir of our own (which the worker
// only ever sees read-only) and a separate work tree checked out at the base.
//
// The clone borrows the user's objects through GIT_ALTERNATE_OBJECT_DIRECTORIES
// at run time instead of an alternates file, so the same git dir works on the
// host and inside the sandbox, where the objects sit at another path.
#pragma once

#include <string>

#include "git/repository.hpp"

namespace mullet::git {

struct ClonePaths {
  std::string git_dir;
  std::string work_tree;
};

// Contents of info/attributes in every clone: checkout and snapshot both store
// bytes exactly as they are, whatever .gitattributes the tree carries.
inline constexpr const char* neutral_attributes = "* -text -eol -filter -ident -working-tree-encoding\n";

// Writes what every git dir of ours holds, fixed rather than inherited: HEAD
// detached at `head`, a config with the checkout settings and no reflogs,
// neutral info/attributes, each file with `file_mode`. `dir` and its
// objects/, refs/ and info/ exist afterwards.
void write_fixed_git_dir(const std::string& dir, const git_oid& head, mode_t file_mode);

// Creates the git dir and checks the base out into the (new, empty) work tree
// with git's parallel checkout. `git_dir_as_seen_inside` is what the work
// tree's .git file names, so git finds its git dir inside the sandbox.
void create_private_clone(const Repository& user_repo, const git_oid& base, const ClonePaths& paths,
                          const std::string& git_dir_as_seen_inside);

// Replaces whatever the work tree's .git is (the worker may have rewritten it
// to point at a git dir of its own) with a file naming `git_dir`, without
// following any symlink. Callers pass the git dir as the next sandbox sees it:
// the next attempt's worker runs git there, and a host path would both break
// it and tell the worker where the repository lives.
void reset_git_file(const std::string& work_tree, const std::string& git_dir);

// After the work tree changed owner (git-mullet as root hands it to the
// sandbox's uid), records the new ctimes in the clone's index, so the snapshot
// can still tell unchanged files by their stat data instead of re-reading
// every file. Only entries whose size, mtime and inode still match are
// updated; nothing else may have touched the work tree since the checkout.
void refresh_index_after_chown(const ClonePaths& paths);

}  // namespace mullet::git
