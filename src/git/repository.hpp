// The user's repository: found from the current directory, opened with
// libgit2 (which runs no hooks and, after initialise_libgit2(), reads no
// system or global config).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "git/handles.hpp"

namespace mullet::git {

// Git environment variables that move where objects, refs, the index or
// history live. Repository::discover refuses to start when one is set (even
// empty): GIT_DIR, GIT_CEILING_DIRECTORIES and GIT_DISCOVERY_ACROSS_FILESYSTEM
// choose the repository and are honoured; every other git variable
// (GIT_WORK_TREE too: nothing of ours uses a work tree) has no effect (our git runs with an environment
// built from scratch, libgit2 reads no config from the environment).
const std::vector<std::string>& refused_git_environment();
void check_git_environment();

class Repository {
 public:
  // Finds the repository containing `start_dir` (honours GIT_DIR as git does
  // for `git -C`/`--git-dir`). Throws a usage error when there is none, or
  // when a refused git environment variable is set.
  static Repository discover(const std::string& start_dir);
  // Opens a git dir we made ourselves: no discovery, no .git file.
  static Repository open_git_dir(const std::string& git_dir);

  git_repository* get() const { return m_repo.get(); }
  std::string git_dir() const;     // this checkout's git dir
  std::string common_dir() const;  // shared by all worktrees: refs, objects
  std::string objects_dir() const;
  // The work tree this checkout has (no trailing slash); nullopt when bare.
  std::optional<std::string> work_tree() const;

  // Resolves a revision to a commit; throws a usage error naming `rev`.
  git_oid resolve_commit(const std::string& rev) const;
  // The commit HEAD points at; throws a usage error on an unborn HEAD.
  git_oid head_commit() const;
  git_oid tree_of(const git_oid& commit) const;
  // The content of `path` in `commit`'s tree; nullopt when there is no such
  // path. Throws a usage error naming it when it is not a regular file (a
  // directory, symlink or submodule) or is larger than `max_bytes`.
  std::optional<std::string> read_file_at(const git_oid& commit, const std::string& path, std::size_t max_bytes) const;
  std::string read_blob(const git_oid& blob) const;

  // What `git diff --shortstat from to` counts (no rename detection).
  struct ChangeCount {
    std::size_t files = 0;
    std::size_t insertions = 0;
    std::size_t deletions = 0;
  };
  ChangeCount count_changes(const git_oid& from_commit, const git_oid& to_commit) const;

 private:
  explicit Repository(RepositoryPtr repo) : m_repo(std::move(repo)) {}
  RepositoryPtr m_repo;
};

}  // namespace mullet::git
