#include "jobs/workspace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "git/base_objects.hpp"
#include "git/clone.hpp"
#include "git/pristine.hpp"
#include "git/upper_snapshot.hpp"
#include "sandbox/fuse_overlay.hpp"
#include "sandbox/overlay.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

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

namespace {

// Empty when kernel overlayfs mounts here as a job would, else why not.
std::string kernel_refusal(const git::Repository& repo) {
  // On the file system the job's directories are on; what the probe makes
  // there is gone when it returns (run --dry-run and doctor leave nothing).
  try {
    return sandbox::probe_overlay(util::real_path(repo.common_dir()), ::geteuid() != 0);
  } catch (const Error& error) {
    return error.what();
  }
}

WorkTreeChoice kernel_choice() {
  return {true,
          false,
          {},
          std::string("an overlay of the base's pristine checkout (kernel overlayfs, ") +
              (::geteuid() == 0 ? "mounted as root in the staging namespace" : "in a user namespace of ours") + ")"};
}

WorkTreeChoice fuse_choice(const std::string& kernel_refused) {
  return {true,
          true,
          {},
          "an overlay of the base's pristine checkout (fuse-overlayfs, its daemon as the sandbox's uid" +
              (kernel_refused.empty() ? std::string(": [sandbox] work_tree = \"fuse-overlayfs\")")
                                      : "; the kernel refused its overlay: " + kernel_refused + ")")};
}

// The overlay's layers: kernel overlayfs's upper and work dirs in the job's
// directory, fuse-overlayfs's in fuse_layers.
sandbox::Overlay overlay_layers(const std::string& lower, const JobPaths& paths, const WorkTreeChoice& choice) {
  if (choice.fuse) return {lower, paths.fuse_layers + "/upper", paths.fuse_layers + "/work", true};
  return {lower, paths.upper, paths.overlay_work, false};
}

// How the overlay's upper dir marks opaque directories.
std::string opaque_xattr_for(std::optional<uid_t> sandbox_uid, const WorkTreeChoice& choice) {
  if (choice.fuse) return git::fuse_overlayfs_upper;
  return sandbox_uid ? git::overlay_opaque_xattr_root : git::overlay_opaque_xattr_user;
}

// fuse-overlayfs reads a `.wh.` name of its lower layer as a deletion: a
// base that tracks one would show the worker less than it holds.
void refuse_fuse_reserved_names(const git::Repository& repo, const git_oid& base) {
  const std::string name = git::fuse_reserved_name(repo, base);
  if (name.empty()) return;
  throw refused_error("the base tracks " + util::terminal_safe(name) +
                          ", a name fuse-overlayfs reads as a deletion, so its work tree would hide files of the base "
                          "from the worker; nothing was run",
                      "set [sandbox] work_tree = \"checkout\" (or \"overlay\" where the kernel allows one) in your "
                      "user config");
}

}  // namespace

WorkTreeChoice choose_work_tree(const git::Repository& repo, const config::Settings& settings) {
  const config::WorkTree wanted = settings.sandbox.work_tree;
  if (wanted == config::WorkTree::checkout) {
    return {false, false, {}, "a checkout of its own: [sandbox] work_tree = \"checkout\""};
  }
  if (wanted == config::WorkTree::fuse) {
    const std::string refused = sandbox::probe_fuse_overlay();
    if (refused.empty()) return fuse_choice({});
    return {false, false, "[sandbox] work_tree = \"fuse-overlayfs\", but " + refused, "refused: " + refused};
  }
  const std::string kernel = kernel_refusal(repo);
  if (kernel.empty()) return kernel_choice();
  if (wanted == config::WorkTree::overlay) {
    return {false, false, "[sandbox] work_tree = \"overlay\", but this kernel refused the overlay (" + kernel + ")",
            "refused: this kernel refused the overlay (" + kernel + ")"};
  }
  const std::string fuse = sandbox::probe_fuse_overlay();
  if (fuse.empty()) return fuse_choice(kernel);
  return {false,
          false,
          {},
          "a checkout of its own: this kernel refused the overlay (" + kernel +
              ") and fuse-overlayfs cannot serve one (" + fuse + ")"};
}

WorkTreeChoice usable_work_tree(const git::Repository& repo, const config::Settings& settings) {
  WorkTreeChoice choice = choose_work_tree(repo, settings);
  if (!choice.refused.empty()) {
    throw refused_error(choice.refused + "; nothing was run",
                        "set [sandbox] work_tree = \"auto\" (kernel overlayfs, else fuse-overlayfs, else a checkout) "
                        "in your user config; `git mullet doctor` says what this machine allows");
  }
  return choice;
}

SandboxDirs planned_worker_dirs(const git::Repository& repo, const JobPaths& paths, const git_oid& base,
                                std::optional<uid_t> sandbox_uid, const WorkTreeChoice& choice) {
  SandboxDirs dirs = worker_dirs(paths);
  if (!choice.overlay) return dirs;
  const std::string entry =
      git::pristine_directory(repo) + "/" + git::pristine_entry_name(base, sandbox_uid.value_or(::geteuid()));
  dirs.overlay = overlay_layers(entry + "/tree", paths, choice);
  dirs.opaque_xattr = opaque_xattr_for(sandbox_uid, choice);
  return dirs;
}

SandboxDirs make_worker_tree(const git::Repository& repo, const git_oid& commit, const JobPaths& paths,
                             std::optional<uid_t> sandbox_uid, const SandboxObjects& objects,
                             const WorkTreeChoice& choice) {
  const bool overlay = choice.overlay;
  SandboxDirs dirs = worker_dirs(paths);
  // What an earlier run (resume) left of an overlay is not trusted.
  for (const auto* dir : {&paths.upper, &paths.overlay_work, &paths.fuse_layers}) util::remove_tree(*dir);
  ::unlink((paths.root + "/pristine").c_str());
  if (!overlay || git_oid_cmp(&commit, &objects.base) != 0) {
    make_sandbox_clone(repo, commit, dirs, sandbox_uid, objects);
    return dirs;
  }
  if (choice.fuse) refuse_fuse_reserved_names(repo, commit);
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
  const sandbox::Overlay layers = overlay_layers(pristine.tree, paths, choice);
  if (choice.fuse) util::make_dirs(paths.fuse_layers, 0700);
  util::make_dirs(layers.upper, 0755);
  util::make_dirs(layers.work, 0700);
  util::make_dirs(dirs.home, 0700);
  util::strip_unsafe_modes(dirs.home);
  if (sandbox_uid) {
    // The overlay's root takes the upper dir's owner: the sandbox's uid
    // writes there. The scratch dir stays root's.
    // fuse-overlayfs's daemon runs as the sandbox's uid: its work dir too.
    util::chown_tree(choice.fuse ? paths.fuse_layers : layers.upper, *sandbox_uid, *sandbox_uid);
    util::chown_tree(dirs.home, *sandbox_uid, *sandbox_uid);
  }
  dirs.overlay = layers;
  dirs.opaque_xattr = opaque_xattr_for(sandbox_uid, choice);
  return dirs;
}

}  // namespace mullet::jobs
