#include "git/snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "git/snapshot_entries.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

using detail::TreeEntry;

bool stat_before(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

class Walker {
 public:
  Walker(const Repository& user_repo, const ClonePaths& clone, const SnapshotOptions& options, Snapshot& result)
      : m_entries(user_repo, options, result), m_result(result) {
    load_index(clone.git_dir + "/index");
    m_clone_repo = std::make_unique<Repository>(Repository::open_git_dir(clone.git_dir));
    check(git_repository_set_workdir(m_clone_repo->get(), clone.work_tree.c_str(), 0),
          "cannot set the clone's work tree");
  }

  std::optional<git_oid> walk(int dir_fd, const std::string& rel, bool ignore_files_safe, int depth) {
    if (!m_entries.within_depth(rel, depth)) return std::nullopt;
    // libgit2 opens .gitignore files itself, following symlinks and blocking
    // on FIFOs; it is only asked about a directory whose .gitignore (and every
    // ancestor's) is a plain file or absent.
    bool ignore_safe = ignore_files_safe;
    struct stat gitignore_info {};
    if (::fstatat(dir_fd, ".gitignore", &gitignore_info, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(gitignore_info.st_mode) || gitignore_info.st_size > detail::max_gitignore_bytes)) {
      ignore_safe = false;
      m_entries.warn_unusable_gitignore(rel);
    }

    TreeBuilderPtr builder = m_entries.new_builder();
    for (const auto& name : m_entries.list(dir_fd, rel)) {
      if (m_entries.is_git_dir_entry(name, rel)) continue;
      const std::string path = rel + name;
      struct stat info {};
      if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
        m_entries.warn_uninspectable(path, errno);
        continue;
      }
      std::optional<TreeEntry> entry;
      if (S_ISDIR(info.st_mode)) {
        entry = directory(dir_fd, rel, name, ignore_safe, depth);
      } else if (S_ISREG(info.st_mode)) {
        entry = regular_file(dir_fd, name, path, info, ignore_safe);
      } else if (S_ISLNK(info.st_mode)) {
        if (m_tracked.find(path) == m_tracked.end() && ignore_safe && ignored(path)) continue;
        entry = m_entries.store_symlink(dir_fd, name, path, info);
      } else {
        m_entries.warn_special_file(path);
      }
      if (entry) m_entries.insert(builder.get(), name, path, *entry);
    }
    return m_entries.write(builder.get());
  }

  git_oid empty_tree() { return m_entries.empty_tree(); }

 private:
  void load_index(const std::string& index_path) {
    git_index* raw = nullptr;
    check(git_index_open(&raw, index_path.c_str()), "cannot read the clone's index");
    m_index.reset(raw);
    struct stat info {};
    if (::stat(index_path.c_str(), &info) == 0) m_index_mtime = info.st_mtim;
    const std::size_t count = git_index_entrycount(m_index.get());
    for (std::size_t i = 0; i < count; ++i) {
      const git_index_entry* entry = git_index_get_byindex(m_index.get(), i);
      const std::string path = entry->path;
      m_tracked.emplace(path, entry);
      for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        m_tracked_dirs.insert(path.substr(0, slash + 1));
      }
    }
  }

  bool ignored(const std::string& path) { return detail::path_is_ignored(m_clone_repo->get(), path); }

  std::optional<TreeEntry> directory(int dir_fd, const std::string& rel, const std::string& name, bool ignore_safe,
                                     int depth) {
    const std::string path = rel + name;
    if (auto tracked = m_tracked.find(path);
        tracked != m_tracked.end() && tracked->second->mode == GIT_FILEMODE_COMMIT) {
      // A submodule: recorded as the base had it.
      return std::make_pair(tracked->second->id, GIT_FILEMODE_COMMIT);
    }
    if (m_entries.is_excluded_top_level(rel, name)) return m_entries.base_top_level_entry(name);
    const bool has_tracked = m_tracked_dirs.count(path + "/") > 0;
    if (!has_tracked && ignore_safe && ignored(path + "/")) return std::nullopt;
    UniqueFd child = m_entries.open_directory(dir_fd, name, path);
    auto tree = walk(child.get(), path + "/", ignore_safe, depth + 1);
    if (!tree) return std::nullopt;
    return std::make_pair(*tree, GIT_FILEMODE_TREE);
  }

  std::optional<TreeEntry> regular_file(int dir_fd, const std::string& name, const std::string& path,
                                        const struct stat& info, bool ignore_safe) {
    const auto tracked = m_tracked.find(path);
    if (tracked != m_tracked.end()) {
      if (const auto reused =
              unchanged_since_checkout(*tracked->second, info, detail::EntryRecorder::file_mode(info))) {
        ++m_result.files_reused;
        return std::make_pair(*reused, detail::EntryRecorder::file_mode(info));
      }
    } else if (ignore_safe && ignored(path)) {
      return std::nullopt;
    }
    return m_entries.store_file(dir_fd, name, path, info);
  }

  std::optional<git_oid> unchanged_since_checkout(const git_index_entry& entry, const struct stat& info,
                                                  git_filemode_t mode) const {
    if (entry.mode != static_cast<std::uint32_t>(mode)) return std::nullopt;
    if (entry.file_size != static_cast<std::uint32_t>(info.st_size)) return std::nullopt;
    if (entry.ino != static_cast<std::uint32_t>(info.st_ino)) return std::nullopt;
    if (entry.mtime.seconds != static_cast<std::int32_t>(info.st_mtim.tv_sec) ||
        entry.mtime.nanoseconds != static_cast<std::uint32_t>(info.st_mtim.tv_nsec)) {
      return std::nullopt;
    }
    // ctime cannot be set back by the worker: any change after checkout moves it.
    if (entry.ctime.seconds != static_cast<std::int32_t>(info.st_ctim.tv_sec) ||
        entry.ctime.nanoseconds != static_cast<std::uint32_t>(info.st_ctim.tv_nsec)) {
      return std::nullopt;
    }
    // Racily clean: changed in the same instant the index was written.
    if (!stat_before(info.st_ctim, m_index_mtime) || !stat_before(info.st_mtim, m_index_mtime)) return std::nullopt;
    return entry.id;
  }

  detail::EntryRecorder m_entries;
  Snapshot& m_result;
  IndexPtr m_index;
  struct timespec m_index_mtime {};
  std::unordered_map<std::string, const git_index_entry*> m_tracked;
  std::unordered_set<std::string> m_tracked_dirs;
  std::unique_ptr<Repository> m_clone_repo;
};

}  // namespace

