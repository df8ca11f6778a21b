#include "git/snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

constexpr int max_depth = 200;
constexpr std::size_t whole_read_limit = 8U << 20U;
constexpr off_t max_gitignore_bytes = 1 << 20;

bool stat_before(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

class Walker {
 public:
  Walker(const Repository& user_repo, const ClonePaths& clone, const SnapshotOptions& options, Snapshot& result)
      : m_user_repo(user_repo), m_options(options), m_result(result) {
    check(git_repository_odb(&m_odb_raw, user_repo.get()), "cannot open the object database");
    m_odb.reset(m_odb_raw);
    load_index(clone.git_dir + "/index");
    m_clone_repo = std::make_unique<Repository>(Repository::open_git_dir(clone.git_dir));
    check(git_repository_set_workdir(m_clone_repo->get(), clone.work_tree.c_str(), 0),
          "cannot set the clone's work tree");
  }

  std::optional<git_oid> walk(int dir_fd, const std::string& rel, bool ignore_files_safe, int depth) {
    if (depth > max_depth) {
      warn(rel, "nested deeper than " + std::to_string(max_depth) + " directories; left out");
      return std::nullopt;
    }
    // libgit2 opens .gitignore files itself, following symlinks and blocking
    // on FIFOs; it is only asked about a directory whose .gitignore (and every
    // ancestor's) is a plain file or absent.
    bool ignore_safe = ignore_files_safe;
    struct stat gitignore_info {};
    if (::fstatat(dir_fd, ".gitignore", &gitignore_info, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(gitignore_info.st_mode) || gitignore_info.st_size > max_gitignore_bytes)) {
      ignore_safe = false;
      warn(rel + ".gitignore", "is not a regular file of at most 1 MiB; ignore rules below " +
                                   (rel.empty() ? "/" : rel) + " were not applied");
    }

    TreeBuilderPtr builder = new_builder();
    for (const auto& name : list(dir_fd, rel)) {
      const std::string path = rel + name;
      if (name == ".git") {
        if (!rel.empty()) warn(path, "nested .git left out");
        continue;
      }
      struct stat info {};
      if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
        warn(path, "cannot inspect: " + util::errno_text(errno));
        continue;
      }
      std::optional<std::pair<git_oid, git_filemode_t>> entry;
      if (S_ISDIR(info.st_mode)) {
        entry = directory(dir_fd, name, path, ignore_safe, depth);
      } else if (S_ISREG(info.st_mode)) {
        entry = regular_file(dir_fd, name, path, info, ignore_safe);
      } else if (S_ISLNK(info.st_mode)) {
        entry = symlink(dir_fd, name, path, info, ignore_safe);
      } else {
        warn(path, "is a special file (FIFO, socket or device); left out");
      }
      if (!entry) continue;
      if (git_treebuilder_insert(nullptr, builder.get(), name.c_str(), &entry->first, entry->second) < 0) {
        warn(path, "git cannot record this name (" + last_error_message() + "); left out");
      }
    }
    if (git_treebuilder_entrycount(builder.get()) == 0) return std::nullopt;
    git_oid tree{};
    check(git_treebuilder_write(&tree, builder.get()), "cannot write a tree");
    return tree;
  }

  git_oid empty_tree() {
    TreeBuilderPtr builder = new_builder();
    git_oid tree{};
    check(git_treebuilder_write(&tree, builder.get()), "cannot write a tree");
    return tree;
  }

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

  // What the base commit has at top-level `name`, as it was.
  std::optional<std::pair<git_oid, git_filemode_t>> base_entry(const std::string& name) const {
    if (!m_options.base_tree) return std::nullopt;
    git_tree* raw = nullptr;
    if (git_tree_lookup(&raw, m_user_repo.get(), &*m_options.base_tree) < 0) return std::nullopt;
    TreePtr tree(raw);
    const git_tree_entry* entry = git_tree_entry_byname(tree.get(), name.c_str());
    if (entry == nullptr) return std::nullopt;
    return std::make_pair(*git_tree_entry_id(entry), git_tree_entry_filemode(entry));
  }

  TreeBuilderPtr new_builder() {
    git_treebuilder* raw = nullptr;
    check(git_treebuilder_new(&raw, m_user_repo.get(), nullptr), "cannot build a tree");
    return TreeBuilderPtr(raw);
  }

  std::vector<std::string> list(int dir_fd, const std::string& rel) {
    std::vector<std::string> names;
    util::DirectoryReader listing(dir_fd);
    if (!listing.is_open()) {
      warn(rel, "cannot list: " + util::errno_text(listing.error()));
      return names;
    }
    for (auto& entry : listing.read_all()) names.push_back(std::move(entry.name));
    // A listing cut short would turn what it missed into deletions.
    if (listing.error() != 0) {
      throw failure("cannot list directory " + (rel.empty() ? std::string("/") : rel) +
                    " the worker left: " + util::errno_text(listing.error()));
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  bool ignored(const std::string& path) {
    int is_ignored = 0;
    if (git_ignore_path_is_ignored(&is_ignored, m_clone_repo->get(), path.c_str()) < 0) return false;
    return is_ignored == 1;
  }

  std::optional<std::pair<git_oid, git_filemode_t>> directory(int dir_fd, const std::string& name,
                                                              const std::string& path, bool ignore_safe, int depth) {
    if (auto tracked = m_tracked.find(path);
        tracked != m_tracked.end() && tracked->second->mode == GIT_FILEMODE_COMMIT) {
      // A submodule: recorded as the base had it.
      return std::make_pair(tracked->second->id, GIT_FILEMODE_COMMIT);
    }
    const bool has_tracked = m_tracked_dirs.count(path + "/") > 0;
    if (path.find('/') == std::string::npos &&
        std::find(m_options.excluded_top_level_dirs.begin(), m_options.excluded_top_level_dirs.end(), name) !=
            m_options.excluded_top_level_dirs.end()) {
      return base_entry(name);
    }
    if (!has_tracked && ignore_safe && ignored(path + "/")) return std::nullopt;
    UniqueFd child = util::open_granting_access(dir_fd, name, O_RDONLY | O_DIRECTORY, 0700);
    if (!child) throw failure("cannot read directory " + path + " the worker left: " + util::errno_text(errno));
    auto tree = walk(child.get(), path + "/", ignore_safe, depth + 1);
    if (!tree) return std::nullopt;
    return std::make_pair(*tree, GIT_FILEMODE_TREE);
  }

  std::optional<std::pair<git_oid, git_filemode_t>> regular_file(int dir_fd, const std::string& name,
                                                                 const std::string& path, const struct stat& info,
                                                                 bool ignore_safe) {
    const git_filemode_t mode = (info.st_mode & S_IXUSR) != 0 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
    const auto tracked = m_tracked.find(path);
    if (tracked != m_tracked.end()) {
      if (const auto reused = unchanged_since_checkout(*tracked->second, info, mode)) {
        ++m_result.files_reused;
        return std::make_pair(*reused, mode);
      }
    } else if (ignore_safe && ignored(path)) {
      return std::nullopt;
    }
    if (static_cast<std::uint64_t>(info.st_size) > m_options.max_file_bytes) {
      warn(path,
           "is larger than " + std::to_string(m_options.max_file_bytes >> 20U) + " MiB (limits.file_mb); left out");
      return std::nullopt;
    }
    UniqueFd file = util::open_granting_access(dir_fd, name, O_RDONLY | O_NONBLOCK, (info.st_mode & 0777U) | 0400U);
    struct stat opened {};
    if (!file || ::fstat(file.get(), &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_ino != info.st_ino) {
      // Never turn a file we could not read into a deletion.
      throw failure("cannot read " + path + " the worker left: " + util::errno_text(errno));
    }
    auto oid = hash_file(file.get(), static_cast<std::size_t>(opened.st_size), path);
    if (!oid) return std::nullopt;
    ++m_result.files_hashed;
    return std::make_pair(*oid, mode);
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

  std::optional<git_oid> hash_file(int fd, std::size_t size, const std::string& path) {
    git_oid oid{};
    char buffer[65536];
    if (size <= whole_read_limit) {
      std::string content;
      content.reserve(size);
      while (true) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got == 0) break;
        if (got < 0) {
          if (errno == EINTR) continue;
          warn(path, "read failed: " + util::errno_text(errno) + "; left out");
          return std::nullopt;
        }
        content.append(buffer, static_cast<std::size_t>(got));
      }
      check(git_odb_write(&oid, m_odb.get(), content.data(), content.size(), GIT_OBJECT_BLOB), "cannot store " + path);
      return oid;
    }
    git_odb_stream* raw = nullptr;
    check(git_odb_open_wstream(&raw, m_odb.get(), static_cast<git_object_size_t>(size), GIT_OBJECT_BLOB),
          "cannot store " + path);
    std::unique_ptr<git_odb_stream, void (*)(git_odb_stream*)> stream(raw, git_odb_stream_free);
    std::size_t total = 0;
    while (total < size) {
      const ssize_t got = ::read(fd, buffer, std::min(sizeof buffer, size - total));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      check(git_odb_stream_write(stream.get(), buffer, static_cast<std::size_t>(got)), "cannot store " + path);
      total += static_cast<std::size_t>(got);
    }
    if (total != size) {
      warn(path, "changed size while being read; left out");
      return std::nullopt;
    }
    check(git_odb_stream_finalize_write(&oid, stream.get()), "cannot store " + path);
    return oid;
  }

  std::optional<std::pair<git_oid, git_filemode_t>> symlink(int dir_fd, const std::string& name,
                                                            const std::string& path, const struct stat& info,
                                                            bool ignore_safe) {
    if (m_tracked.find(path) == m_tracked.end() && ignore_safe && ignored(path)) return std::nullopt;
    std::string target(static_cast<std::size_t>(info.st_size) + 1, '\0');
    const ssize_t length = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
    if (length < 0 || static_cast<std::size_t>(length) >= target.size()) {
      warn(path, "cannot read symlink; left out");
      return std::nullopt;
    }
    target.resize(static_cast<std::size_t>(length));
    git_oid oid{};
    check(git_odb_write(&oid, m_odb.get(), target.data(), target.size(), GIT_OBJECT_BLOB), "cannot store " + path);
    ++m_result.files_hashed;
    return std::make_pair(oid, GIT_FILEMODE_LINK);
  }

  void warn(const std::string& path, const std::string& why) { m_result.warnings.push_back(path + ": " + why); }

  const Repository& m_user_repo;
  const SnapshotOptions& m_options;
  Snapshot& m_result;
  git_odb* m_odb_raw = nullptr;
  OdbPtr m_odb;
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
