#include "jobs/snapshot_attempt.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "git/snapshot.hpp"
#include "git/upper_snapshot.hpp"
#include "sandbox/plan.hpp"

namespace mullet::jobs {
namespace {

std::string snapshot_message(const JobRecord& record, int attempt, const std::string& model) {
  const bool by_shell = !record.attempts.empty() && record.attempts.back().kind == AttemptKind::shell;
  const git::ResultTrailers trailers{record.id, attempt, record.executor.name, model, record.executor.version,
                                     by_shell};
  return (record.title.empty() ? "git-mullet job " + record.id : record.title) +
         (attempt > 1 ? " (attempt " + std::to_string(attempt) + ")" : "") +
         (by_shell ? "\n\nMade in `git mullet shell --record` of job " + record.id + ".\n\n"
                   : "\n\nMade by git-mullet job " + record.id + " (executor: " + record.executor.name + ").\n\n") +
         git::result_trailers(trailers);
}

}  // namespace

git_oid snapshot_attempt(const git::Repository& repo, const SandboxDirs& dirs, JobRecord& record, int number,
                         const git_oid& parent, const std::vector<std::string>& dependency_dirs,
                         const SnapshotCaps& caps, const std::string& model) {
  const git_oid base = git::oid_from_string(record.base);
  const git_oid base_tree = repo.tree_of(base);
  const git::SnapshotOptions options{dependency_dirs, base_tree, caps.largest_file_bytes, caps.new_object_bytes};
  // The host never sees an overlay's merged view: its upper dir holds what
  // the worker changed, the pristine checkout is the base's tree.
  const git::Snapshot snapshot =
      dirs.overlay ? git::take_upper_snapshot(repo, base_tree, dirs.overlay->upper, dirs.opaque_xattr, options)
                   : git::take_snapshot(repo, {dirs.git_dir, dirs.work_tree}, options);
  std::vector<std::string> warnings = snapshot.warnings;
  if (snapshot.warnings_not_kept > 0) {
    warnings.push_back("... and " + std::to_string(snapshot.warnings_not_kept) + " more entries left out");
  }
  for (const auto& warning : warnings) {
    if (std::find(record.snapshot_warnings.begin(), record.snapshot_warnings.end(), warning) ==
        record.snapshot_warnings.end()) {
      record.snapshot_warnings.push_back(warning);
    }
  }
  git::reset_git_file(written_tree(dirs), sandbox::inside::git_dir);
  spdlog::debug("snapshot of job {}: {} files unchanged since checkout, {} read", record.id, snapshot.files_reused,
                snapshot.files_hashed);
  if (git_oid_cmp(&snapshot.tree, &base_tree) == 0) {
    record.result.clear();
    return base;
  }
  const git_oid commit = git::commit_snapshot(repo, snapshot.tree, parent, snapshot_message(record, number, model),
                                              git::user_identity(repo));
  record.attempts.back().result = git::oid_to_string(commit);
  record.result = record.attempts.back().result;
  return commit;
}

}  // namespace mullet::jobs
