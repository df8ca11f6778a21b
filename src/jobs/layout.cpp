#include "jobs/layout.hpp"

#include <git2.h>

#include "git/handles.hpp"
#include "jobs/id.hpp"
#include "jobs/stale_cgroups.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {

std::string repository_key(const git::Repository& repo) {
  const std::string path = util::real_path(repo.common_dir());
  git_oid oid;
  if (git_odb_hash(&oid, path.data(), path.size(), GIT_OBJECT_BLOB) < 0) {
    throw failure("cannot hash the repository's path " + util::terminal_safe(path));
  }
  return git::oid_to_string(oid).substr(0, repository_key_length);
}

std::string jobs_directory(const git::Repository& repo) {
  return util::real_path(repo.common_dir()) + "/mullet/jobs";
}

namespace {

JobPaths paths_below(const std::string& root) {
  JobPaths paths;
  paths.root = root;
  paths.git_dir = paths.root + "/git";
  paths.work_tree = paths.root + "/work";
  paths.upper = paths.root + "/upper";
  paths.overlay_work = paths.root + "/overlay-work";
  paths.fuse_layers = paths.root + "/fuse-layers";
  paths.home = paths.root + "/home";
  paths.disk_image = paths.root + "/disk.img";
  paths.disk_mount = paths.root + "/disk";
  paths.worker_log = paths.root + "/worker.log";
  paths.events_log = paths.root + "/events.jsonl";
  paths.executor_files = paths.root + "/etc";
  paths.empty_file = paths.root + "/empty";
  paths.gate = paths.root + "/gate";
  return paths;
}

}  // namespace

JobPaths job_paths(const git::Repository& repo, const std::string& id) {
  JobPaths paths = paths_below(jobs_directory(repo) + "/" + id);
  paths.cgroup_name = job_cgroup_name(repository_key(repo), id);
  return paths;
}

JobPaths node_paths(const git::Repository& repo, const std::string& id, int number) {
  JobPaths paths = paths_below(jobs_directory(repo) + "/" + id + "/nodes/" + std::to_string(number));
  paths.below = "nodes/" + std::to_string(number);
  paths.cgroup_name = node_cgroup_name(repository_key(repo), id, number);
  return paths;
}

SandboxDirs worker_dirs(const JobPaths& paths) {
  return {paths.work_tree, paths.git_dir, paths.home, std::nullopt, {}};
}

std::string written_tree(const SandboxDirs& dirs) {
  return dirs.overlay ? dirs.overlay->upper : dirs.work_tree;
}

SandboxDirs gate_dirs(const JobPaths& paths) {
  return {paths.gate + "/work", paths.gate + "/git", paths.gate + "/home", std::nullopt, {}};
}

}  // namespace mullet::jobs
