#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::util {

namespace {

// Reads `fd` to its end; past `max_bytes` (0: no cap) throws naming `path`.
std::string read_to_end(int fd, const std::string& path, std::size_t max_bytes) {
  std::string content;
  char buffer[65536];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      throw failure("cannot read " + path + ": " + errno_text(errno));
    }
    content.append(buffer, static_cast<std::size_t>(got));
    if (max_bytes > 0 && content.size() > max_bytes) {
      throw failure(path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return content;
}

}  // namespace

std::optional<std::string> read_file_if_exists(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw failure("cannot read " + path + ": " + errno_text(errno));
  }
  return read_to_end(fd.get(), path, 0);
}

std::optional<std::string> read_regular_file_if_exists(const std::string& path, std::size_t max_bytes) {
  // stat() first, so that a device is never opened (opening some has effects);
  // fstat() again after the open for what was really opened. O_NONBLOCK: a
  // FIFO swapped in between must not wait for a writer.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) return std::nullopt;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw failure("cannot read " + path + ": " + errno_text(errno));
  }
  if (!S_ISREG(info.st_mode) || ::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw failure(path + " is not a regular file");
  }
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    throw failure(path + " is " + std::to_string(info.st_size) + " bytes long; at most " + std::to_string(max_bytes) +
                  " are allowed");
  }
  // The cap again while reading: the file may grow after fstat().
  return read_to_end(fd.get(), path, max_bytes);
}

std::optional<std::string> read_file_tail(const std::string& path, std::size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw failure("cannot read " + path + ": " + errno_text(errno));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw failure("cannot read " + path + ": " + errno_text(errno));
  if (!S_ISREG(info.st_mode)) throw failure("cannot read " + path + ": not a regular file");
  const auto size = static_cast<std::uint64_t>(info.st_size);
  // One byte more than asked, so tail() sees whether there was more.
  const std::uint64_t want = std::min<std::uint64_t>(size, static_cast<std::uint64_t>(max_bytes) + 1);
  std::string content(static_cast<std::size_t>(want), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t got =
        ::pread(fd.get(), content.data() + done, content.size() - done, static_cast<off_t>(size - want + done));
    if (got == 0) break;  // the file shrank meanwhile
    if (got < 0) {
      if (errno == EINTR) continue;
      throw failure("cannot read " + path + ": " + errno_text(errno));
    }
    done += static_cast<std::size_t>(got);
  }
  content.resize(done);
  return tail(content, max_bytes);
}

std::optional<std::string> read_proc_file(const std::string& path) {
  try {
    return read_file_if_exists(path);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string read_file(const std::string& path) {
  auto content = read_file_if_exists(path);
  if (!content) throw failure("cannot read " + path + ": " + errno_text(ENOENT));
  return *content;
}

void write_file(const std::string& path, const std::string& content, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) throw failure("cannot write " + path + ": " + errno_text(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t put = ::write(fd.get(), content.data() + done, content.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      throw failure("cannot write " + path + ": " + errno_text(errno));
    }
    done += static_cast<std::size_t>(put);
  }
}

void write_file_atomic(const std::string& path, const std::string& content, mode_t mode) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  write_file(temporary, content, mode);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw failure("cannot write " + path + ": " + errno_text(saved));
  }
}

void make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return;
  std::string prefix;
  for (const auto& part : split(path, '/')) {
    if (!prefix.empty() || path[0] == '/') prefix += '/';
    prefix += part;
    if (part.empty()) continue;
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      throw failure("cannot create directory " + prefix + ": " + errno_text(errno));
    }
  }
}

namespace {

// The whole listing of `dir_fd`, read before anything in it changes;
// throws `what` + `shown_path` when it cannot be read to its end.
std::vector<DirectoryEntry> list_or_throw(int dir_fd, const std::string& what, const std::string& shown_path) {
  DirectoryReader listing(dir_fd);
  auto entries = listing.read_all();
  if (listing.error() != 0) throw failure(what + shown_path + ": " + errno_text(listing.error()));
  return entries;
}

// Where remove_children puts the directories it finds at max_walk_depth:
// the top of the tree being removed, each under a name no entry there has.
struct DeepDirMover {
  int top_fd = -1;
  std::uint64_t next_name = 0;  // shared by every round, so names never repeat
  std::uint64_t moved = 0;      // in this round

