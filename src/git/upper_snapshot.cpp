#include "git/upper_snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "git/clone.hpp"
#include "git/snapshot_entries.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

using detail::TreeEntry;

// overlayfs marks a deleted lower entry with a character device 0/0.
bool is_whiteout(const struct stat& info) {
  return S_ISCHR(info.st_mode) && info.st_rdev == makedev(0, 0);
}

constexpr const char* fuse_whiteout_prefix = ".wh.";
constexpr const char* fuse_opaque_marker = ".wh..wh..opq";
constexpr const char* fuse_opaque_device = ".wh..opq";
constexpr const char* worker_opaque_xattr = "user.overlay.opaque";

bool has_fuse_whiteout_prefix(const std::string& name) {
  return name.rfind(fuse_whiteout_prefix, 0) == 0;
}

// Opaque as fuse-overlayfs 1.10 marks a directory it makes (its daemon not
// root): the first of trusted.overlay.opaque (root's alone) and
// user.fuseoverlayfs.opaque (the daemon refuses a worker's) it has, value
// starting with 'y'. Never by a `.wh..wh..opq` entry alone, nor by
// user.overlay.opaque (refused where found: fuse_refusal).
bool fuse_opaque(int dir_fd) {
  for (const char* name : {"trusted.overlay.opaque", "user.fuseoverlayfs.opaque"}) {
    char value[16] = {};
    const ssize_t length = ::fgetxattr(dir_fd, name, value, sizeof value);
    if (length > 0) return value[0] == 'y';
    if (length == 0) return false;
    if (errno != ENODATA && errno != ENOTSUP) return false;
  }
  return false;
}

// The daemon's own markers in a directory it made opaque: an empty
// `.wh..wh..opq` file and a `.wh..opq` whiteout device. Not recorded.
bool fuse_daemon_marker(int dir_fd, const std::string& name) {
  struct stat info {};
  if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) return false;
  const bool marker = (name == fuse_opaque_marker && S_ISREG(info.st_mode) && info.st_size == 0) ||
                      (name == fuse_opaque_device && is_whiteout(info));
  return marker && fuse_opaque(dir_fd);
}

// fuse-overlayfs refuses a worker `.wh.` names only for files it creates:
// as a directory, symlink, hard link or rename target the worker has one,
// sees it and what it would hide while the daemon runs, and the next daemon
// (the next attempt) reads it as a deletion. No reading of such an upper dir
// is what the worker saw, so it is refused, as is user.overlay.opaque, which
// the worker may set and the next daemon would honour.
[[noreturn]] void fuse_refusal(const std::string& what) {
  throw refused_error("the work tree's upper dir holds " + util::terminal_safe(what) +
                          ", which fuse-overlayfs reads differently from what it showed the worker; nothing of "
                          "this run was recorded",
                      "a worker under work_tree = \"fuse-overlayfs\" must not make names starting with .wh. or set "
                      "user.overlay.opaque; use work_tree = \"overlay\" or \"checkout\" for it");
}

// The .gitignore files of the merged view, along the paths the upper dir
// touches, copied into a scratch work tree of a scratch git dir, which
// libgit2 is then asked about. The worker's .gitignore files are read by us
// (O_NOFOLLOW, regular files only), never by libgit2.
class MergedIgnores {
 public:
  MergedIgnores(detail::EntryRecorder& entries, const git_oid& base_tree) : m_entries(entries), m_head(base_tree) {}

