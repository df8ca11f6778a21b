// RAII ownership for libgit2 objects, and the one place libgit2 errors become
// ours.
#pragma once

#include <git2.h>

#include <memory>
#include <string>
#include <string_view>

namespace mullet::git {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* pointer) const { Free(pointer); }
};
template <typename T, void (*Free)(T*)>
using Owned = std::unique_ptr<T, Deleter<T, Free>>;

using RepositoryPtr = Owned<git_repository, git_repository_free>;
using ReferencePtr = Owned<git_reference, git_reference_free>;
using ObjectPtr = Owned<git_object, git_object_free>;
using CommitPtr = Owned<git_commit, git_commit_free>;
using TreePtr = Owned<git_tree, git_tree_free>;
using TreeEntryPtr = Owned<git_tree_entry, git_tree_entry_free>;
using BlobPtr = Owned<git_blob, git_blob_free>;
using IndexPtr = Owned<git_index, git_index_free>;
using OdbPtr = Owned<git_odb, git_odb_free>;
using TreeBuilderPtr = Owned<git_treebuilder, git_treebuilder_free>;
using SignaturePtr = Owned<git_signature, git_signature_free>;
using ReferenceIteratorPtr = Owned<git_reference_iterator, git_reference_iterator_free>;
using ReflogPtr = Owned<git_reflog, git_reflog_free>;

// The one identity git-mullet signs its own commits and reflog entries with
// (snapshots, job records, discards), stamped now.
SignaturePtr mullet_signature();

// Throws mullet::Error with `what` and libgit2's message when rc < 0.
void check(int rc, std::string_view what);
std::string last_error_message();

// Once per process: initialise libgit2 with every configuration search path
// emptied, so no system, global or XDG config is ever read.
void initialise_libgit2();

std::string oid_to_string(const git_oid& oid);
git_oid oid_from_string(const std::string& hex);

}  // namespace mullet::git
