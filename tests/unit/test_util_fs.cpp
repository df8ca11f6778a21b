#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::Error;
using mullet::ExitCode;
using mullet::UniqueFd;
using mullet::test::make_file;
using mullet::test::ScratchDir;
using mullet::util::DirectoryReader;
using mullet::util::disk_usage;
using mullet::util::open_path_no_symlinks;
using mullet::util::open_path_no_symlinks_raw;
using mullet::util::read_file;
using mullet::util::remove_tree;
using mullet::util::write_file_atomic;

namespace {

constexpr uid_t nobody = 65534;

bool exists_no_follow(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

ino_t inode_of(const std::string& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_ino;
}

ino_t inode_of_fd(int fd) {
  struct stat info {};
  REQUIRE(::fstat(fd, &info) == 0);
  return info.st_ino;
}

// Expects open_path_no_symlinks to refuse `path` with a message holding `part`.
void expect_refused(const std::string& path, const std::string& part) {
  INFO("path: " << path);
  try {
    const UniqueFd fd = open_path_no_symlinks(path);
    FAIL("opened, fd " << fd.get());
  } catch (const Error& error) {
    CHECK(error.code() == ExitCode::refused);
    INFO("message: " << error.what());
    CHECK(std::string(error.what()).find(part) != std::string::npos);
  }
}

// Runs `body` as an unprivileged user, so permission bits apply even when the
// tests run as root; returns body's result (or 99 when it threw).
int run_unprivileged(const std::string& dir, const std::function<int()>& body) {
  auto guarded = [&]() {
    try {
      return body();
    } catch (...) {
      return 99;
    }
  };
  if (::geteuid() != 0) return guarded();
  REQUIRE(::chown(dir.c_str(), nobody, nobody) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0) ::_exit(98);
    ::_exit(guarded());
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("open_path_no_symlinks opens a real path") {
  ScratchDir dir;
  fs::create_directories(dir / "a/b");
  make_file(dir / "a/b/file");
  const UniqueFd fd = open_path_no_symlinks(dir / "a/b/file");
  REQUIRE(fd);
  CHECK(inode_of_fd(fd.get()) == inode_of(dir / "a/b/file"));
  // An O_PATH descriptor: good for binding, not for reading.
  CHECK((::fcntl(fd.get(), F_GETFL) & O_PATH) == O_PATH);
  CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);

  const UniqueFd dir_fd = open_path_no_symlinks(dir / "a/b");
  CHECK(inode_of_fd(dir_fd.get()) == inode_of(dir / "a/b"));
  // Doubled and trailing slashes and "." are harmless.
  const UniqueFd odd = open_path_no_symlinks(dir.path() + "//a/./b/");
  CHECK(inode_of_fd(odd.get()) == inode_of(dir / "a/b"));
  const UniqueFd root = open_path_no_symlinks("/");
  CHECK(inode_of_fd(root.get()) == inode_of("/"));
}

TEST_CASE("open_path_no_symlinks refuses a symlink anywhere in the path") {
  ScratchDir dir;
  fs::create_directories(dir / "real/sub");
  make_file(dir / "real/sub/file");
  fs::create_directory_symlink(dir / "real", dir / "link");
  fs::create_symlink(dir / "real/sub/file", dir / "real/sub/file-link");
  fs::create_symlink("sub", dir / "real/relative-link");
  fs::create_symlink(dir / "nowhere", dir / "dangling");

  SUBCASE("a directory component") {
    expect_refused(dir / "link/sub/file", "has a symlink at " + (dir / "link"));
  }
  SUBCASE("the last component") {
    expect_refused(dir / "real/sub/file-link", "has a symlink at " + (dir / "real/sub/file-link"));
  }
  SUBCASE("a relative link") {
    expect_refused(dir / "real/relative-link/file", "relative-link");
  }
  SUBCASE("a dangling link") {
    expect_refused(dir / "dangling", "has a symlink at " + (dir / "dangling"));
  }
  SUBCASE("a link to a directory as the last component") {
    expect_refused(dir / "link", "symlink");
  }
}

TEST_CASE("open_path_no_symlinks refuses what is not a plain absolute path") {
  ScratchDir dir;
  fs::create_directories(dir / "a");
  expect_refused(dir / "missing/file", "does not exist: " + (dir / "missing"));
  expect_refused(dir / "a/missing", "does not exist");
  expect_refused("relative/path", "not an absolute path");
  expect_refused("", "not an absolute path");
  expect_refused(dir / "a/../a", "'..'");
}

TEST_CASE("open_path_no_symlinks_raw: the same walk without exceptions") {
  ScratchDir dir;
  fs::create_directories(dir / "real/sub");
  make_file(dir / "real/sub/file");
  fs::create_directory_symlink(dir / "real", dir / "link");
  fs::create_symlink(dir / "real/sub/file", dir / "real/sub/file-link");

  SUBCASE("a real path") {
    const UniqueFd fd(open_path_no_symlinks_raw(dir / "real/sub/file"));
    REQUIRE(fd);
    CHECK(inode_of_fd(fd.get()) == inode_of(dir / "real/sub/file"));
    const UniqueFd trailing(open_path_no_symlinks_raw(dir / "real/sub/"));
    REQUIRE(trailing);
    CHECK(inode_of_fd(trailing.get()) == inode_of(dir / "real/sub"));
  }
  SUBCASE("a symlink component") {
    errno = 0;
    CHECK(open_path_no_symlinks_raw(dir / "link/sub/file") == -1);
    CHECK(errno == ELOOP);
  }
  SUBCASE("a symlink as the last component") {
    errno = 0;
    CHECK(open_path_no_symlinks_raw(dir / "real/sub/file-link") == -1);
    CHECK(errno == ELOOP);
  }
  SUBCASE("missing") {
    errno = 0;
    CHECK(open_path_no_symlinks_raw(dir / "real/missing/file") == -1);
    CHECK(errno == ENOENT);
  }
  SUBCASE("relative or with ..") {
    errno = 0;
    CHECK(open_path_no_symlinks_raw("real/sub") == -1);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(open_path_no_symlinks_raw("") == -1);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(open_path_no_symlinks_raw(dir / "real/../link") == -1);
    CHECK(errno == EINVAL);
  }
  SUBCASE("empty and . components") {
    const UniqueFd fd(open_path_no_symlinks_raw(dir.path() + "//real/./sub//file"));
    REQUIRE(fd);
    CHECK(inode_of_fd(fd.get()) == inode_of(dir / "real/sub/file"));
  }
  SUBCASE("a component longer than a name can be") {
    errno = 0;
    CHECK(open_path_no_symlinks_raw(dir / ("real/" + std::string(NAME_MAX + 1, 'x'))) == -1);
    CHECK(errno == ENAMETOOLONG);
  }
}

TEST_CASE("open_path_no_symlinks_raw leaks no descriptor on any path") {
  ScratchDir dir;
  fs::create_directories(dir / "real/sub");
  fs::create_directory_symlink(dir / "real", dir / "link");
  const int probe_before = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(probe_before >= 0);
  ::close(probe_before);
  for (int i = 0; i < 20; ++i) {
    CHECK(open_path_no_symlinks_raw(dir / "link/sub") == -1);
    CHECK(open_path_no_symlinks_raw(dir / "real/missing") == -1);
    CHECK(open_path_no_symlinks_raw(dir / "real/../real") == -1);
    ::close(open_path_no_symlinks_raw(dir / "real/sub"));
  }
  // The lowest free descriptor is still the same one.
  const int probe_after = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(probe_after == probe_before);
  ::close(probe_after);
}

TEST_CASE("remove_tree removes a tree with an unreadable directory and keeps symlink targets") {
  ScratchDir outside;
  fs::create_directories(outside / "keep/inner");
  make_file(outside / "keep/inner/precious", "precious");
  make_file(outside / "lone-file", "lone");

  ScratchDir base;
  const std::string tree = base / "tree";
  fs::create_directories(tree + "/locked/deeper/deepest");
  fs::create_directories(tree + "/readonly");
  make_file(tree + "/top");
  make_file(tree + "/locked/secret");
  make_file(tree + "/locked/deeper/deepest/x");
  make_file(tree + "/readonly/file");
  fs::create_directory_symlink(outside / "keep", tree + "/link-to-dir");
  fs::create_symlink(outside / "lone-file", tree + "/link-to-file");
  fs::create_directory_symlink(outside / "keep", tree + "/locked/deeper/escape");
  if (::geteuid() == 0) {
    // The child below runs as nobody: it must own what a worker would have made.
    for (const auto& entry : fs::recursive_directory_iterator(tree)) {
      REQUIRE(::lchown(entry.path().c_str(), nobody, nobody) == 0);
    }
    REQUIRE(::chown(tree.c_str(), nobody, nobody) == 0);
  }
  REQUIRE(::chmod((tree + "/locked/deeper/deepest").c_str(), 0) == 0);
  REQUIRE(::chmod((tree + "/locked/deeper").c_str(), 0) == 0);
  REQUIRE(::chmod((tree + "/locked").c_str(), 0) == 0);
  REQUIRE(::chmod((tree + "/readonly").c_str(), 0500) == 0);

  const int result = run_unprivileged(base.path(), [&]() {
    remove_tree(tree);
    return exists_no_follow(tree) ? 1 : 0;
  });
  CHECK(result == 0);
  CHECK_FALSE(exists_no_follow(tree));
  // The symlinks were removed, not followed.
  CHECK(read_file(outside / "keep/inner/precious") == "precious");
  CHECK(read_file(outside / "lone-file") == "lone");
  CHECK(fs::is_directory(outside / "keep/inner"));
}

TEST_CASE("remove_tree on a file, a symlink and a missing path") {
  ScratchDir dir;
  make_file(dir / "file");
  fs::create_directories(dir / "target");
  make_file(dir / "target/kept");
  fs::create_directory_symlink(dir / "target", dir / "link");

  remove_tree(dir / "file");
  CHECK_FALSE(exists_no_follow(dir / "file"));
  // A symlink given as the tree itself is removed, its target left alone.
  remove_tree(dir / "link");
  CHECK_FALSE(exists_no_follow(dir / "link"));
  CHECK(exists_no_follow(dir / "target/kept"));
  CHECK_NOTHROW(remove_tree(dir / "missing"));
  CHECK_NOTHROW(remove_tree(dir / "missing/deeper"));
}

TEST_CASE("write_file_atomic writes the whole file with the mode asked for") {
  ScratchDir dir;
  const mode_t old_umask = ::umask(022);
  const std::string path = dir / "config.json";

  write_file_atomic(path, "first\n", 0600);
  CHECK(read_file(path) == "first\n");
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0600);

  // Replacing gives a new file (rename), not a rewrite in place.
  const ino_t before = inode_of(path);
  const std::string big(200000, 'z');
  write_file_atomic(path, big);
  CHECK(read_file(path) == big);
  CHECK(inode_of(path) != before);

  write_file_atomic(path, "");
  CHECK(read_file(path).empty());

  // No temporary file is left beside it.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  CHECK(names == std::vector<std::string>{"config.json"});
  ::umask(old_umask);
}

TEST_CASE("write_file_atomic replaces a symlink instead of writing through it") {
  ScratchDir dir;
  make_file(dir / "target", "original");
  fs::create_symlink(dir / "target", dir / "link");
  write_file_atomic(dir / "link", "new");
  CHECK(read_file(dir / "target") == "original");
  CHECK_FALSE(fs::is_symlink(dir / "link"));
  CHECK(read_file(dir / "link") == "new");
}

TEST_CASE("write_file_atomic fails cleanly") {
  ScratchDir dir;
  try {
    write_file_atomic(dir / "missing/file", "x");
    FAIL("no exception");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find(dir / "missing/file") != std::string::npos);
  }
  // Renaming onto a directory fails; the temporary file is cleaned up.
  fs::create_directories(dir / "occupied/child");
  CHECK_THROWS_AS(write_file_atomic(dir / "occupied", "x"), Error);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  CHECK(names == std::vector<std::string>{"occupied"});
}

