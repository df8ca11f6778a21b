// An attempt's snapshot: what the worker left in the clone, as a commit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "git/repository.hpp"
#include "jobs/layout.hpp"
#include "jobs/record.hpp"

namespace mullet::jobs {

// What a snapshot may take: limits.file_mb and limits.disk_mb.
struct SnapshotCaps {
  std::uint64_t largest_file_bytes = 0;
  std::uint64_t new_object_bytes = 0;
};

// Snapshots the work tree of `dirs` (an overlay's: from its upper dir and
// the base's tree, git::take_upper_snapshot) as attempt `number`'s commit on top of
// `parent` (the previous attempt's, or the base), leaving out the dependency
// directories setup created, files larger than `caps.largest_file_bytes`,
// and new files past what `caps.new_object_bytes` allows in the user's objects.
// Notes the commit and the snapshot's warnings in `record` (the caller saves
// it). Returns the commit, or the base when the tree is still the base's.
// The commit is the user's (git::user_identity) and carries the job's
// trailers (git::result_trailers), `model` among them when not empty.
git_oid snapshot_attempt(const git::Repository& repo, const SandboxDirs& dirs, JobRecord& record, int number,
                         const git_oid& parent, const std::vector<std::string>& dependency_dirs,
                         const SnapshotCaps& caps, const std::string& model = {});

}  // namespace mullet::jobs