  void move_up(int dir_fd, const std::string& name, const std::string& shown_path) {
    while (true) {
      const std::string fresh = ".mullet-deep-" + std::to_string(next_name++);
      if (::renameat2(dir_fd, name.c_str(), top_fd, fresh.c_str(), RENAME_NOREPLACE) == 0) break;
      if (errno != EEXIST) throw failure("cannot remove " + shown_path + "/" + name + ": " + errno_text(errno));
    }
    ++moved;
  }
};

void remove_children(int dir_fd, const std::string& shown_path, int depth, DeepDirMover& mover) {
  for (const auto& entry : list_or_throw(dir_fd, "cannot remove ", shown_path)) {
    const std::string& name = entry.name;
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR && errno != EPERM)
      throw failure("cannot remove " + shown_path + "/" + name + ": " + errno_text(errno));
    if (depth + 1 >= max_walk_depth) {
      mover.move_up(dir_fd, name, shown_path);
      continue;
    }
    UniqueFd child = open_granting_access(dir_fd, name, O_RDONLY | O_DIRECTORY, 0700);
    if (!child) throw failure("cannot remove " + shown_path + "/" + name + ": " + errno_text(errno));
    ::fchmod(child.get(), 0700);
    remove_children(child.get(), shown_path + "/" + name, depth + 1, mover);
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      throw failure("cannot remove " + shown_path + "/" + name + ": " + errno_text(errno));
    }
  }
}

// A directory opened for reading, opened up first (mode 0700) when its
// owner made it unreadable; its mode comes back when this ends.
struct OpenedDir {
  UniqueFd fd;
  UniqueFd path_only;  // set when the mode must come back
  mode_t mode = 0;
  OpenedDir() = default;
  OpenedDir(OpenedDir&&) = default;
  OpenedDir& operator=(OpenedDir&&) = default;
  ~OpenedDir() {
    if (path_only) chmod_open_path(path_only.get(), mode);
  }
};