namespace {

// How many descriptors this process has open.
std::size_t open_descriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

std::map<std::string, unsigned char> entries_of(DirectoryReader& reader) {
  std::map<std::string, unsigned char> found;
  for (const auto& entry : reader.read_all()) CHECK(found.emplace(entry.name, entry.type).second);
  return found;
}

}  // namespace

TEST_CASE("DirectoryReader lists every entry with its type, without . and ..") {
  ScratchDir dir;
  make_file(dir / "file");
  fs::create_directory(dir / "sub");
  fs::create_symlink("sub", dir / "link");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  const UniqueFd dir_fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir_fd);

  DirectoryReader reader(dir_fd.get());
  REQUIRE(reader.is_open());
  const auto found = entries_of(reader);
  CHECK(reader.error() == 0);
  CHECK(found ==
        std::map<std::string, unsigned char>{{"file", DT_REG}, {"sub", DT_DIR}, {"link", DT_LNK}, {"fifo", DT_FIFO}});
  // At the end it stays at the end.
  CHECK_FALSE(reader.next().has_value());
  CHECK(reader.error() == 0);

  DirectoryReader empty(dir_fd.get(), "sub");
  REQUIRE(empty.is_open());
  CHECK(empty.read_all().empty());
  CHECK(empty.error() == 0);
}

