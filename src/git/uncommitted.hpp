// The user's uncommitted work, as a base a job can start from.
//
// Everything runs in a scratch git dir of ours (a private temporary
// directory, removed afterwards) whose index is a copy of the user's and whose objects are
// the user's (GIT_OBJECT_DIRECTORY), through the hardened git CLI: no hooks,
// no user config, no filters or line-ending conversion (the clone's neutral
// attributes), so the user's index, HEAD, work tree, stash and refs are never
// touched and nothing of the repository's runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "git/authorship.hpp"
#include "git/repository.hpp"

namespace mullet::git {

// True when `repo`'s work tree or index differs from `head`: tracked changes,
// staged or not, or untracked files that are not ignored (git status, with
// dirty submodule contents left aside). False for a bare repository.
bool has_uncommitted_changes(const Repository& repo, const git_oid& head);

// A new commit whose parent is `head` and whose tree is `head`'s plus the
// tracked changes (deletions included) plus the untracked files that are not
// ignored, as bytes in the work tree (symlinks as symlinks, never followed).
// nullopt when that tree is `head`'s (nothing to include). A file to include
// larger than `max_file_bytes` is a usage error naming it. Authored by
// `identity` where set (else git-mullet's signature).
std::optional<git_oid> commit_uncommitted_changes(const Repository& repo, const git_oid& head,
                                                  std::uint64_t max_file_bytes, const UserIdentity& identity);

}  // namespace mullet::git
