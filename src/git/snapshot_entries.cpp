#include "git/snapshot_entries.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git::detail {
namespace {

constexpr std::size_t whole_read_limit = 8U << 20U;

}  // namespace

EntryRecorder::EntryRecorder(const Repository& user_repo, const SnapshotOptions& options, Snapshot& result)
    : m_user_repo(user_repo), m_options(options), m_result(result) {
  git_odb* odb = nullptr;
  check(git_repository_odb(&odb, user_repo.get()), "cannot open the object database");
  m_odb.reset(odb);
  m_objects_dir = std::string(git_repository_commondir(user_repo.get())) + "objects/";
  if (options.base_tree) {
    git_tree* tree = nullptr;
    if (git_tree_lookup(&tree, user_repo.get(), &*options.base_tree) == 0) m_base_tree.reset(tree);
  }
}

bool EntryRecorder::within_depth(const std::string& rel, int depth) {
  // The same depth every walk of ours stops at (util::max_walk_depth): what
  // the snapshot leaves out, clearing unsafe modes closed off.
  if (depth < util::max_walk_depth) return true;
  warn(rel, "nested deeper than " + std::to_string(util::max_walk_depth) + " directories; left out");
  return false;
}

std::vector<std::string> EntryRecorder::list(int dir_fd, const std::string& rel) {
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

bool EntryRecorder::is_git_dir_entry(const std::string& name, const std::string& rel) {
  if (name != ".git") return false;
  if (!rel.empty()) warn(rel + name, "nested .git left out");
  return true;
}

void EntryRecorder::warn_unusable_gitignore(const std::string& rel) {
  warn(rel + ".gitignore",
       "is not a regular file of at most 1 MiB; ignore rules below " + (rel.empty() ? "/" : rel) + " were not applied");
}

bool EntryRecorder::is_excluded_top_level(const std::string& rel, const std::string& name) const {
  const auto& excluded = m_options.excluded_top_level_dirs;
  return rel.empty() && std::find(excluded.begin(), excluded.end(), name) != excluded.end();
}

std::optional<TreeEntry> EntryRecorder::base_top_level_entry(const std::string& name) const {
  if (!m_base_tree) return std::nullopt;
  const git_tree_entry* entry = git_tree_entry_byname(m_base_tree.get(), name.c_str());
  if (entry == nullptr) return std::nullopt;
  return std::make_pair(*git_tree_entry_id(entry), git_tree_entry_filemode(entry));
}

UniqueFd EntryRecorder::open_directory(int dir_fd, const std::string& name, const std::string& path) {
  UniqueFd child = util::open_granting_access(dir_fd, name, O_RDONLY | O_DIRECTORY, 0700);
  if (!child) throw failure("cannot read directory " + path + " the worker left: " + util::errno_text(errno));
  return child;
}

git_filemode_t EntryRecorder::file_mode(const struct stat& info) {
  return (info.st_mode & S_IXUSR) != 0 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
}

std::optional<TreeEntry> EntryRecorder::store_file(int dir_fd, const std::string& name, const std::string& path,
                                                   const struct stat& info) {
  if (static_cast<std::uint64_t>(info.st_size) > m_options.max_file_bytes) {
    warn(path, "is larger than " + std::to_string(m_options.max_file_bytes >> 20U) + " MiB (limits.file_mb); left out");
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
  return std::make_pair(*oid, file_mode(info));
}

std::optional<git_oid> EntryRecorder::hash_file(int fd, std::size_t size, const std::string& path) {
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
    return write_blob(content, path);
  }
  if (!within_budget(path)) return std::nullopt;
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
  charge(oid);  // even when it was there before: its id was not known in time
  return oid;
}

std::optional<git_oid> EntryRecorder::write_blob(const std::string& content, const std::string& path) {
  git_oid oid{};
  check(git_odb_hash(&oid, content.data(), content.size(), GIT_OBJECT_BLOB), "cannot hash " + path);
  if (git_odb_exists(m_odb.get(), &oid) == 1) return oid;
  if (!within_budget(path)) return std::nullopt;
  check(git_odb_write(&oid, m_odb.get(), content.data(), content.size(), GIT_OBJECT_BLOB), "cannot store " + path);
  charge(oid);
  return oid;
}

bool EntryRecorder::within_budget(const std::string& path) {
  const std::uint64_t cap = m_options.max_new_object_bytes;
  if (cap == 0 || m_new_object_bytes < cap) return true;
  if (!m_budget_spent) {
    m_budget_spent = true;
    // Kept even when other warnings filled the list: it explains the rest.
    m_result.warnings.push_back(path + ": new files had already taken limits.disk_mb (" + std::to_string(cap >> 20U) +
                                " MiB) in the repository's objects; this and every later new file left out");
  }
  return false;
}

void EntryRecorder::charge(const git_oid& oid) {
  const std::string hex = oid_to_string(oid);
  struct stat info {};
  std::uint64_t cost = util::min_entry_bytes;
  if (::stat((m_objects_dir + hex.substr(0, 2) + "/" + hex.substr(2)).c_str(), &info) == 0) {
    cost = std::max(cost, static_cast<std::uint64_t>(info.st_blocks) * 512U);
  }
  m_new_object_bytes += cost;
}

std::optional<TreeEntry> EntryRecorder::store_symlink(int dir_fd, const std::string& name, const std::string& path,
                                                      const struct stat& info) {
  std::string target(static_cast<std::size_t>(info.st_size) + 1, '\0');
  const ssize_t length = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
  if (length < 0 || static_cast<std::size_t>(length) >= target.size()) {
    warn(path, "cannot read symlink; left out");
    return std::nullopt;
  }
  target.resize(static_cast<std::size_t>(length));
  const auto oid = write_blob(target, path);
  if (!oid) return std::nullopt;
  ++m_result.files_hashed;
  return std::make_pair(*oid, GIT_FILEMODE_LINK);
}

void EntryRecorder::warn_special_file(const std::string& path) {
  warn(path, "is a special file (FIFO, socket or device); left out");
}

void EntryRecorder::warn_uninspectable(const std::string& path, int error) {
  warn(path, "cannot inspect: " + util::errno_text(error));
}

TreeBuilderPtr EntryRecorder::new_builder(const git_tree* source) {
  git_treebuilder* raw = nullptr;
  check(git_treebuilder_new(&raw, m_user_repo.get(), source), "cannot build a tree");
  return TreeBuilderPtr(raw);
}

bool EntryRecorder::insert(git_treebuilder* builder, const std::string& name, const std::string& path,
                           const TreeEntry& entry) {
  if (git_treebuilder_insert(nullptr, builder, name.c_str(), &entry.first, entry.second) == 0) return true;
  warn(path, "git cannot record this name (" + last_error_message() + "); left out");
  return false;
}

std::optional<git_oid> EntryRecorder::write(git_treebuilder* builder) {
  if (git_treebuilder_entrycount(builder) == 0) return std::nullopt;
  git_oid tree{};
  check(git_treebuilder_write(&tree, builder), "cannot write a tree");
  return tree;
}

git_oid EntryRecorder::empty_tree() {
  TreeBuilderPtr builder = new_builder();
  git_oid tree{};
  check(git_treebuilder_write(&tree, builder.get()), "cannot write a tree");
  return tree;
}

void EntryRecorder::warn(const std::string& path, const std::string& why) {
  if (m_result.warnings.size() >= max_snapshot_warnings) {
    ++m_result.warnings_not_kept;
    return;
  }
  m_result.warnings.push_back(path + ": " + why);
}

bool path_is_ignored(git_repository* repo, const std::string& path) {
  int is_ignored = 0;
  if (git_ignore_path_is_ignored(&is_ignored, repo, path.c_str()) < 0) return false;
  return is_ignored == 1;
}

}  // namespace mullet::git::detail