TEST_CASE("DirectoryReader reads a descriptor from its start and leaves it to the caller") {
  ScratchDir dir;
  for (const char* name : {"a", "b", "c"}) make_file(dir / name);
  const UniqueFd dir_fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir_fd);
  const std::size_t before = open_descriptors();
  {
    DirectoryReader first(dir_fd.get());
    CHECK(first.next().has_value());  // part of the way only
    CHECK(open_descriptors() == before + 1);
  }
  // Its own descriptor closed with it; the caller's is still open and lists
  // whole again, although the first reader moved the shared offset.
  CHECK(open_descriptors() == before);
  CHECK(::fcntl(dir_fd.get(), F_GETFD) >= 0);
  DirectoryReader second(dir_fd.get());
  CHECK(entries_of(second).size() == 3);
  CHECK(second.error() == 0);

  SUBCASE("moving hands the listing over") {
    DirectoryReader third(dir_fd.get());
    DirectoryReader moved(std::move(third));
    CHECK(moved.is_open());
    CHECK(entries_of(moved).size() == 3);
    third = std::move(moved);
    CHECK(third.is_open());
  }
  CHECK(open_descriptors() == before + 1);  // `second`'s
}

TEST_CASE("DirectoryReader opened by name follows no symlink and says why it failed") {
  ScratchDir dir;
  fs::create_directory(dir / "real");
  make_file(dir / "real/inside");
  fs::create_symlink(dir / "real", dir / "link");
  make_file(dir / "file");
  const UniqueFd dir_fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir_fd);

  DirectoryReader real(dir_fd.get(), "real");
  CHECK(real.is_open());
  CHECK(entries_of(real).count("inside") == 1);
  DirectoryReader by_path(AT_FDCWD, dir / "real");
  CHECK(entries_of(by_path).count("inside") == 1);

  const std::size_t before = open_descriptors();
  for (const std::string name : {"link", "file", "missing"}) {
    INFO(name);
    DirectoryReader refused(dir_fd.get(), name);
    CHECK_FALSE(refused.is_open());
    CHECK_FALSE(refused.next().has_value());
    CHECK(refused.read_all().empty());
    if (name == "link") CHECK((refused.error() == ELOOP || refused.error() == ENOTDIR));
    if (name == "file") CHECK(refused.error() == ENOTDIR);
    if (name == "missing") CHECK(refused.error() == ENOENT);
  }
  CHECK(open_descriptors() == before);

  // A descriptor that is not a directory.
  const UniqueFd file_fd(::open((dir / "file").c_str(), O_RDONLY | O_CLOEXEC));
  DirectoryReader of_file(file_fd.get());
  CHECK_FALSE(of_file.is_open());
  CHECK(of_file.error() == ENOTDIR);
}

