#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "git/clone.hpp"
#include "git/handles.hpp"
#include "git/repository.hpp"
#include "git/snapshot.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::UniqueFd;
using mullet::git::ClonePaths;
using mullet::git::Repository;
using mullet::git::Snapshot;
using mullet::git::SnapshotOptions;
using mullet::test::contains;
using mullet::test::GitRepo;
using mullet::test::make_file;
using mullet::test::ScratchDir;

namespace {

// One entry of a snapshot tree: its mode and the bytes of its blob.
struct Recorded {
  git_filemode_t mode;
  std::string bytes;
};

// A user repository with a base commit, and a private clone of it made as a
// job makes one, whose work tree a test changes before taking a snapshot.
class SnapshotFixture {
 public:
  SnapshotFixture()
      : m_user(m_scratch / "user"),
        m_clone{m_scratch / "clone/git", m_scratch / "clone/work"},
        m_repo(Repository::open_git_dir(m_user.path(".git"))) {
    make_file(m_user.path("README"), "hello\n");
    make_file(m_user.path("same.txt"), "aaaa\n");
    make_file(m_user.path(".gitignore"), "*.log\nbuild/\n");
    make_file(m_user.path("tracked.log"), "tracked at base\n");
    fs::create_directories(m_user.path("dir"));
    make_file(m_user.path("dir/nested.txt"), "nested\n");
    fs::create_directories(m_user.path("vendor"));
    make_file(m_user.path("vendor/lib.txt"), "vendored at base\n");
    m_base = mullet::git::oid_from_string(m_user.commit_all("base", true));
    mullet::git::create_private_clone(m_repo, m_base, m_clone, "/mullet/git");
  }

  std::string work(const std::string& relative) const { return m_clone.work_tree + "/" + relative; }
  const ClonePaths& clone() const { return m_clone; }

  Snapshot take(SnapshotOptions options = {}) {
    options.base_tree = m_repo.tree_of(m_base);
    m_snapshot = mullet::git::take_snapshot(m_repo, m_clone, options);
    return m_snapshot;
  }

  // What the last snapshot recorded at `path`; nullopt when nothing.
  std::optional<Recorded> at(const std::string& path) const {
    git_tree* raw_tree = nullptr;
    REQUIRE(git_tree_lookup(&raw_tree, m_repo.get(), &m_snapshot.tree) == 0);
    const mullet::git::TreePtr tree(raw_tree);
    git_tree_entry* raw_entry = nullptr;
    if (git_tree_entry_bypath(&raw_entry, tree.get(), path.c_str()) != 0) return std::nullopt;
    const mullet::git::TreeEntryPtr entry(raw_entry);
    Recorded recorded{git_tree_entry_filemode(entry.get()), {}};
    if (recorded.mode != GIT_FILEMODE_TREE && recorded.mode != GIT_FILEMODE_COMMIT) {
      recorded.bytes = m_repo.read_blob(*git_tree_entry_id(entry.get()));
    }
    return recorded;
  }

  bool warned(const std::string& path, const std::string& part) const {
    for (const auto& warning : m_snapshot.warnings) {
      if (warning.rfind(path + ": ", 0) == 0 && contains(warning, part)) return true;
    }
    return false;
  }

  std::string warnings() const {
    std::string all;
    for (const auto& warning : m_snapshot.warnings) all += warning + "\n";
    return all;
  }