OpenedDir open_walkable(int at_fd, const char* name) {
  OpenedDir dir;
  dir.fd.reset(::openat(at_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.fd || errno != EACCES) return dir;
  UniqueFd path_only(::openat(at_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat info {};
  if (!path_only || ::fstat(path_only.get(), &info) != 0) return dir;
  if (!chmod_open_path(path_only.get(), 0700)) {
    errno = EACCES;
    return dir;
  }
  dir.mode = info.st_mode & 07777;
  dir.path_only = std::move(path_only);
  dir.fd.reset(::openat(at_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return dir;
}

// What a walk is told about each entry below its root.
struct WalkVisitor {
  // Every entry, parents before children.
  std::function<void(int dir_fd, const std::string& name, const struct stat& info)> visit;
  // A directory at max_walk_depth, which the walk does not enter.
  std::function<void(int dir_fd, const std::string& name, const std::string& shown_path)> too_deep;
};

// Calls the visitor for every entry below `dir_fd` (never following a
// symlink). A directory the writer made unreadable is opened up for the walk
// and gets its mode back afterwards.
void walk_children(int dir_fd, const std::string& shown_path, int depth, const WalkVisitor& visitor) {
  for (const auto& entry : list_or_throw(dir_fd, "cannot list ", shown_path)) {
    const std::string& name = entry.name;
    struct stat info {};
    if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      throw failure("cannot inspect " + shown_path + "/" + name + ": " + errno_text(errno));
    }
    visitor.visit(dir_fd, name, info);
    if (!S_ISDIR(info.st_mode)) continue;
    if (depth + 1 >= max_walk_depth) {
      visitor.too_deep(dir_fd, name, shown_path);
      continue;
    }
    OpenedDir child = open_walkable(dir_fd, name.c_str());
    if (!child.fd) throw failure("cannot open " + shown_path + "/" + name + ": " + errno_text(errno));
    walk_children(child.fd.get(), shown_path + "/" + name, depth + 1, visitor);
  }
}

std::string too_deep_text() {
  return "nested deeper than " + std::to_string(max_walk_depth) + " directories";
}

// What nothing a sandbox wrote may keep once on the host.
constexpr mode_t unsafe_bits = S_ISUID | S_ISGID | S_IWOTH;

void strip_one(int dir_fd, const std::string& name, const struct stat& info, const std::string& shown_path) {
  if ((!S_ISREG(info.st_mode) && !S_ISDIR(info.st_mode)) || (info.st_mode & unsafe_bits) == 0) return;
  UniqueFd entry(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  struct stat again {};
  if (!entry || ::fstat(entry.get(), &again) != 0 || (again.st_mode & S_IFMT) != (info.st_mode & S_IFMT)) {
    throw failure("cannot clear the setuid/setgid bits of " + shown_path + "/" + name + ": " + errno_text(errno));
  }
  if (!chmod_open_path(entry.get(), again.st_mode & 07777 & ~unsafe_bits)) {
    throw failure("cannot clear the setuid/setgid bits of " + shown_path + "/" + name + ": " + errno_text(errno));
  }
}

// A running sandbox changes the tree under the walk: what cannot be read is
// skipped (the free-space glance in the runner is the backstop).
// A file of several links holds its blocks once; each further link is an
// entry (counted as the least an entry costs), not another copy.
using SeenInodes = std::set<std::pair<dev_t, ino_t>>;

void add_usage(int dir_fd, std::uint64_t& total, std::uint64_t stop_after, int depth, SeenInodes& linked) {
  DirectoryReader listing(dir_fd);
  while (const auto entry = listing.next()) {
    if (stop_after > 0 && total > stop_after) break;
    const char* name = entry->name.c_str();
    struct stat info {};
    if (::fstatat(dir_fd, name, &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool counted_before =
        !S_ISDIR(info.st_mode) && info.st_nlink > 1 && !linked.insert({info.st_dev, info.st_ino}).second;
    total +=
        counted_before ? min_entry_bytes : std::max(static_cast<std::uint64_t>(info.st_blocks) * 512U, min_entry_bytes);
    if (!S_ISDIR(info.st_mode)) continue;
    if (depth + 1 >= max_walk_depth) {
      total = disk_usage_too_deep;
      return;
    }
    // A directory the writer made unreadable still counts.
    const UniqueFd child = open_granting_access(dir_fd, entry->name, O_RDONLY | O_DIRECTORY, 0700);
    if (child) add_usage(child.get(), total, stop_after, depth + 1, linked);
    if (total == disk_usage_too_deep) return;
  }
}

}  // namespace

std::uint64_t disk_usage(const std::string& path, std::uint64_t stop_after) {
  std::uint64_t total = 0;
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  SeenInodes linked;
  if (dir) add_usage(dir.get(), total, stop_after, 0, linked);
  return total;
}

void remove_tree(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return;
    throw failure("cannot remove " + path + ": " + errno_text(errno));
  }
  if (!S_ISDIR(info.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw failure("cannot remove " + path + ": " + errno_text(errno));
    return;
  }
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) throw failure("cannot remove " + path + ": " + errno_text(errno));
  ::fchmod(dir.get(), 0700);
  // Each round removes what lies within max_walk_depth and brings the next
  // max_walk_depth levels up to the top for the round after it.
  DeepDirMover mover{dir.get()};
  do {
    mover.moved = 0;
    remove_children(dir.get(), path, 0, mover);
  } while (mover.moved > 0);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) throw failure("cannot remove " + path + ": " + errno_text(errno));
}

void chown_tree(const std::string& path, uid_t uid, gid_t gid) {
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) throw failure("cannot change owner of " + path + ": " + errno_text(errno));
  if (::fchown(dir.get(), uid, gid) != 0) throw failure("cannot change owner of " + path + ": " + errno_text(errno));
  WalkVisitor visitor;
  visitor.visit = [&](int dir_fd, const std::string& name, const struct stat&) {
    if (::fchownat(dir_fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT) {
      throw failure("cannot change owner of " + path + "/.../" + name + ": " + errno_text(errno));
    }
  };
  visitor.too_deep = [](int, const std::string& name, const std::string& shown_path) {
    throw failure("cannot change owner of " + shown_path + "/" + name + ": " + too_deep_text());
  };
  walk_children(dir.get(), path, 0, visitor);
}

void strip_unsafe_modes(const std::string& path) {
  if (!exists(path)) return;
  OpenedDir dir = open_walkable(AT_FDCWD, path.c_str());
  if (!dir.fd) throw failure("cannot clear the setuid/setgid bits under " + path + ": " + errno_text(errno));
  WalkVisitor visitor;
  visitor.visit = [&](int dir_fd, const std::string& name, const struct stat& entry) {
    strip_one(dir_fd, name, entry, path);
  };
  visitor.too_deep = [](int dir_fd, const std::string& name, const std::string& shown_path) {
    const UniqueFd entry(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat info {};
    if (!entry || ::fstat(entry.get(), &info) != 0 || !S_ISDIR(info.st_mode) || !chmod_open_path(entry.get(), 0700)) {
      throw failure("cannot close " + shown_path + "/" + name + " (" + too_deep_text() + "): " + errno_text(errno));
    }
  };
  walk_children(dir.fd.get(), path, 0, visitor);
  if (dir.path_only) {
    dir.mode &= ~unsafe_bits;  // restored so when `dir` closes
    return;
  }
  struct stat info {};
  if (::fstat(dir.fd.get(), &info) != 0 || ::fchmod(dir.fd.get(), info.st_mode & 07777 & ~unsafe_bits) != 0) {
    throw failure("cannot clear the setuid/setgid bits of " + path + ": " + errno_text(errno));
  }
}

void make_private_dirs(const std::string& base, const std::string& relative) {
  UniqueFd current(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current) throw failure("cannot open " + base + ": " + errno_text(errno));
  std::string walked = base;
  for (const auto& part : split(relative, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") throw failure("cannot create " + base + "/" + relative + ": it contains '..'");
    walked += "/" + part;
    if (::mkdirat(current.get(), part.c_str(), 0700) != 0 && errno != EEXIST) {
      throw failure("cannot create directory " + walked + ": " + errno_text(errno));
    }
    UniqueFd next(::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat info {};
    if (!next || ::fstat(next.get(), &info) != 0) {
      throw refused_error("cannot open " + walked + " as a directory: " + errno_text(errno),
                          "it must be a directory (not a symlink) of the user running git-mullet; remove it");
    }
    if (info.st_uid != ::geteuid()) {
      throw refused_error(walked + " belongs to uid " + std::to_string(info.st_uid) + ", not to uid " +
                              std::to_string(::geteuid()) + " running git-mullet",
                          "git-mullet keeps its scratch directories private to their owner; remove it or run "
                          "git-mullet as its owner");
    }
    // Tightened when an older version left it open (0711, 0755).
    if ((info.st_mode & 07777) != 0700 && ::fchmod(next.get(), 0700) != 0) {
      throw failure("cannot make " + walked + " private: " + errno_text(errno));
    }
    current = std::move(next);
  }
}

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    throw failure("cannot resolve " + path + ": " + errno_text(errno));
  }
  return resolved;
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string self_executable() {
  return real_path("/proc/self/exe");
}

std::string make_temp_dir(const std::string& parent, const std::string& prefix) {
  std::string pattern = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw failure("cannot create a directory in " + parent + ": " + errno_text(errno));
  }
  return pattern;
}

bool chmod_open_path(int path_fd, mode_t mode) {
  // chmod() of the descriptor's /proc entry reaches the very inode it was
  // opened on (fchmod refuses O_PATH descriptors), so a name swapped for a
  // symlink meanwhile is never followed.
  return ::chmod(("/proc/self/fd/" + std::to_string(path_fd)).c_str(), mode) == 0;
}

UniqueFd open_granting_access(int at_fd, const std::string& name, int flags, mode_t mode_if_denied) {
  UniqueFd opened(::openat(at_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
  if (opened || errno != EACCES) return opened;
  const UniqueFd path_only(::openat(at_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!path_only) return opened;
  if (!chmod_open_path(path_only.get(), mode_if_denied)) {
    errno = EACCES;
    return opened;
  }
  opened.reset(::openat(at_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
  return opened;
}

DirectoryReader::DirectoryReader(int dir_fd) {
  // A descriptor of our own (closedir closes it), close-on-exec unlike dup().
  // It shares the caller's file offset, hence the rewind.
  adopt(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (m_dir != nullptr) ::rewinddir(m_dir);
}

DirectoryReader::DirectoryReader(int at_fd, const std::string& name) {
  adopt(::openat(at_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

void DirectoryReader::adopt(int own_fd) {
  if (own_fd < 0) {
    m_error = errno;
    return;
  }
  m_dir = ::fdopendir(own_fd);
  if (m_dir == nullptr) {
    m_error = errno;
    ::close(own_fd);
  }
}

DirectoryReader::DirectoryReader(DirectoryReader&& other) noexcept
    : m_dir(std::exchange(other.m_dir, nullptr)), m_error(other.m_error) {}

DirectoryReader& DirectoryReader::operator=(DirectoryReader&& other) noexcept {
  if (this != &other) {
    close();
    m_dir = std::exchange(other.m_dir, nullptr);
    m_error = other.m_error;
  }
  return *this;
}

DirectoryReader::~DirectoryReader() {
  close();
}

void DirectoryReader::close() noexcept {
  if (m_dir != nullptr) ::closedir(m_dir);
  m_dir = nullptr;
}

std::optional<DirectoryEntry> DirectoryReader::next() {
  if (m_dir == nullptr || m_error != 0) return std::nullopt;
  while (true) {
    // readdir() answers nullptr both at the end and on an error; only errno
    // tells them apart.
    errno = 0;
    const dirent* entry = ::readdir(m_dir);
    if (entry == nullptr) {
      m_error = errno;
      return std::nullopt;
    }
    const char* name = entry->d_name;
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
    return DirectoryEntry{name, entry->d_type};
  }
}

std::vector<DirectoryEntry> DirectoryReader::read_all() {
  std::vector<DirectoryEntry> entries;
  while (auto entry = next()) entries.push_back(std::move(*entry));
  return entries;
}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    remove();
    m_path = std::move(other.m_path);
    other.m_path.clear();
  }
  return *this;
}

void TempDir::remove() noexcept {
  if (m_path.empty()) return;
  try {
    remove_tree(m_path);
  } catch (...) {
    // A temporary directory left behind is not worth failing (or
    // terminating) for; the path is under /tmp.
  }
  m_path.clear();
}

UniqueFd open_path_no_symlinks(const std::string& path) {
  if (path.empty() || path[0] != '/') throw refused_error("bind source is not an absolute path: " + path);
  UniqueFd current(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current) throw failure("cannot open /: " + errno_text(errno));
  std::string walked;
  for (const auto& part : split(path.substr(1), '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") throw refused_error("bind source contains '..': " + path);
    walked += "/" + part;
    UniqueFd next(::openat(current.get(), part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      if (errno == ENOENT) throw refused_error("bind source does not exist: " + walked);
      throw refused_error("cannot open bind source " + walked + ": " + errno_text(errno));
    }
    struct stat info {};
    if (::fstat(next.get(), &info) != 0)
      throw refused_error("cannot inspect bind source " + walked + ": " + errno_text(errno));
    if (S_ISLNK(info.st_mode)) {
      throw refused_error("bind source " + path + " has a symlink at " + walked,
                          "bind the real path instead; symlinks in bind sources are never followed");
    }
    current = std::move(next);
  }
  return current;
}

int open_path_no_symlinks_raw(const char* path) {
  if (path == nullptr || path[0] != '/') {
    errno = EINVAL;
    return -1;
  }
  int current = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char* at = path + 1;
  while (current >= 0 && *at != '\0') {
    // One component at a time into the stack: this runs in forked children,
    // where nothing may allocate.
    char part[NAME_MAX + 1];
    std::size_t length = 0;
    while (*at != '\0' && *at != '/') {
      if (length == NAME_MAX) {
        ::close(current);
        errno = ENAMETOOLONG;
        return -1;
      }
      part[length++] = *at++;
    }
    part[length] = '\0';
    if (*at == '/') ++at;
    if (length == 0 || (length == 1 && part[0] == '.')) continue;
    if (length == 2 && part[0] == '.' && part[1] == '.') {
      ::close(current);
      errno = EINVAL;
      return -1;
    }
    const int next = ::openat(current, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    const int saved = errno;
    ::close(current);
    if (next < 0) {
      errno = saved;
      return -1;
    }
    struct stat info {};
    if (::fstat(next, &info) != 0 || S_ISLNK(info.st_mode)) {
      ::close(next);
      errno = ELOOP;
      return -1;
    }
    current = next;
  }
  return current;
}

}  // namespace mullet::util