  // Entering directory `rel` of the upper dir (`dir_fd`), whose lower
  // contents (the base's subtree) are `lower`, or none under an opaque
  // directory or where the base has no directory. Returns whether ignore
  // rules may be applied below: false, with a warning, when the merged
  // view's .gitignore there is not a regular file of at most 1 MiB.
  bool enter(int dir_fd, const std::string& rel, const git_tree* lower, bool parent_safe) {
    struct stat info {};
    std::optional<std::string> content;
    if (::fstatat(dir_fd, ".gitignore", &info, AT_SYMLINK_NOFOLLOW) == 0) {
      if (is_whiteout(info)) return parent_safe;
      if (!S_ISREG(info.st_mode) || info.st_size > detail::max_gitignore_bytes) return unusable(rel);
      if (!parent_safe) return false;
      content = read_upper(dir_fd, rel, info);
    } else if (errno != ENOENT) {
      m_entries.warn_uninspectable(rel + ".gitignore", errno);
      return unusable(rel);
    } else if (lower != nullptr) {
      const git_tree_entry* entry = git_tree_entry_byname(lower, ".gitignore");
      if (entry == nullptr) return parent_safe;
      const git_filemode_t mode = git_tree_entry_filemode(entry);
      if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) return unusable(rel);
      content = read_base(*git_tree_entry_id(entry));
      if (!content) return unusable(rel);
    }
    if (!parent_safe) return false;
    if (content) {
      m_pending.emplace_back(rel, std::move(*content));
      m_any_rules = true;
    }
    return parent_safe;
  }

  bool ignored(const std::string& path) {
    if (!m_any_rules) return false;
    if (!m_repo) open_scratch();
    for (const auto& [rel, content] : m_pending) {
      try {
        util::make_dirs(m_scratch.path() + "/work/" + rel, 0700);
        util::write_file(m_scratch.path() + "/work/" + rel + ".gitignore", content, 0600);
      } catch (const Error&) {
        // A path too long for a path name: its rules are not applied (the
        // safe way: what they would leave out is recorded), as libgit2
        // applies none to a work tree path it cannot name.
        m_entries.warn(rel + ".gitignore", "its directory is nested too deep to apply its ignore rules; not applied");
      }
    }
    m_pending.clear();
    return detail::path_is_ignored(m_repo->get(), path);
  }

 private:
  bool unusable(const std::string& rel) {
    m_entries.warn_unusable_gitignore(rel);
    return false;
  }

  std::string read_upper(int dir_fd, const std::string& rel, const struct stat& info) {
    UniqueFd file =
        util::open_granting_access(dir_fd, ".gitignore", O_RDONLY | O_NONBLOCK, (info.st_mode & 0777U) | 0400U);
    struct stat opened {};
    if (!file || ::fstat(file.get(), &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_ino != info.st_ino) {
      throw failure("cannot read " + rel + ".gitignore the worker left: " + util::errno_text(errno));
    }
    std::string content;
    char buffer[65536];
    while (content.size() <= static_cast<std::size_t>(detail::max_gitignore_bytes)) {
      const ssize_t got = ::read(file.get(), buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw failure("cannot read " + rel + ".gitignore the worker left: " + util::errno_text(errno));
      if (got == 0) break;
      content.append(buffer, static_cast<std::size_t>(got));
    }
    content.resize(std::min(content.size(), static_cast<std::size_t>(detail::max_gitignore_bytes)));
    return content;
  }

  std::optional<std::string> read_base(const git_oid& id) {
    git_blob* raw = nullptr;
    check(git_blob_lookup(&raw, m_entries.repo().get(), &id), "cannot read a .gitignore of the base");
    const BlobPtr blob(raw);
    const auto size = git_blob_rawsize(blob.get());
    if (size > static_cast<git_object_size_t>(detail::max_gitignore_bytes)) return std::nullopt;
    return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())), static_cast<std::size_t>(size));
  }

  void open_scratch() {
    m_scratch = util::TempDir("/tmp", "mullet-ignores-");
    // HEAD names the base's tree: nothing reads it, libgit2 wants one.
    write_fixed_git_dir(m_scratch.path() + "/git", m_head, 0600);
    util::make_dirs(m_scratch.path() + "/work", 0700);
    m_repo = std::make_unique<Repository>(Repository::open_git_dir(m_scratch.path() + "/git"));
    check(git_repository_set_workdir(m_repo->get(), (m_scratch.path() + "/work").c_str(), 0),
          "cannot set the ignore rules' work tree");
  }

  detail::EntryRecorder& m_entries;
  git_oid m_head;
  std::vector<std::pair<std::string, std::string>> m_pending;  // (directory, .gitignore) not written yet
  bool m_any_rules = false;
  util::TempDir m_scratch;
  std::unique_ptr<Repository> m_repo;
};

