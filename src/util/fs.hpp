// File-system helpers that never follow a symlink they were not asked to.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/fd.hpp"

namespace mullet::util {

// Reads a whole file; throws mullet::Error naming the path on failure.
std::string read_file(const std::string& path);
// Reads a file if it exists; nullopt when it does not.
std::optional<std::string> read_file_if_exists(const std::string& path);
// Reads a regular file of at most `max_bytes` (symlinks to one are fine):
// FIFOs, devices and directories are refused without blocking or reading, and
// so is a larger file. nullopt when it does not exist.
std::optional<std::string> read_regular_file_if_exists(const std::string& path, std::size_t max_bytes);
// The last max_bytes of a file, read with pread so a file of any size costs
// only that much memory; when it was longer, the text starts with tail()'s
// cut marker. nullopt when it does not exist. Never follows a symlink.
std::optional<std::string> read_file_tail(const std::string& path, std::size_t max_bytes);
// A file under /proc that may vanish while being read (its process ended):
// nullopt on any error.
std::optional<std::string> read_proc_file(const std::string& path);
// Writes through a temporary file and rename(), so readers never see half a file.
void write_file_atomic(const std::string& path, const std::string& content, mode_t mode = 0644);
void write_file(const std::string& path, const std::string& content, mode_t mode = 0644);
// mkdir -p; existing directories are fine.
void make_dirs(const std::string& path, mode_t mode = 0755);
// How deep below its root any walk of ours goes. A worker (or a hostile
// repository) can nest directories as deep as it likes; a walk that followed
// would run out of stack or of descriptors (one per level). The snapshot
// leaves deeper directories out, and every walk here says what it does at
// this depth instead of descending.
constexpr int max_walk_depth = 128;
// What an entry costs at least, whatever st_blocks says: an empty file or a
// short symlink takes an inode and a directory entry, and a loose object of
// at least a block once the snapshot stores it.
constexpr std::uint64_t min_entry_bytes = 4096;

// rm -rf that never follows a symlink and copes with directories the worker
// made unreadable. Missing paths are fine. A directory at max_walk_depth is
// moved up to `path` under a fresh name and removed from there, so a tree of
// any depth goes with at most max_walk_depth descriptors open.
void remove_tree(const std::string& path);
// chown -R without following symlinks. A tree nested deeper than
// max_walk_depth is refused (nothing a job checks out or creates is).
void chown_tree(const std::string& path, uid_t uid, gid_t gid);
// Clears the setuid and setgid bits and write permission for others on
// `path` and everything below it, without following symlinks: what a
// sandbox wrote must not become a way in for another local user. Copes
// with directories the writer made unreadable (they keep their mode). A
// directory at max_walk_depth is not entered but closed to all but its
// owner (mode 0700), so nothing below it is within another user's reach.
void strip_unsafe_modes(const std::string& path);
// mkdir -p of `relative` below the existing directory `base`, every new or
// existing component a directory of ours with mode 0700 (a looser one is
// tightened); a symlink or a directory of another owner refuses.
void make_private_dirs(const std::string& base, const std::string& relative);
std::string real_path(const std::string& path);
bool exists(const std::string& path);
bool is_directory(const std::string& path);
// Path of the running executable.
std::string self_executable();
// Bytes allocated under `path` (st_blocks, at least min_entry_bytes an
// entry), without following symlinks; stops counting once past `stop_after`
// (0: never). A tree nested deeper than max_walk_depth is over any limit:
// the answer is then disk_usage_too_deep.
std::uint64_t disk_usage(const std::string& path, std::uint64_t stop_after = 0);
constexpr std::uint64_t disk_usage_too_deep = std::numeric_limits<std::uint64_t>::max();
// A fresh private directory under `parent` (mkdtemp); returns its path.
std::string make_temp_dir(const std::string& parent, const std::string& prefix);

// A fresh private directory (make_temp_dir) whose tree is removed
// (remove_tree) when this goes away. Move-only; an empty one owns nothing.
class TempDir {
 public:
  TempDir() = default;
  TempDir(const std::string& parent, const std::string& prefix) : m_path(make_temp_dir(parent, prefix)) {}
  TempDir(TempDir&& other) noexcept : m_path(std::move(other.m_path)) { other.m_path.clear(); }
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { remove(); }

