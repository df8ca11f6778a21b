// A job's directories on the host, made ready for a sandbox: the private job
// directory, a clone with its home, the executor's files, and the dependency
// directories setup filled.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "executors/executor.hpp"
#include "git/repository.hpp"
#include "jobs/layout.hpp"
#include "jobs/sandbox_objects.hpp"
#include "sandbox/plan.hpp"

namespace mullet::jobs {

// The job's directory, or `below` it (a gate's): 0700 and ours, so no other
// local user, nor a sandbox's uid on the host, reaches in.
void make_private_job_dir(const git::Repository& repo, const std::string& id, const std::string& below = {});

// A private clone of `commit` and a home in `dirs`, owned by `sandbox_uid`
// when there is one (we run as root). Unless `objects` is the user's whole
// store, the clone's own objects get what `commit` reaches beyond the base
// (a resumed job's or a gate's snapshots), and its shallow file what
// `objects` says: git inside then needs nothing but the two.
void make_sandbox_clone(const git::Repository& repo, const git_oid& commit, const SandboxDirs& dirs,
                        std::optional<uid_t> sandbox_uid, const SandboxObjects& objects);

// How a job's work tree is made: an overlay of the base's pristine checkout,
// or a checkout of its own, and why.
struct WorkTreeChoice {
  bool overlay = false;
  bool fuse = false;    // the overlay served by fuse-overlayfs (as root only)
  std::string refused;  // set: [sandbox] work_tree asked for what cannot be had here; no job runs
  std::string why;
};

// `[sandbox] work_tree` ("checkout" forces a checkout of its own), then
// whether this kernel mounts an overlay as the job would (probed in a
// child, as root or in a user namespace of ours, over a scratch directory
// in the common git dir, removed afterwards), then whether fuse-overlayfs
// can serve one ("overlay" and "fuse-overlayfs" try only theirs).
WorkTreeChoice choose_work_tree(const git::Repository& repo, const config::Settings& settings);

// choose_work_tree, throwing its refusal (a job, run --dry-run).
WorkTreeChoice usable_work_tree(const git::Repository& repo, const config::Settings& settings);

// The worker's directories, made ready: with `overlay` and `commit` the
// base, an overlay of the base's pristine checkout (claimed for the job,
// built by the first job on it) with an upper dir of its own and a git dir
// whose index is the pristine's; otherwise (a resumed job's start beyond
// the base) make_sandbox_clone's full checkout.
SandboxDirs make_worker_tree(const git::Repository& repo, const git_oid& commit, const JobPaths& paths,
                             std::optional<uid_t> sandbox_uid, const SandboxObjects& objects,
                             const WorkTreeChoice& choice);

// Where make_worker_tree would put them, building nothing (run --dry-run).
SandboxDirs planned_worker_dirs(const git::Repository& repo, const JobPaths& paths, const git_oid& base,
                                std::optional<uid_t> sandbox_uid, const WorkTreeChoice& choice);

// The executor's generated files, read-only, where worker_phase binds them.
void write_executor_files(const JobPaths& paths, const std::vector<executors::GeneratedFile>& files);

// Which of `names` (dependency_dirs) are top-level directories of the work
// tree (an overlay's merged view: its upper dir, else the pristine tree
// unless the upper dir deleted the name).
std::vector<std::string> existing_top_level_dirs(const SandboxDirs& dirs, const std::vector<std::string>& names);

// The dependency directories setup created, bound read-only over the work
// tree for every later phase (from an overlay's upper dir, where setup wrote
// them).
std::vector<sandbox::Mount> read_only_mounts(const SandboxDirs& dirs, const std::vector<std::string>& names);

}  // namespace mullet::jobs