class UpperWalker {
 public:
  UpperWalker(const Repository& user_repo, const git_oid& base_tree, const std::string& opaque_xattr,
              const SnapshotOptions& options, Snapshot& result)
      : m_entries(user_repo, options, result),
        m_ignores(m_entries, base_tree),
        m_opaque_xattr(opaque_xattr),
        m_fuse(opaque_xattr == fuse_overlayfs_upper) {}

  // Directory `rel` of the upper dir. `base` is the base's subtree at `rel`
  // (what is tracked there), or null; `merged` says whether its entries show
  // through (no opaque directory above or here). The tree starts as `base`'s
  // when merged, and each upper entry replaces or deletes one name.
  std::optional<git_oid> walk(int dir_fd, const std::string& rel, const git_tree* base, bool merged, bool ignore_safe,
                              int depth) {
    if (!m_entries.within_depth(rel, depth)) return std::nullopt;
    const git_tree* lower = merged ? base : nullptr;
    if (m_fuse && ::fgetxattr(dir_fd, worker_opaque_xattr, nullptr, 0) >= 0) {
      fuse_refusal(std::string(worker_opaque_xattr) + " on " + (rel.empty() ? std::string(".") : rel));
    }
    const bool safe_here = m_ignores.enter(dir_fd, rel, lower, ignore_safe);
    TreeBuilderPtr builder = m_entries.new_builder(lower);
    for (const auto& name : m_entries.list(dir_fd, rel)) {
      if (m_entries.is_git_dir_entry(name, rel)) continue;
      if (m_fuse && has_fuse_whiteout_prefix(name)) {
        if (fuse_daemon_marker(dir_fd, name)) continue;
        fuse_refusal(rel + name);
      }
      const git_tree_entry* tracked = base != nullptr ? git_tree_entry_byname(base, name.c_str()) : nullptr;
      const auto entry = record(dir_fd, rel, name, tracked, merged, safe_here, depth);
      if (entry && m_entries.insert(builder.get(), name, rel + name, *entry)) continue;
      // Deleted, or left out: what the lower dir had there is not kept.
      remove_entry(builder.get(), name);
    }
    return m_entries.write(builder.get());
  }

  git_oid empty_tree() { return m_entries.empty_tree(); }

 private:
  static void remove_entry(git_treebuilder* builder, const std::string& name) {
    if (!name.empty() && git_treebuilder_get(builder, name.c_str()) != nullptr) {
      check(git_treebuilder_remove(builder, name.c_str()), "cannot build a tree");
    }
  }

