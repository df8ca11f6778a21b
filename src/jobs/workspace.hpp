// A job's directories on the host, made ready for a sandbox: the private job
// directory, a clone with its home, the executor's files, and the dependency
// directories setup filled.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

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

// The executor's generated files, read-only, where worker_phase binds them.
void write_executor_files(const JobPaths& paths, const std::vector<executors::GeneratedFile>& files);

// Which of `names` (dependency_dirs) are top-level directories of the work tree.
std::vector<std::string> existing_top_level_dirs(const JobPaths& paths, const std::vector<std::string>& names);

// The dependency directories setup created, bound read-only over the work
// tree for every later phase.
std::vector<sandbox::Mount> read_only_mounts(const JobPaths& paths, const std::vector<std::string>& dirs);

}  // namespace mullet::jobs