TEST_CASE("DirectoryReader tells a listing that failed from one that ended") {
  ScratchDir dir;
  make_file(dir / "file");
  // An O_PATH descriptor opens as a DIR* but cannot be read: readdir() fails,
  // which must not read as an empty directory.
  const UniqueFd path_only(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(path_only);
  DirectoryReader reader(path_only.get());
  CHECK(reader.read_all().empty());
  CHECK(reader.error() != 0);
  CHECK_FALSE(reader.next().has_value());
}

TEST_CASE("disk_usage counts allocated bytes without following symlinks") {
  ScratchDir outside;
  make_file(outside / "huge", std::string(4U << 20U, 'h'));
  ScratchDir dir;
  fs::create_directories(dir / "a/b");
  make_file(dir / "a/one", std::string(1U << 20U, '1'));
  make_file(dir / "a/b/two", std::string(1U << 20U, '2'));
  fs::create_symlink(outside / "huge", dir / "a/link-to-huge");
  fs::create_directory_symlink(outside.path(), dir / "a/b/link-to-outside");

  const std::uint64_t total = disk_usage(dir.path());
  CHECK(total >= 2U << 20U);
  CHECK(total < 4U << 20U);  // the 4 MiB behind the symlinks is not counted
  // Stopping early gives less than the whole, but more than the limit.
  const std::uint64_t early = disk_usage(dir.path(), 1);
  CHECK(early > 1);
  CHECK(early < total);
  CHECK(disk_usage(dir / "missing") == 0);
  CHECK(disk_usage(dir / "a/link-to-huge") == 0);
}

TEST_CASE("disk_usage counts a file of many links once") {
  ScratchDir dir;
  make_file(dir / "big", std::string(1U << 20U, 'b'));
  const std::uint64_t one = disk_usage(dir.path());
  for (int link = 0; link < 50; ++link) fs::create_hard_link(dir / "big", dir / ("link" + std::to_string(link)));
  const std::uint64_t linked = disk_usage(dir.path());
  CHECK(linked > one);                // each link is an entry
  CHECK(linked < one + (1U << 20U));  // not 50 more copies
}

TEST_CASE("read_file_tail reads only the end of a file, and marks the cut") {
  ScratchDir dir;
  const std::string path = dir.path() + "/log";
  CHECK_FALSE(mullet::util::read_file_tail(path, 10).has_value());
  mullet::util::write_file(path, "");
  CHECK(mullet::util::read_file_tail(path, 10) == std::string());
  mullet::util::write_file(path, "0123456789");
  CHECK(mullet::util::read_file_tail(path, 10) == "0123456789");
  CHECK(mullet::util::read_file_tail(path, 20) == "0123456789");
  CHECK(mullet::util::read_file_tail(path, 4) == mullet::util::tail("0123456789", 4));
  CHECK(mullet::util::read_file_tail(path, 4)->substr(mullet::util::read_file_tail(path, 4)->size() - 4) == "6789");
  // A sparse file far larger than what is asked costs only what is asked.
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    REQUIRE(::ftruncate(fd.get(), off_t{1} << 40U) == 0);
    REQUIRE(::pwrite(fd.get(), "end", 3, (off_t{1} << 40U) - 3) == 3);
  }
  const auto end = mullet::util::read_file_tail(path, 8);
  REQUIRE(end.has_value());
  CHECK(end->substr(end->size() - 8) == std::string(5, '\0') + "end");
  const std::string link = dir.path() + "/link";
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  CHECK_THROWS_AS(mullet::util::read_file_tail(link, 8), Error);
}