Snapshot take_snapshot(const Repository& user_repo, const ClonePaths& clone, const SnapshotOptions& options) {
  Snapshot result;
  Walker walker(user_repo, clone, options, result);
  UniqueFd root(::open(clone.work_tree.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) throw failure("cannot open the job's work tree " + clone.work_tree + ": " + util::errno_text(errno));
  const auto tree = walker.walk(root.get(), "", true, 0);
  result.tree = tree ? *tree : walker.empty_tree();
  return result;
}

git_oid commit_snapshot(const Repository& user_repo, const git_oid& tree_id, const git_oid& parent_id,
                        const std::string& message, const UserIdentity& identity) {
  const auto author = signature_or_mullet(identity.author);
  const auto committer = signature_or_mullet(identity.committer);
  git_tree* raw_tree = nullptr;
  check(git_tree_lookup(&raw_tree, user_repo.get(), &tree_id), "cannot read the snapshot tree");
  TreePtr tree(raw_tree);
  git_commit* raw_parent = nullptr;
  check(git_commit_lookup(&raw_parent, user_repo.get(), &parent_id), "cannot read the parent commit");
  CommitPtr parent(raw_parent);
  const git_commit* parents[] = {parent.get()};
  git_oid commit_id{};
  check(git_commit_create(&commit_id, user_repo.get(), nullptr, author.get(), committer.get(), nullptr, message.c_str(),
                          tree.get(), 1, parents),
        "cannot write the snapshot commit");
  return commit_id;
}

}  // namespace mullet::git
