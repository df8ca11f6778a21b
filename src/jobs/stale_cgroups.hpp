// The sandboxes' cgroups (sandbox/cgroup.hpp) of jobs that no longer run: a
// git-mullet killed mid-run leaves its job's cgroup behind, and the next
// run or discard in the repository removes it.
#pragma once

#include <optional>
#include <string>

#include "jobs/store.hpp"

namespace mullet::jobs {

// Cgroups are the host's, shared by every repository, and a record's id is
// only unique within its repository (a copied or fetched record has another
// repository's): each name starts with its repository's key
// (jobs/layout.hpp: repository_key), and a repository sweeps and removes
// only its own.

// Whose cgroup a name under <hierarchy>/git-mullet/ is: "<key>.<id>" or
// "<key>.<id>-<N>" (a node) is a job's; "<key>.<id>-shell-<pid>" a `shell`
// sandbox's, which lives as long as that process. nullopt: no name of ours.
struct CgroupOwner {
  std::string repository;  // its repository_key
  std::string job;
  int shell_pid = 0;  // 0: the job's own sandboxes
  bool operator==(const CgroupOwner&) const = default;
};
std::optional<CgroupOwner> cgroup_owner(const std::string& name);

// The cgroup names of job `id` of the repository whose key is `key`, and of
// its node `number`.
std::string job_cgroup_name(const std::string& key, const std::string& id);
std::string node_cgroup_name(const std::string& key, const std::string& id, int number);
// The cgroup name of a `shell` sandbox over job `id`, run by this process.
std::string shell_cgroup_name(const std::string& key, const std::string& id);

// Removes (killing what is left inside) every cgroup of a job of this
// repository that is not running, and of a shell whose process is gone.
// Another repository's cgroups, and those of jobs this store does not know,
// stay unless they are idle (empty, made over a minute ago:
// sandbox/cgroup.hpp), as a deleted repository's are.
// `setting`: the user's [sandbox] cgroup ("off" still sweeps what "auto"
// would have made).
void sweep_stale_cgroups(const git::Repository& repo, const JobStore& store, const std::string& setting);

// Removes job `id`'s cgroups (its own and its nodes') in this repository,
// for discard.
void remove_job_cgroups(const git::Repository& repo, const std::string& id, const std::string& setting);

}  // namespace mullet::jobs
