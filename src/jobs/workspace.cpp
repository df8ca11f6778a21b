#include "jobs/workspace.hpp"

#include <unistd.h>

#include "git/base_objects.hpp"
#include "git/clone.hpp"
#include "util/fs.hpp"

namespace mullet::jobs {

void make_private_job_dir(const git::Repository& repo, const std::string& id, const std::string& below) {
  const std::string common = util::real_path(repo.common_dir());
  util::make_private_dirs(common, "mullet/jobs/" + id + (below.empty() ? "" : "/" + below));
}

void make_sandbox_clone(const git::Repository& repo, const git_oid& commit, const SandboxDirs& dirs,
                        std::optional<uid_t> sandbox_uid, const SandboxObjects& objects) {
  git::create_private_clone(repo, commit, {dirs.git_dir, dirs.work_tree}, sandbox::inside::git_dir);
  if (objects.history != config::History::all) {
    git::add_objects_beyond_base(repo, dirs.git_dir, commit, objects.base);
    if (!objects.shallow.empty()) util::write_file(dirs.git_dir + "/shallow", objects.shallow);
  }
  util::make_dirs(dirs.home, 0700);
  // A home kept from an interrupted run (resume) may hold what its
  // sandbox left there.
  util::strip_unsafe_modes(dirs.home);
  if (sandbox_uid) {
    util::chown_tree(dirs.work_tree, *sandbox_uid, *sandbox_uid);
    util::chown_tree(dirs.home, *sandbox_uid, *sandbox_uid);
    git::refresh_index_after_chown({dirs.git_dir, dirs.work_tree});
  }
}

void write_executor_files(const JobPaths& paths, const std::vector<executors::GeneratedFile>& files) {
  if (files.empty()) return;
  util::make_dirs(paths.executor_files, 0755);
  for (const auto& file : files) {
    const std::string path = paths.executor_files + "/" + file.name;
    if (util::exists(path)) ::unlink(path.c_str());
    util::write_file(path, file.content, 0444);
  }
}

std::vector<std::string> existing_top_level_dirs(const JobPaths& paths, const std::vector<std::string>& names) {
  std::vector<std::string> found;
  for (const auto& name : names) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == ".git") continue;
    if (util::is_directory(paths.work_tree + "/" + name)) found.push_back(name);
  }
  return found;
}

std::vector<sandbox::Mount> read_only_mounts(const JobPaths& paths, const std::vector<std::string>& dirs) {
  std::vector<sandbox::Mount> mounts;
  for (const auto& dir : dirs) {
    mounts.push_back({sandbox::MountKind::read_only_bind, paths.work_tree + "/" + dir,
                      std::string(sandbox::inside::work_tree) + "/" + dir});
  }
  return mounts;
}

}  // namespace mullet::jobs