  std::optional<TreeEntry> record(int dir_fd, const std::string& rel, const std::string& name,
                                  const git_tree_entry* tracked, bool merged, bool ignore_safe, int depth) {
    const std::string path = rel + name;
    struct stat info {};
    if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
      m_entries.warn_uninspectable(path, errno);
      return std::nullopt;
    }
    if (is_whiteout(info)) return std::nullopt;
    if (S_ISDIR(info.st_mode)) return directory(dir_fd, rel, name, tracked, merged, ignore_safe, depth);
    const bool tracked_file = tracked != nullptr && git_tree_entry_filemode(tracked) != GIT_FILEMODE_TREE;
    if (S_ISREG(info.st_mode) || S_ISLNK(info.st_mode)) {
      if (!tracked_file && ignore_safe && m_ignores.ignored(path)) return std::nullopt;
      return S_ISREG(info.st_mode) ? m_entries.store_file(dir_fd, name, path, info)
                                   : m_entries.store_symlink(dir_fd, name, path, info);
    }
    m_entries.warn_special_file(path);
    return std::nullopt;
  }

  std::optional<TreeEntry> directory(int dir_fd, const std::string& rel, const std::string& name,
                                     const git_tree_entry* tracked, bool merged, bool ignore_safe, int depth) {
    const std::string path = rel + name;
    const git_filemode_t tracked_mode = tracked != nullptr ? git_tree_entry_filemode(tracked) : GIT_FILEMODE_UNREADABLE;
    // A submodule: recorded as the base had it.
    if (tracked_mode == GIT_FILEMODE_COMMIT) return std::make_pair(*git_tree_entry_id(tracked), GIT_FILEMODE_COMMIT);
    if (m_entries.is_excluded_top_level(rel, name)) return m_entries.base_top_level_entry(name);
    const bool has_tracked = tracked_mode == GIT_FILEMODE_TREE;
    if (!has_tracked && ignore_safe && m_ignores.ignored(path + "/")) return std::nullopt;
    UniqueFd child = m_entries.open_directory(dir_fd, name, path);
    TreePtr base_child;
    if (has_tracked) {
      git_tree* raw = nullptr;
      check(git_tree_lookup(&raw, m_entries.repo().get(), git_tree_entry_id(tracked)), "cannot read the base's tree");
      base_child.reset(raw);
    }
    const bool child_merged = merged && has_tracked && !opaque(child.get());
    auto tree = walk(child.get(), path + "/", base_child.get(), child_merged, ignore_safe, depth + 1);
    if (!tree) return std::nullopt;
    return std::make_pair(*tree, GIT_FILEMODE_TREE);
  }

  // As overlayfs decides: the mount's own xattr name, value exactly "y".
  bool opaque(int dir_fd) const {
    if (m_fuse) return fuse_opaque(dir_fd);
    char value[2] = {};
    const ssize_t length = ::fgetxattr(dir_fd, m_opaque_xattr.c_str(), value, sizeof value);
    return length == 1 && value[0] == 'y';
  }

  detail::EntryRecorder m_entries;
  MergedIgnores m_ignores;
  std::string m_opaque_xattr;
  bool m_fuse;
};

}  // namespace

Snapshot take_upper_snapshot(const Repository& user_repo, const git_oid& base_tree, const std::string& upper_dir,
                             const std::string& opaque_xattr, const SnapshotOptions& options) {
  if (opaque_xattr != overlay_opaque_xattr_root && opaque_xattr != overlay_opaque_xattr_user &&
      opaque_xattr != fuse_overlayfs_upper) {
    throw failure("internal error: not an overlayfs opaque xattr: " + util::terminal_safe(opaque_xattr));
  }
  if (options.base_tree && git_oid_cmp(&*options.base_tree, &base_tree) != 0) {
    throw failure("internal error: the snapshot's base tree and the overlay's lower tree differ");
  }
  SnapshotOptions with_base = options;
  with_base.base_tree = base_tree;
  git_tree* raw = nullptr;
  check(git_tree_lookup(&raw, user_repo.get(), &base_tree), "cannot read the base's tree");
  const TreePtr base(raw);
  UniqueFd root(::open(upper_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) throw failure("cannot open the job's upper dir " + upper_dir + ": " + util::errno_text(errno));

  Snapshot result;
  UpperWalker walker(user_repo, base_tree, opaque_xattr, with_base, result);
  // The root is never opaque: overlayfs merges it whatever its xattrs say.
  const auto tree = walker.walk(root.get(), "", base.get(), true, true, 0);
  result.tree = tree ? *tree : walker.empty_tree();
  return result;
}

}  // namespace mullet::git

namespace mullet::git {
namespace {

int find_fuse_reserved(const char* root, const git_tree_entry* entry, void* payload) {
  const std::string name = git_tree_entry_name(entry);
  if (!has_fuse_whiteout_prefix(name)) return 0;
  *static_cast<std::string*>(payload) = std::string(root) + name;
  return 1;  // stops the walk
}

}  // namespace

std::string fuse_reserved_name(const Repository& repo, const git_oid& commit) {
  git_tree* raw = nullptr;
  const git_oid tree_id = repo.tree_of(commit);
  check(git_tree_lookup(&raw, repo.get(), &tree_id), "cannot read the base's tree");
  const TreePtr tree(raw);
  std::string found;
  const int walked = git_tree_walk(tree.get(), GIT_TREEWALK_PRE, find_fuse_reserved, &found);
  if (walked < 0 && found.empty()) check(walked, "cannot read the base's tree");
  return found;
}

}  // namespace mullet::git