 private:
  ScratchDir m_scratch;
  GitRepo m_user;
  ClonePaths m_clone;
  Repository m_repo;
  git_oid m_base{};
  Snapshot m_snapshot;
};

struct stat lstat_of(const std::string& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info;
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Rewrites `path` in place (same inode) with `content` and puts its mtime
// back, as a worker hiding an edit would. File times come from a coarse
// clock, so it rewrites until the ctime shows the change: the one trace a
// worker cannot set back.
void rewrite_keeping_mtime(const std::string& path, const std::string& content) {
  const struct stat before = lstat_of(path);
  for (int tries = 0; tries < 1000000; ++tries) {
    make_file(path, content);
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
    if (!same_time(lstat_of(path).st_ctim, before.st_ctim)) break;
  }
  const struct stat after = lstat_of(path);
  REQUIRE(after.st_ino == before.st_ino);
  REQUIRE(after.st_size == before.st_size);
  REQUIRE(same_time(after.st_mtim, before.st_mtim));
  REQUIRE_FALSE(same_time(after.st_ctim, before.st_ctim));
}

// Dates the clone's index an hour ahead, so that every file's stat data is
// older than it: no file is "racily clean", and reuse rests on the stat
// comparison alone.
void date_index_ahead(const ClonePaths& clone) {
  const struct timespec later { std::time(nullptr) + 3600, 0 };
  const struct timespec times[2] = {later, later};
  REQUIRE(::utimensat(AT_FDCWD, (clone.git_dir + "/index").c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("snapshot: bytes are stored exactly as the worker left them") {
  SnapshotFixture f;
  const std::string binary("line\r\nnul\0byte\xff\xfe end without newline", 36);
  make_file(f.work("bytes.bin"), binary);
  make_file(f.work("crlf.txt"), "one\r\ntwo\r\n");
  // Attributes in the work tree ask for conversions; none may happen.
  make_file(f.work(".gitattributes"), "* text eol=lf\n*.txt filter=lfs ident\n");
  make_file(f.work("empty"), "");
  const Snapshot snapshot = f.take();
  INFO(f.warnings());
  CHECK(snapshot.warnings.empty());
  CHECK(f.at("bytes.bin")->bytes == binary);
  CHECK(f.at("crlf.txt")->bytes == "one\r\ntwo\r\n");
  CHECK(f.at("empty")->bytes.empty());
  CHECK(f.at("README")->bytes == "hello\n");
  CHECK(f.at("dir/nested.txt")->bytes == "nested\n");
  CHECK(f.at("bytes.bin")->mode == GIT_FILEMODE_BLOB);

  SUBCASE("the executable bit is kept") {
    REQUIRE(::chmod(f.work("bytes.bin").c_str(), 0755) == 0);
    f.take();
    CHECK(f.at("bytes.bin")->mode == GIT_FILEMODE_BLOB_EXECUTABLE);
    CHECK(f.at("bytes.bin")->bytes == binary);
  }
}

TEST_CASE("snapshot: symlinks are stored as symlinks, never followed") {
  SnapshotFixture f;
  fs::create_symlink("/etc/passwd", f.work("outside"));
  fs::create_symlink("nowhere/at/all", f.work("dangling"));
  fs::create_symlink("dir", f.work("dirlink"));
  fs::create_symlink("../README", f.work("dir/up"));
  f.take();
  INFO(f.warnings());
  for (const auto& [path, target] : std::vector<std::pair<std::string, std::string>>{
           {"outside", "/etc/passwd"}, {"dangling", "nowhere/at/all"}, {"dirlink", "dir"}, {"dir/up", "../README"}}) {
    INFO(path);
    const auto recorded = f.at(path);
    REQUIRE(recorded.has_value());
    CHECK(recorded->mode == GIT_FILEMODE_LINK);
    CHECK(recorded->bytes == target);
  }
  // A link to a directory is not walked into.
  CHECK_FALSE(f.at("dirlink/nested.txt").has_value());
}

TEST_CASE("snapshot: FIFOs and sockets are left out, with a warning") {
  SnapshotFixture f;
  REQUIRE(::mkfifo(f.work("pipe").c_str(), 0644) == 0);
  fs::create_directories(f.work("run"));
  const UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(listener);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = f.work("run/sock");
  REQUIRE(socket_path.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  REQUIRE(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  make_file(f.work("run/beside"), "kept\n");

  f.take();
  INFO(f.warnings());
  CHECK_FALSE(f.at("pipe").has_value());
  CHECK_FALSE(f.at("run/sock").has_value());
  CHECK(f.warned("pipe", "special file"));
  CHECK(f.warned("run/sock", "special file"));
  CHECK(f.at("run/beside")->bytes == "kept\n");
}

TEST_CASE("snapshot: no .git is ever recorded") {
  SnapshotFixture f;
  // The clone's own .git file names its git dir.
  REQUIRE(fs::is_regular_file(fs::symlink_status(f.work(".git"))));
  fs::create_directories(f.work("sub/.git/hooks"));
  make_file(f.work("sub/.git/config"), "[core]\n\thooksPath = hooks\n");
  make_file(f.work("sub/.git/hooks/post-checkout"), "#!/bin/sh\necho planted\n", 0755);
  make_file(f.work("sub/code.c"), "int x;\n");
  fs::create_directories(f.work("other"));
  make_file(f.work("other/.git"), "gitdir: /somewhere/else\n");
  f.take();
  INFO(f.warnings());
  CHECK_FALSE(f.at(".git").has_value());
  CHECK_FALSE(f.at("sub/.git").has_value());
  CHECK_FALSE(f.at("other/.git").has_value());
  CHECK(f.warned("sub/.git", "nested .git left out"));
  CHECK(f.warned("other/.git", "nested .git left out"));
  // What is beside them is recorded.
  CHECK(f.at("sub/code.c")->bytes == "int x;\n");

  SUBCASE("a .git directory the worker put at the top is left out too") {
    fs::remove(f.work(".git"));
    fs::create_directories(f.work(".git/objects"));
    make_file(f.work(".git/HEAD"), "ref: refs/heads/main\n");
    f.take();
    CHECK_FALSE(f.at(".git").has_value());
    CHECK(f.at("README")->bytes == "hello\n");
  }
}

TEST_CASE("snapshot: untracked ignored paths are left out, tracked ones kept") {
  SnapshotFixture f;
  make_file(f.work("new.log"), "untracked, ignored\n");
  fs::create_directories(f.work("build"));
  make_file(f.work("build/out.o"), "object\n");
  make_file(f.work("dir/also.log"), "untracked, ignored below\n");
  make_file(f.work("tracked.log"), "tracked, changed\n");
  make_file(f.work("new.txt"), "untracked, not ignored\n");
  f.take();
  INFO(f.warnings());
  CHECK_FALSE(f.at("new.log").has_value());
  CHECK_FALSE(f.at("build").has_value());
  CHECK_FALSE(f.at("dir/also.log").has_value());
  CHECK(f.at("tracked.log")->bytes == "tracked, changed\n");
  CHECK(f.at("new.txt")->bytes == "untracked, not ignored\n");

  SUBCASE("a .gitignore that is not a regular file is not read: nothing below it is ignored") {
    // libgit2 would follow the link (and block on a FIFO): it is never asked.
    fs::create_directories(f.work("linked"));
    fs::create_symlink("../.gitignore", f.work("linked/.gitignore"));
    make_file(f.work("linked/x.log"), "kept: no ignore rules apply here\n");
    f.take();
    CHECK(f.at("linked/x.log")->bytes == "kept: no ignore rules apply here\n");
    CHECK(f.at("linked/.gitignore")->mode == GIT_FILEMODE_LINK);
    CHECK(f.warned("linked/.gitignore", "ignore rules below linked/ were not applied"));
    CHECK_FALSE(f.at("new.log").has_value());  // still ignored where the rules were read
  }
}

TEST_CASE("snapshot: a same-size rewrite with the mtime put back is seen") {
  SnapshotFixture f;
  SUBCASE("with the index newer than every file, only the stat comparison can see it") {
    rewrite_keeping_mtime(f.work("same.txt"), "bbbb\n");
    date_index_ahead(f.clone());
    const Snapshot snapshot = f.take();
    // The control: unchanged files do reuse the checkout's object ids.
    CHECK(snapshot.files_reused >= 4);
    CHECK(f.at("README")->bytes == "hello\n");
    CHECK(f.at("same.txt")->bytes == "bbbb\n");
  }
  SUBCASE("as a job meets it") {
    rewrite_keeping_mtime(f.work("same.txt"), "bbbb\n");
    f.take();
    CHECK(f.at("same.txt")->bytes == "bbbb\n");
  }
  SUBCASE("a file rewritten with the same bytes is reused or rehashed, never lost") {
    rewrite_keeping_mtime(f.work("same.txt"), "aaaa\n");
    date_index_ahead(f.clone());
    f.take();
    CHECK(f.at("same.txt")->bytes == "aaaa\n");
  }
}

TEST_CASE("snapshot: excluded top-level directories keep what the base had") {
  SnapshotFixture f;
  make_file(f.work("vendor/lib.txt"), "changed by setup\n");
  make_file(f.work("vendor/new.txt"), "added by setup\n");
  fs::create_directories(f.work("node_modules"));
  make_file(f.work("node_modules/pkg.js"), "installed\n");
  SnapshotOptions options;
  options.excluded_top_level_dirs = {"vendor", "node_modules"};
  f.take(options);
  CHECK(f.at("vendor/lib.txt")->bytes == "vendored at base\n");
  CHECK_FALSE(f.at("vendor/new.txt").has_value());
  CHECK_FALSE(f.at("node_modules").has_value());
}

TEST_CASE("snapshot: files over the size limit are left out, with a warning") {
  SnapshotFixture f;
  make_file(f.work("big.bin"), std::string((1U << 20U) + 1, 'b'));
  SnapshotOptions options;
  options.max_file_bytes = 1U << 20U;
  f.take(options);
  CHECK_FALSE(f.at("big.bin").has_value());
  CHECK(f.warned("big.bin", "larger than 1 MiB"));
}

TEST_CASE("snapshot: new objects past max_new_object_bytes are left out, with one warning; known ones still go in") {
  SnapshotFixture f;
  // 200 new symlinks and empty-ish files: each costs an object of a block at
  // least, though the work tree's st_blocks says nothing for most.
  for (int index = 0; index < 100; ++index) {
    fs::create_symlink("target-" + std::to_string(index), f.work("link-" + std::to_string(index)));
    make_file(f.work("file-" + std::to_string(index)), "x" + std::to_string(index));
  }
  make_file(f.work("zz-copy-of-readme"), "hello\n");  // the base's README: no new object
  SnapshotOptions options;
  options.max_new_object_bytes = 20 * mullet::util::min_entry_bytes;
  const Snapshot snapshot = f.take(options);
  INFO(f.warnings());
  int kept = 0;
  for (int index = 0; index < 100; ++index) {
    kept += f.at("link-" + std::to_string(index)).has_value() ? 1 : 0;
    kept += f.at("file-" + std::to_string(index)).has_value() ? 1 : 0;
  }
  CHECK(kept == 20);
  CHECK(f.at("zz-copy-of-readme")->bytes == "hello\n");
  CHECK(f.at("README")->bytes == "hello\n");
  std::size_t budget_warnings = 0;
  for (const auto& warning : snapshot.warnings) {
    budget_warnings += warning.find("limits.disk_mb") != std::string::npos ? 1 : 0;
  }
  CHECK(budget_warnings == 1);
}

TEST_CASE("snapshot: warnings are kept up to max_snapshot_warnings, the rest counted") {
  SnapshotFixture f;
  const std::size_t extra = 25;
  for (std::size_t index = 0; index < mullet::git::max_snapshot_warnings + extra; ++index) {
    REQUIRE(::mkfifo(f.work("pipe-" + std::to_string(index)).c_str(), 0644) == 0);
  }
  const Snapshot snapshot = f.take();
  CHECK(snapshot.warnings.size() == mullet::git::max_snapshot_warnings);
  CHECK(snapshot.warnings_not_kept == extra);
}