  const std::string& path() const { return m_path; }
  bool empty() const { return m_path.empty(); }
  // Removes the tree now; errors are not reported (this runs on unwinding).
  void remove() noexcept;
  // Stops owning the directory (it was renamed into place); returns its path.
  std::string release() noexcept { return std::exchange(m_path, {}); }

 private:
  std::string m_path;
};

// One entry of a directory listing ("." and ".." are never among them).
struct DirectoryEntry {
  std::string name;
  // d_type: DT_DIR, DT_REG, DT_LNK, ...; DT_UNKNOWN where the file system
  // does not say (callers that must know lstat the entry anyway).
  unsigned char type = DT_UNKNOWN;
};

// Lists one directory through a DIR* it owns. Never follows a symlink: it
// reads a directory the caller already opened, or opens one relative to a
// directory descriptor with O_NOFOLLOW. Failures are kept, not thrown, so
// each caller decides what a directory it cannot read means (a failure, a
// warning in the snapshot, or nothing for a /proc entry that vanished); a
// listing that stops early is never mistaken for a complete one.
// Allocates: never use it between fork and exec.
// Changes the mode of the inode `path_fd` (an O_PATH descriptor) is open on,
// never following a name; false with errno set when it could not.
bool chmod_open_path(int path_fd, mode_t mode);

// Opens `name` below `at_fd` (O_NOFOLLOW|O_CLOEXEC added to `flags`). An
// entry its owner (the worker) made unreadable is given `mode_if_denied`
// first and opened once more: needed when git-mullet is not root. An empty
// descriptor, with errno set, when it cannot be opened.
UniqueFd open_granting_access(int at_fd, const std::string& name, int flags, mode_t mode_if_denied);

class DirectoryReader {
 public:
  // Reads the directory `dir_fd` is open on (O_RDONLY|O_DIRECTORY), from its
  // start, through a descriptor of its own: `dir_fd` stays the caller's.
  explicit DirectoryReader(int dir_fd);
  // Opens `name` relative to `at_fd` (AT_FDCWD for a path) as a directory,
  // refusing a symlink in its last component.
  DirectoryReader(int at_fd, const std::string& name);
  DirectoryReader(DirectoryReader&& other) noexcept;
  DirectoryReader& operator=(DirectoryReader&& other) noexcept;
  DirectoryReader(const DirectoryReader&) = delete;
  DirectoryReader& operator=(const DirectoryReader&) = delete;
  ~DirectoryReader();

  // False when the directory could not be opened; error() says why.
  bool is_open() const { return m_dir != nullptr; }
  // The next entry; nullopt at the end, and when reading failed (error()
  // tells the two apart).
  std::optional<DirectoryEntry> next();
  // Every entry not read yet, in the order the file system gives them.
  std::vector<DirectoryEntry> read_all();
  // The errno of what stopped the listing early (opening or reading); 0
  // while nothing did.
  int error() const { return m_error; }

 private:
  // Takes `own_fd` (or the errno of its failed opening, when negative).
  void adopt(int own_fd);
  void close() noexcept;
  DIR* m_dir = nullptr;
  int m_error = 0;
};

// Opens `path` (absolute) one component at a time with O_PATH|O_NOFOLLOW, so
// that no component, the last included, can be a symlink. Throws a refusal
// naming the component when one is.
UniqueFd open_path_no_symlinks(const std::string& path);
// The same walk without exceptions or allocation (for a forked child): a
// descriptor, or -1 with errno set (ELOOP for a symlink component).
int open_path_no_symlinks_raw(const char* path);
inline int open_path_no_symlinks_raw(const std::string& path) {
  return open_path_no_symlinks_raw(path.c_str());
}

}  // namespace mullet::util