static mode_t mode_of(const std::string& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

TEST_CASE("strip_unsafe_modes clears setuid, setgid and other-writable bits everywhere, following no symlink") {
  ScratchDir outside;
  make_file(outside / "target");
  REQUIRE(::chmod((outside / "target").c_str(), 04755) == 0);

  ScratchDir base;
  const std::string tree = base / "tree";
  fs::create_directories(tree + "/sub/locked/deeper");
  fs::create_directories(tree + "/sgid-dir");
  make_file(tree + "/suid");
  make_file(tree + "/sgid");
  make_file(tree + "/sub/both");
  make_file(tree + "/sub/locked/deeper/suid");
  make_file(tree + "/unreadable");
  make_file(tree + "/plain");
  fs::create_symlink(outside / "target", tree + "/link");
  fs::create_directory_symlink(outside.path(), tree + "/sub/dir-link");
  REQUIRE(::chmod((tree + "/suid").c_str(), 04755) == 0);
  REQUIRE(::chmod((tree + "/sgid").c_str(), 02755) == 0);
  REQUIRE(::chmod((tree + "/sub/both").c_str(), 06777) == 0);
  REQUIRE(::chmod((tree + "/sub/locked/deeper/suid").c_str(), 04700) == 0);
  REQUIRE(::chmod((tree + "/unreadable").c_str(), 04000) == 0);
  REQUIRE(::chmod((tree + "/plain").c_str(), 0644) == 0);
  REQUIRE(::chmod((tree + "/sgid-dir").c_str(), 02777) == 0);
  REQUIRE(::chmod((tree + "/sub/locked").c_str(), 0) == 0);
  REQUIRE(::chmod(tree.c_str(), 06777) == 0);
  if (::geteuid() == 0) {
    for (const auto& entry : fs::recursive_directory_iterator(tree)) {
      REQUIRE(::lchown(entry.path().c_str(), nobody, nobody) == 0);
    }
    REQUIRE(::chown(tree.c_str(), nobody, nobody) == 0);
    // chown cleared what it clears: set the bits again.
    REQUIRE(::chmod((tree + "/suid").c_str(), 04755) == 0);
    REQUIRE(::chmod((tree + "/sgid").c_str(), 02755) == 0);
    REQUIRE(::chmod((tree + "/sub/both").c_str(), 06777) == 0);
    REQUIRE(::chmod((tree + "/unreadable").c_str(), 04000) == 0);
  }
  // The deepest one is behind a directory mode 0 (chmod as root works through it).
  REQUIRE(::chmod((tree + "/sub/locked").c_str(), 0700) == 0);
  REQUIRE(::chmod((tree + "/sub/locked/deeper/suid").c_str(), 04700) == 0);
  REQUIRE(::chmod((tree + "/sub/locked").c_str(), 0) == 0);

  const int result = run_unprivileged(base.path(), [&]() {
    mullet::util::strip_unsafe_modes(tree);
    return 0;
  });
  CHECK(result == 0);
  CHECK(mode_of(tree) == 0775);
  CHECK(mode_of(tree + "/suid") == 0755);
  CHECK(mode_of(tree + "/sgid") == 0755);
  CHECK(mode_of(tree + "/sub/both") == 0775);
  CHECK(mode_of(tree + "/unreadable") == 0);
  CHECK(mode_of(tree + "/plain") == 0644);
  CHECK(mode_of(tree + "/sgid-dir") == 0775);
  // Opened for the walk, then given its mode back.
  CHECK(mode_of(tree + "/sub/locked") == 0);
  REQUIRE(::chmod((tree + "/sub/locked").c_str(), 0700) == 0);
  CHECK(mode_of(tree + "/sub/locked/deeper/suid") == 0700);
  // Not followed.
  CHECK(mode_of(outside / "target") == 04755);
  CHECK_NOTHROW(mullet::util::strip_unsafe_modes(base / "missing"));
}

TEST_CASE("make_private_dirs makes and tightens 0700 directories and refuses symlinks") {
  ScratchDir base;
  mullet::util::make_private_dirs(base.path(), "a/b/c");
  CHECK(mode_of(base / "a") == 0700);
  CHECK(mode_of(base / "a/b") == 0700);
  CHECK(mode_of(base / "a/b/c") == 0700);
  // An older version's 0711 and 0755 are tightened.
  REQUIRE(::chmod((base / "a").c_str(), 0711) == 0);
  REQUIRE(::chmod((base / "a/b").c_str(), 0755) == 0);
  mullet::util::make_private_dirs(base.path(), "a/b");
  CHECK(mode_of(base / "a") == 0700);
  CHECK(mode_of(base / "a/b") == 0700);
  // A symlink in the way is refused, its target untouched.
  ScratchDir outside;
  REQUIRE(::chmod(outside.path().c_str(), 0755) == 0);
  fs::create_directory_symlink(outside.path(), base / "a/link");
  CHECK_THROWS_AS(mullet::util::make_private_dirs(base.path(), "a/link/d"), Error);
  CHECK(mode_of(outside.path()) == 0755);
  CHECK_FALSE(exists_no_follow(outside / "d"));
  if (::geteuid() == 0) {
    // Another user's directory is not taken over.
    fs::create_directories(base / "theirs");
    REQUIRE(::chown((base / "theirs").c_str(), nobody, nobody) == 0);
    REQUIRE(::chmod((base / "theirs").c_str(), 0755) == 0);
    CHECK_THROWS_AS(mullet::util::make_private_dirs(base.path(), "theirs/x"), Error);
    CHECK(mode_of(base / "theirs") == 0755);
  }
}

TEST_CASE("TempDir removes its tree, once, and a moved-from one owns nothing") {
  std::string path;
  {
    mullet::util::TempDir dir("/tmp", "mullet-unit-temp-");
    path = dir.path();
    CHECK(path.rfind("/tmp/mullet-unit-temp-", 0) == 0);
    CHECK(mullet::util::is_directory(path));
    mullet::util::make_dirs(path + "/a/b");
    mullet::util::write_file(path + "/a/b/file", "x");
    mullet::util::TempDir moved = std::move(dir);
    CHECK(dir.empty());
    CHECK(moved.path() == path);
  }
  CHECK(!mullet::util::exists(path));
  mullet::util::TempDir early("/tmp", "mullet-unit-temp-");
  const std::string early_path = early.path();
  early.remove();
  CHECK(early.empty());
  CHECK(!mullet::util::exists(early_path));
}

namespace {

// A chain of `depth` directories named "d" below `top`, made through
// descriptors (its path soon outgrows PATH_MAX); `at_bottom` gets the
// deepest one's descriptor.
void make_chain(const std::string& top, int depth, const std::function<void(int)>& at_bottom = {}) {
  UniqueFd current(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(current);
  for (int level = 0; level < depth; ++level) {
    REQUIRE(::mkdirat(current.get(), "d", 0755) == 0);
    current.reset(::openat(current.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(current);
  }
  if (at_bottom) at_bottom(current.get());
}

// The mode of the directory `depth` levels down the chain below `top`.
mode_t chain_mode_at(const std::string& top, int depth) {
  UniqueFd current(::open(top.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (int level = 0; level < depth; ++level) current.reset(::openat(current.get(), "d", O_PATH | O_CLOEXEC));
  struct stat info {};
  REQUIRE(::fstat(current.get(), &info) == 0);
  return info.st_mode & 07777;
}

void add_setuid_file(int dir_fd) {
  const UniqueFd file(::openat(dir_fd, "suid", O_WRONLY | O_CREAT | O_CLOEXEC, 0755));
  REQUIRE(file);
  REQUIRE(::fchmod(file.get(), 04755) == 0);
}

}  // namespace

TEST_CASE("a tree nested deeper than max_walk_depth: no walk follows it down") {
  static_assert(mullet::util::max_walk_depth == 128);
  ScratchDir dir;
  const std::string deep = dir / "deep";
  const std::string shallow = dir / "shallow";
  fs::create_directory(deep);
  fs::create_directory(shallow);
  // 3000 levels: a walk of one stack frame and one descriptor per level
  // would have needed more of both than a test process has to spare.
  make_chain(deep, 3000, add_setuid_file);
  make_chain(shallow, mullet::util::max_walk_depth - 1, add_setuid_file);

  SUBCASE("disk_usage: deeper is over any limit; a tree just within is counted") {
    CHECK(disk_usage(deep) == mullet::util::disk_usage_too_deep);
    CHECK(disk_usage(deep, 1) > 1);
    const std::uint64_t within = disk_usage(shallow);
    CHECK(within >= (mullet::util::max_walk_depth - 1) * mullet::util::min_entry_bytes);
    CHECK(within < mullet::util::disk_usage_too_deep);
  }
  SUBCASE("strip_unsafe_modes closes the directory at the limit and enters nothing below") {
    make_file(deep + "/suid");
    REQUIRE(::chmod((deep + "/suid").c_str(), 04755) == 0);
    CHECK_NOTHROW(mullet::util::strip_unsafe_modes(deep));
    CHECK(mode_of(deep + "/suid") == 0755);
    CHECK(chain_mode_at(deep, mullet::util::max_walk_depth - 1) == 0755);
    CHECK(chain_mode_at(deep, mullet::util::max_walk_depth) == 0700);
    CHECK(chain_mode_at(deep, mullet::util::max_walk_depth + 1) == 0755);  // never entered
    // Just within the limit, everything is walked, the setuid bit at the bottom cleared.
    CHECK_NOTHROW(mullet::util::strip_unsafe_modes(shallow));
    CHECK(chain_mode_at(shallow, mullet::util::max_walk_depth - 1) == 0755);
    std::string bottom = shallow;
    for (int level = 0; level < mullet::util::max_walk_depth - 1; ++level) bottom += "/d";
    CHECK(mode_of(bottom + "/suid") == 0755);
  }
  SUBCASE("chown_tree refuses, naming the depth") {
    try {
      mullet::util::chown_tree(deep, ::getuid(), ::getgid());
      FAIL("a tree deeper than the limit was walked");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("nested deeper than 128 directories") != std::string::npos);
    }
    CHECK_NOTHROW(mullet::util::chown_tree(shallow, ::getuid(), ::getgid()));
  }
  SUBCASE("remove_tree removes it with few descriptors, around a name of its own already there") {
    fs::create_directory(deep + "/.mullet-deep-0");
    fs::create_directory(deep + "/.mullet-deep-1");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const struct rlimit few { 200, 200 };
      if (::setrlimit(RLIMIT_NOFILE, &few) != 0) ::_exit(98);
      try {
        remove_tree(deep);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_FALSE(exists_no_follow(deep));
  }
}

TEST_CASE("disk_usage counts what empty files and short symlinks cost") {
  ScratchDir dir;
  for (int index = 0; index < 100; ++index) {
    make_file(dir / ("empty-" + std::to_string(index)), "");
    fs::create_symlink("x", dir / ("link-" + std::to_string(index)));
  }
  CHECK(disk_usage(dir.path()) >= 200 * mullet::util::min_entry_bytes);
}
