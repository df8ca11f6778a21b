#include "jobs/workspace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "git/base_objects.hpp"
#include "git/clone.hpp"
#include "git/pristine.hpp"
#include "git/upper_snapshot.hpp"
#include "sandbox/overlay.hpp"
#include "util/error.hpp"
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

namespace {

// Whether `name` is a directory in the work tree as the sandbox sees it.
bool is_directory_inside(const SandboxDirs& dirs, const std::string& name) {
  if (!dirs.overlay) return util::is_directory(dirs.work_tree + "/" + name);
  struct stat upper {};
  if (::lstat((dirs.overlay->upper + "/" + name).c_str(), &upper) == 0) return S_ISDIR(upper.st_mode);
  return util::is_directory(dirs.overlay->lower + "/" + name);
}

}  // namespace

std::vector<std::string> existing_top_level_dirs(const SandboxDirs& dirs, const std::vector<std::string>& names) {
  std::vector<std::string> found;
  for (const auto& name : names) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == ".git") continue;
    if (is_directory_inside(dirs, name)) found.push_back(name);
  }
  return found;
}

std::vector<sandbox::Mount> read_only_mounts(const SandboxDirs& dirs, const std::vector<std::string>& names) {
  std::vector<sandbox::Mount> mounts;
  for (const auto& name : names) {
    mounts.push_back({sandbox::MountKind::read_only_bind, written_tree(dirs) + "/" + name,
                      std::string(sandbox::inside::work_tree) + "/" + name});
  }
  return mounts;
}

WorkTreeChoice choose_work_tree(const git::Repository& repo, const config::Settings& settings) {
  if (settings.sandbox.work_tree == config::WorkTree::checkout) {
    return {false, "a checkout of its own: [sandbox] work_tree = \"checkout\""};
  }
  const bool as_root = ::geteuid() == 0;
  // On the file system the job's directories are on; what the probe makes
  // there is gone when it returns (run --dry-run and doctor leave nothing).
  std::string refused;
  try {
    refused = sandbox::probe_overlay(util::real_path(repo.common_dir()), !as_root);
  } catch (const Error& error) {
    refused = error.what();
  }
  if (!refused.empty()) return {false, "a checkout of its own: this kernel refused the overlay (" + refused + ")"};
  return {true, std::string("an overlay of the base's pristine checkout (kernel overlayfs, ") +
                    (as_root ? "mounted as root in the staging namespace" : "in a user namespace of ours") + ")"};
}

SandboxDirs planned_worker_dirs(const git::Repository& repo, const JobPaths& paths, const git_oid& base,
                                std::optional<uid_t> sandbox_uid, bool overlay) {
  SandboxDirs dirs = worker_dirs(paths);
  if (!overlay) return dirs;
  const std::string entry =
      git::pristine_directory(repo) + "/" + git::pristine_entry_name(base, sandbox_uid.value_or(::geteuid()));
  dirs.overlay = sandbox::Overlay{entry + "/tree", paths.upper, paths.overlay_work};
  dirs.opaque_xattr = sandbox_uid ? git::overlay_opaque_xattr_root : git::overlay_opaque_xattr_user;
  return dirs;
}

SandboxDirs make_worker_tree(const git::Repository& repo, const git_oid& commit, const JobPaths& paths,
                             std::optional<uid_t> sandbox_uid, const SandboxObjects& objects, bool overlay) {
  SandboxDirs dirs = worker_dirs(paths);
  // What an earlier run (resume) left of an overlay is not trusted.
  for (const auto* dir : {&paths.upper, &paths.overlay_work}) util::remove_tree(*dir);
  ::unlink((paths.root + "/pristine").c_str());
  if (!overlay || git_oid_cmp(&commit, &objects.base) != 0) {
    make_sandbox_clone(repo, commit, dirs, sandbox_uid, objects);
    return dirs;
  }
  const uid_t owner = sandbox_uid.value_or(::geteuid());
  const git::Pristine pristine = git::claim_pristine(repo, commit, owner, paths.root, sandbox::inside::git_dir);
  for (const char* dir : {"/objects/info", "/objects/pack", "/refs/heads", "/refs/tags"}) {
    util::make_dirs(dirs.git_dir + dir);
  }
  git::write_fixed_git_dir(dirs.git_dir, commit, 0644);
  util::write_file(dirs.git_dir + "/index", util::read_file(pristine.index), 0644);
  if (objects.history != config::History::all && !objects.shallow.empty()) {
    util::write_file(dirs.git_dir + "/shallow", objects.shallow);
  }
  util::make_dirs(dirs.work_tree, 0755);
  util::make_dirs(paths.upper, 0755);
  util::make_dirs(paths.overlay_work, 0700);
  util::make_dirs(dirs.home, 0700);
  util::strip_unsafe_modes(dirs.home);
  if (sandbox_uid) {
    // The overlay's root takes the upper dir's owner: the sandbox's uid
    // writes there. The scratch dir stays root's.
    util::chown_tree(paths.upper, *sandbox_uid, *sandbox_uid);
    util::chown_tree(dirs.home, *sandbox_uid, *sandbox_uid);
  }
  dirs.overlay = sandbox::Overlay{pristine.tree, paths.upper, paths.overlay_work};
  dirs.opaque_xattr = sandbox_uid ? git::overlay_opaque_xattr_root : git::overlay_opaque_xattr_user;
  return dirs;
}

}  // namespace mullet::jobs
