#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "git/clone.hpp"
#include "git/handles.hpp"
#include "git/repository.hpp"
#include "git/snapshot.hpp"
#include "git/upper_snapshot.hpp"
#include "sandbox/fuse_overlay.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/process.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::git::ClonePaths;
using mullet::git::Repository;
using mullet::git::Snapshot;
using mullet::git::SnapshotOptions;
using mullet::test::contains;
using mullet::test::GitRepo;
using mullet::test::make_file;
using mullet::test::ScratchDir;

namespace {

constexpr const char* user_xattr = mullet::git::overlay_opaque_xattr_user;
constexpr const char* root_xattr = mullet::git::overlay_opaque_xattr_root;

// How the overlay is mounted: in a user namespace of our own (as an
// unprivileged user does; opaque directories marked with user.overlay.*), or
// as root in a mount namespace alone (trusted.overlay.*).
// fuse: fuse-overlayfs, as root in a mount namespace alone (its daemon root).
enum class Mount { user_namespace, root, fuse };

const char* xattr_of(Mount mount) {
  return mount == Mount::root ? root_xattr : user_xattr;
}

mullet::util::CapturedRun run_shell(const std::string& script, const std::vector<std::string>& prefix,
                                    const mullet::util::Environment& extra) {
  mullet::util::SpawnOptions options;
  options.argv = prefix;
  if (!options.argv.empty()) {
    options.argv[0] = mullet::util::find_in_path(options.argv[0], mullet::util::host_path());
    REQUIRE_MESSAGE(!options.argv[0].empty(), prefix[0] << " is not on PATH");
  }
  options.argv.insert(options.argv.end(), {"/bin/sh", "-c", script});
  options.env = extra;
  options.env["PATH"] = mullet::util::host_path();
  return mullet::util::run_capture(options);
}

// A user repository with a base commit; a private clone of it (the
// reference, changed in place and recorded by take_snapshot); and a second
// clone's work tree as the lower dir of an overlay whose upper dir the same
// changes reach through the kernel, recorded by take_upper_snapshot.
class OverlayFixture {
 public:
  // `gitlink`: the base also has a submodule at mod/.
  explicit OverlayFixture(bool gitlink = false)
      : m_user(m_scratch / "user"),
        m_reference{m_scratch / "reference/git", m_scratch / "reference/work"},
        m_lower{m_scratch / "lower/git", m_scratch / "lower/work"},
        m_repo(Repository::open_git_dir(m_user.path(".git"))) {
    for (const char* dir : {"dir/sub", "redo/sub", "dir_to_file", "deep/a/b/c", "deep/other", "ign2", "ign3", "deps"}) {
      fs::create_directories(m_user.path(dir));
    }
    const std::vector<std::pair<std::string, std::string>> files = {{"README", "hello\n"},
                                                                    {"same.txt", "aaaa\n"},
                                                                    {"same2.txt", "bbbb\n"},
                                                                    {".gitignore", "*.log\nbuild/\n"},
                                                                    {"tracked.log", "tracked\n"},
                                                                    {"script.sh", "#!/bin/sh\n"},
                                                                    {"dir/nested.txt", "nested\n"},
                                                                    {"dir/sub/n2.txt", "n2\n"},
                                                                    {"redo/old.txt", "old\n"},
                                                                    {"redo/sub/old2.txt", "old2\n"},
                                                                    {"redo/.gitignore", "*.dat\n"},
                                                                    {"file_to_dir", "a file\n"},
                                                                    {"dir_to_file/inner.txt", "in\n"},
                                                                    {"deep/a/b/c/d.txt", "d\n"},
                                                                    {"deep/a/b/c/e.txt", "e\n"},
                                                                    {"deep/other/x.txt", "x\n"},
                                                                    {"ign2/.gitignore", "*.dat\n"},
                                                                    {"ign2/keep.txt", "keep\n"},
                                                                    {"ign3/.gitignore", "*.dat\n"},
                                                                    {"ign3/keep.txt", "keep\n"},
                                                                    {"deps/lib.txt", "lib\n"}};
    for (const auto& [path, content] : files) make_file(m_user.path(path), content);
    if (gitlink) {
      fs::create_directories(m_user.path("mod"));
      m_user.git({"update-index", "--add", "--cacheinfo", std::string("160000,") + std::string(40, '1') + ",mod"});
    }
    m_base = mullet::git::oid_from_string(m_user.commit_all("base", true));
    m_base_tree = m_repo.tree_of(m_base);
    mullet::git::create_private_clone(m_repo, m_base, m_reference, "/mullet/git");
    mullet::git::create_private_clone(m_repo, m_base, m_lower, "/mullet/git");
    for (const char* dir : {"upper", "overlay-work", "merged"}) fs::create_directories(m_scratch / dir);
  }

  // Runs `script` (sh, in the tree) in the reference clone, and through an
  // overlay mounted as `mount` says, in the merged view (the upper dir gets
  // what changed).
  void change(const std::string& script, Mount mount) {
    const auto plain =
        run_shell("cd \"$TREE\" && eval \"$CHANGES\"", {}, {{"TREE", m_reference.work_tree}, {"CHANGES", script}});
    REQUIRE_MESSAGE(plain.status.success(), "the changes failed in the reference clone: " << plain.err);
    const std::string options = mount == Mount::root ? "redirect_dir=off,metacopy=off,index=off"
                                                     : "userxattr,redirect_dir=nofollow,metacopy=off,index=off";
    const std::vector<std::string> prefix = mount == Mount::user_namespace ? std::vector<std::string>{"unshare", "-Urm"}
                                                                           : std::vector<std::string>{"unshare", "-m"};
    const auto overlaid = run_shell(
        mount == Mount::fuse
            ? "fuse-overlayfs -o \"lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK\" \"$MERGED\" && cd \"$MERGED\" && "
              "(eval \"$CHANGES\"); status=$?; cd / && umount \"$MERGED\" && exit $status"
            : "mount -t overlay overlay -o \"lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK,$OPTIONS\" \"$MERGED\" && "
              "cd \"$MERGED\" && eval \"$CHANGES\"",
        prefix,
        {{"LOWER", m_lower.work_tree},
         {"UPPER", upper()},
         {"WORK", m_scratch / "overlay-work"},
         {"MERGED", m_scratch / "merged"},
         {"OPTIONS", options},
         {"CHANGES", script}});
    REQUIRE_MESSAGE(overlaid.status.success(), "the changes failed through the overlay: " << overlaid.err);
  }

  // Whether the kernel refuses an overlay with trusted.* xattrs (root's
  // options) in a user namespace of ours: why a user's jobs mount with
  // userxattr, and what a test that needs root asserts when not root.
  bool root_overlay_refused_in_user_namespace() {
    const auto mounted = run_shell(
        "mount -t overlay overlay -o \"lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK,redirect_dir=off,metacopy=off,"
        "index=off\" \"$MERGED\"",
        {"unshare", "-Urm"},
        {{"LOWER", m_lower.work_tree},
         {"UPPER", upper()},
         {"WORK", m_scratch / "overlay-work"},
         {"MERGED", m_scratch / "merged"}});
    return !mounted.status.success();
  }

  std::string upper(const std::string& relative = "") const {
    return relative.empty() ? m_scratch / "upper" : m_scratch / ("upper/" + relative);
  }

  Snapshot reference(SnapshotOptions options = {}) {
    options.base_tree = m_base_tree;
    return mullet::git::take_snapshot(m_repo, m_reference, options);
  }

  Snapshot from_upper(const std::string& xattr, SnapshotOptions options = {}) {
    return mullet::git::take_upper_snapshot(m_repo, m_base_tree, upper(), xattr, options);
  }

  // The two trees' differences (git diff-tree -r), empty when equal.
  std::string difference(const git_oid& a, const git_oid& b) const {
    return m_user.git({"diff-tree", "-r", mullet::git::oid_to_string(a), mullet::git::oid_to_string(b)});
  }

  // What a tree holds at `path`: its bytes, or nullopt.
  std::optional<std::string> at(const git_oid& tree_id, const std::string& path) const {
    git_tree* raw_tree = nullptr;
    REQUIRE(git_tree_lookup(&raw_tree, m_repo.get(), &tree_id) == 0);
    const mullet::git::TreePtr tree(raw_tree);
    git_tree_entry* raw_entry = nullptr;
    if (git_tree_entry_bypath(&raw_entry, tree.get(), path.c_str()) != 0) return std::nullopt;
    const mullet::git::TreeEntryPtr entry(raw_entry);
    if (git_tree_entry_filemode(entry.get()) == GIT_FILEMODE_TREE) return std::string("<tree>");
    if (git_tree_entry_filemode(entry.get()) == GIT_FILEMODE_COMMIT) return std::string("<gitlink>");
    return m_repo.read_blob(*git_tree_entry_id(entry.get()));
  }

  const git_oid& base_tree() const { return m_base_tree; }

 private:
  ScratchDir m_scratch;
  GitRepo m_user;
  ClonePaths m_reference;
  ClonePaths m_lower;
  Repository m_repo;
  git_oid m_base{};
  git_oid m_base_tree{};
};

bool warned(const Snapshot& snapshot, const std::string& path, const std::string& part) {
  for (const auto& warning : snapshot.warnings) {
    if (warning.rfind(path + ": ", 0) == 0 && contains(warning, part)) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

bool same(const git_oid& a, const git_oid& b) {
  return git_oid_cmp(&a, &b) == 0;
}

// Every kind of change a worker makes, as one script.
const char* const every_change = R"(set -e
echo changed > README
echo new > added.txt
rm same.txt
rm -rf dir
rm -rf redo && mkdir -p redo/sub && echo fresh > redo/only.txt && echo data > redo/a.dat
rm file_to_dir && mkdir file_to_dir && echo in > file_to_dir/x
rm -rf dir_to_file && echo now-a-file > dir_to_file
ln -s README link
ln -s ../deep dir_link
chmod +x script.sh
echo ignored > new.log
echo more >> tracked.log
mkdir -p newdir/sub && echo deep > newdir/sub/file
ln same2.txt hard.txt
mkdir build && echo x > build/out
echo changed-deep > deep/a/b/c/d.txt
echo x > .wh.foo
echo y > deep/.wh.e.txt
echo ignored > ign2/b.dat
rm ign3/.gitignore && echo kept > ign3/c.dat
printf '*.tmp\n' >> .gitignore && echo t > x.tmp
echo dep-change > deps/lib.txt
mkdir node_modules && echo m > node_modules/m.js
mkfifo fifo
mkdir -p nested/.git && echo x > nested/.git/config && echo y > nested/file
head -c 1100000 /dev/zero > big.bin
head -c 1100000 /dev/zero > deep/other/x.txt
)";

SnapshotOptions every_change_options() {
  SnapshotOptions options;
  options.excluded_top_level_dirs = {"deps", "node_modules"};
  options.max_file_bytes = 1U << 20U;
  return options;
}

void check_every_change(Mount mount) {
  OverlayFixture f;
  f.change(every_change, mount);
  // The test means something only if the kernel marked the recreated
  // directory opaque and left whiteouts.
  char value[2] = {};
  REQUIRE(::getxattr(f.upper("redo").c_str(), xattr_of(mount), value, sizeof value) == 1);
  struct stat whiteout {};
  REQUIRE(::lstat(f.upper("same.txt").c_str(), &whiteout) == 0);
  REQUIRE((S_ISCHR(whiteout.st_mode) && whiteout.st_rdev == makedev(0, 0)));

  const Snapshot expected = f.reference(every_change_options());
  const Snapshot got = f.from_upper(xattr_of(mount), every_change_options());
  CHECK_MESSAGE(same(got.tree, expected.tree), "differences:\n"
                                                   << f.difference(expected.tree, got.tree) << "\nwarnings:\n"
                                                   << joined(got.warnings));
  // Spot checks of the rules, so a failure above says which.
  CHECK(f.at(got.tree, "README") == "changed\n");
  CHECK_FALSE(f.at(got.tree, "same.txt"));
  CHECK_FALSE(f.at(got.tree, "dir"));
  CHECK(f.at(got.tree, "redo/only.txt") == "fresh\n");
  CHECK(f.at(got.tree, "redo/a.dat") == "data\n");  // the lower .gitignore is gone with the lower dir
  CHECK_FALSE(f.at(got.tree, "redo/old.txt"));
  CHECK(f.at(got.tree, "file_to_dir/x") == "in\n");
  CHECK(f.at(got.tree, "dir_to_file") == "now-a-file\n");
  CHECK(f.at(got.tree, "link") == "README");
  CHECK_FALSE(f.at(got.tree, "new.log"));
  CHECK(f.at(got.tree, "tracked.log") == "tracked\nmore\n");
  CHECK_FALSE(f.at(got.tree, "build"));
  CHECK(f.at(got.tree, "deep/a/b/c/e.txt") == "e\n");
  CHECK(f.at(got.tree, ".wh.foo") == "x\n");
  CHECK(f.at(got.tree, "deep/.wh.e.txt") == "y\n");
  CHECK_FALSE(f.at(got.tree, "ign2/b.dat"));
  CHECK(f.at(got.tree, "ign3/c.dat") == "kept\n");
  CHECK_FALSE(f.at(got.tree, "x.tmp"));
  CHECK(f.at(got.tree, "deps/lib.txt") == "lib\n");
  CHECK_FALSE(f.at(got.tree, "node_modules"));
  CHECK(f.at(got.tree, "hard.txt") == "bbbb\n");
  CHECK_FALSE(f.at(got.tree, "deep/other"));
  // The same warnings, and none for whiteouts.
  auto expected_warnings = expected.warnings;
  auto got_warnings = got.warnings;
  std::sort(expected_warnings.begin(), expected_warnings.end());
  std::sort(got_warnings.begin(), got_warnings.end());
  CHECK(joined(got_warnings) == joined(expected_warnings));
  CHECK(warned(got, "fifo", "special file"));
  CHECK(warned(got, "nested/.git", "nested .git"));
  CHECK(warned(got, "big.bin", "limits.file_mb"));
  CHECK(warned(got, "deep/other/x.txt", "limits.file_mb"));
}

}  // namespace

TEST_CASE("upper snapshot: every kind of change through a user-namespace overlay gives take_snapshot's tree") {
  check_every_change(Mount::user_namespace);
}

TEST_CASE("upper snapshot: every kind of change through root's overlay (trusted xattrs) gives take_snapshot's tree") {
  if (::geteuid() != 0) {
    CHECK_MESSAGE(OverlayFixture().root_overlay_refused_in_user_namespace(),
                  "an overlay with trusted.* xattrs mounted without root");
    return;
  }
  check_every_change(Mount::root);
}

TEST_CASE("upper snapshot: every kind of change through fuse-overlayfs gives take_snapshot's tree") {
  const std::string refused = mullet::sandbox::probe_fuse_overlay();
  if (::geteuid() != 0) {
    // Not root: no job gets fuse-overlayfs, whatever /dev/fuse allows, and
    // the refusal says why (what `work_tree = "fuse-overlayfs"` answers).
    CHECK_MESSAGE(refused != "", "fuse-overlayfs offered to a user that is not root");
    CHECK_MESSAGE((contains(refused, "root") || contains(refused, "/dev/fuse")), refused);
    return;
  }
  REQUIRE_MESSAGE(refused == "", "fuse-overlayfs cannot serve a work tree as root here: " << refused);
  // fuse-overlayfs refuses the worker a `.wh.` name (EINVAL): those two
  // changes are left out.
  std::string script = every_change;
  for (const std::string_view line : {"echo x > .wh.foo\n", "echo y > deep/.wh.e.txt\n"}) {
    script.erase(script.find(line), line.size());
  }
  OverlayFixture f;
  f.change(script, Mount::fuse);
  // Its daemon, root here, marks the recreated directory with root's xattr
  // and a `.wh..wh..opq` file; a deleted file is a device 0/0.
  char value[2] = {};
  REQUIRE(::getxattr(f.upper("redo").c_str(), root_xattr, value, sizeof value) == 1);
  REQUIRE(fs::exists(f.upper("redo/.wh..wh..opq")));
  struct stat whiteout {};
  REQUIRE(::lstat(f.upper("same.txt").c_str(), &whiteout) == 0);
  REQUIRE((S_ISCHR(whiteout.st_mode) && whiteout.st_rdev == makedev(0, 0)));

  const Snapshot expected = f.reference(every_change_options());
  const Snapshot got = f.from_upper(mullet::git::fuse_overlayfs_upper, every_change_options());
  CHECK_MESSAGE(same(got.tree, expected.tree), "differences:\n"
                                                   << f.difference(expected.tree, got.tree) << "\nwarnings:\n"
                                                   << joined(got.warnings));
  CHECK_FALSE(f.at(got.tree, "redo/old.txt"));
  CHECK_FALSE(f.at(got.tree, "redo/.wh..wh..opq"));
  CHECK_FALSE(f.at(got.tree, "same.txt"));
  auto expected_warnings = expected.warnings;
  auto got_warnings = got.warnings;
  std::sort(expected_warnings.begin(), expected_warnings.end());
  std::sort(got_warnings.begin(), got_warnings.end());
  CHECK(joined(got_warnings) == joined(expected_warnings));
}

TEST_CASE("upper snapshot: an untouched upper dir is the base tree, and only changed files are read") {
  OverlayFixture f;
  CHECK(same(f.from_upper(user_xattr).tree, f.base_tree()));
  f.change("echo changed > deep/a/b/c/d.txt", Mount::user_namespace);
  const Snapshot got = f.from_upper(user_xattr);
  CHECK(same(got.tree, f.reference().tree));
  CHECK(got.files_hashed == 1);
  CHECK(f.at(got.tree, "deep/a/b/c/d.txt") == "changed\n");
}

TEST_CASE("upper snapshot: rm -rf of everything, and a .gitignore that is not a regular file") {
  OverlayFixture f;
  f.change("rm -rf ./* .gitignore && mkdir sub && ln -s /etc/passwd sub/.gitignore && echo x > sub/a.log",
           Mount::user_namespace);
  const Snapshot expected = f.reference();
  const Snapshot got = f.from_upper(user_xattr);
  CHECK_MESSAGE(same(got.tree, expected.tree), f.difference(expected.tree, got.tree));
  CHECK(f.at(got.tree, "sub/a.log") == "x\n");
  CHECK(warned(got, "sub/.gitignore", "not a regular file"));
  f.change("rm -rf sub", Mount::user_namespace);
  CHECK(same(f.from_upper(user_xattr).tree, f.reference().tree));
}

TEST_CASE("upper snapshot: only the mount's own opaque xattr is honoured") {
  OverlayFixture f;
  // Written as a worker of another mount kind would leave them: a directory
  // marked opaque with the other name, one with a value that is not "y".
  fs::create_directories(f.upper("dir"));
  make_file(f.upper("dir/new.txt"), "new\n");
  REQUIRE(::setxattr(f.upper("dir").c_str(), user_xattr, "y", 1, 0) == 0);
  REQUIRE(::setxattr(f.upper().c_str(), user_xattr, "y", 1, 0) == 0);  // as the kernel, never for the root
  fs::create_directories(f.upper("ign2"));
  REQUIRE(::setxattr(f.upper("ign2").c_str(), user_xattr, "yes", 3, 0) == 0);

  // As root mounts it (trusted.*), user.overlay.opaque is the worker's own
  // attribute: dir is merged with the base's.
  const Snapshot as_root = f.from_upper(root_xattr);
  CHECK(f.at(as_root.tree, "dir/nested.txt") == "nested\n");
  CHECK(f.at(as_root.tree, "dir/new.txt") == "new\n");
  // In a user namespace it is the mount's: dir holds the upper's alone.
  const Snapshot in_namespace = f.from_upper(user_xattr);
  CHECK_FALSE(f.at(in_namespace.tree, "dir/nested.txt"));
  CHECK(f.at(in_namespace.tree, "dir/new.txt") == "new\n");
  CHECK(f.at(in_namespace.tree, "ign2/keep.txt") == "keep\n");
  CHECK(f.at(in_namespace.tree, "README") == "hello\n");

  if (::geteuid() == 0) {
    fs::create_directories(f.upper("redo"));
    REQUIRE(::setxattr(f.upper("redo").c_str(), root_xattr, "y", 1, 0) == 0);
    CHECK(f.at(f.from_upper(user_xattr).tree, "redo/old.txt") == "old\n");
    CHECK_FALSE(f.at(f.from_upper(root_xattr).tree, "redo/old.txt"));
  }
  CHECK_THROWS(f.from_upper("trusted.overlay.redirect"));
}

TEST_CASE("upper snapshot: the worker's user.overlay.opaque is not honoured under root's overlay") {
  if (::geteuid() != 0) {
    CHECK_MESSAGE(OverlayFixture().root_overlay_refused_in_user_namespace(),
                  "an overlay with trusted.* xattrs mounted without root");
    return;
  }
  OverlayFixture f;
  // The kernel keeps showing dir's lower entries (the script checks), and so
  // must the snapshot.
  f.change(
      "python3 -c 'import os; os.setxattr(\"dir\", \"user.overlay.opaque\", b\"y\")' && echo new > dir/new.txt && "
      "test -e dir/nested.txt",
      Mount::root);
  char value[2] = {};
  REQUIRE(::getxattr(f.upper("dir").c_str(), user_xattr, value, sizeof value) == 1);
  const Snapshot got = f.from_upper(root_xattr);
  CHECK(same(got.tree, f.reference().tree));
  CHECK(f.at(got.tree, "dir/nested.txt") == "nested\n");
}

TEST_CASE("upper snapshot: whiteout-looking names and devices other than 0/0 are not whiteouts") {
  OverlayFixture f;
  make_file(f.upper(".wh.README"), "");
  make_file(f.upper("README"), "");
  ::chmod(f.upper("README").c_str(), 0);
  const Snapshot got = f.from_upper(user_xattr);
  CHECK(f.at(got.tree, ".wh.README") == "");
  CHECK(f.at(got.tree, "README") == "");  // an empty file of mode 000 is a file
  if (::geteuid() == 0) {
    REQUIRE(::mknod(f.upper("same.txt").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0);
    const Snapshot with_device = f.from_upper(user_xattr);
    CHECK_FALSE(f.at(with_device.tree, "same.txt"));
    CHECK(warned(with_device, "same.txt", "special file"));
  }
}

TEST_CASE("upper snapshot: a .gitignore nested deeper than a path name can reach is not applied, and no failure") {
  OverlayFixture f;
  // 18 directories of 250 bytes each: a path of about 4,500 bytes, beyond
  // PATH_MAX, which only a walk relative to each directory reaches.
  const std::string name(250, 'a');
  mullet::UniqueFd dir(::open(f.upper().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir);
  std::string relative;
  for (int level = 0; level < 18; ++level) {
    REQUIRE(::mkdirat(dir.get(), name.c_str(), 0755) == 0);
    dir = mullet::UniqueFd(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(dir);
    relative += name + "/";
  }
  for (const auto& [file, content] : {std::pair<std::string, std::string>{".gitignore", "*.x\n"}, {"f.x", "kept\n"}}) {
    mullet::UniqueFd out(::openat(dir.get(), file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(out);
    REQUIRE(::write(out.get(), content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  }
  const Snapshot got = f.from_upper(user_xattr);
  CHECK(f.at(got.tree, relative + "f.x") == "kept\n");
  CHECK(warned(got, relative + ".gitignore", "nested too deep"));
}

TEST_CASE("upper snapshot: a .gitignore over 1 MiB is not applied, below it either") {
  OverlayFixture f;
  f.change(
      "{ echo '*.dat'; head -c 1048576 /dev/zero | tr '\\0' '#'; } > ign2/.gitignore && echo d > ign2/b.dat && "
      "mkdir ign2/sub && echo d > ign2/sub/c.dat && echo l > ign2/sub/d.log",
      Mount::user_namespace);
  const Snapshot expected = f.reference();
  const Snapshot got = f.from_upper(user_xattr);
  CHECK_MESSAGE(same(got.tree, expected.tree), f.difference(expected.tree, got.tree));
  CHECK(f.at(got.tree, "ign2/b.dat") == "d\n");
  CHECK(f.at(got.tree, "ign2/sub/c.dat") == "d\n");
  CHECK(f.at(got.tree, "ign2/sub/d.log") == "l\n");  // the root's *.log is not applied below either
  CHECK(warned(got, "ign2/.gitignore", "at most 1 MiB"));
}

TEST_CASE("upper snapshot: a submodule stays as the base had it, whatever the worker writes into its directory") {
  OverlayFixture f(true);
  f.change("echo x > mod/file && rm -rf dir && mkdir dir && mkdir dir/sub && echo n > dir/sub/n2.txt",
           Mount::user_namespace);
  const Snapshot expected = f.reference();
  const Snapshot got = f.from_upper(user_xattr);
  CHECK_MESSAGE(same(got.tree, expected.tree), f.difference(expected.tree, got.tree));
  CHECK_FALSE(same(got.tree, f.base_tree()));
  CHECK(f.at(got.tree, "mod") == "<gitlink>");
  CHECK_FALSE(f.at(got.tree, "dir/nested.txt"));
  CHECK(f.at(got.tree, "dir/sub/n2.txt") == "n\n");
}

// fuse-overlayfs's upper dir as its daemon (not root) writes it, found by
// experiment with fuse-overlayfs 1.10: rm of a lower file leaves a char
// device 0/0; a directory it makes (rm -rf and mkdir of a lower one, or a
// new one) gets user.fuseoverlayfs.opaque=y, a `.wh..wh..opq` file and a
// `.wh..opq` device.
TEST_CASE("upper snapshot: fuse-overlayfs's whiteouts, opaque directories and their markers") {
  OverlayFixture f;
  const auto upper = [&](const std::string& path) { return f.upper(path); };
  const auto opaque_dir = [&](const std::string& dir, const char* value) {
    fs::create_directories(upper(dir));
    REQUIRE(::setxattr(upper(dir).c_str(), "user.fuseoverlayfs.opaque", value, 1, 0) == 0);
    make_file(upper(dir + "/.wh..wh..opq"), "");
    REQUIRE(::mknod(upper(dir + "/.wh..opq").c_str(), S_IFCHR | 0700, makedev(0, 0)) == 0);
  };
  make_file(upper("README"), "changed\n");
  REQUIRE(::mknod(upper("same.txt").c_str(), S_IFCHR | 0700, makedev(0, 0)) == 0);
  opaque_dir("redo", "y");
  make_file(upper("redo/only.txt"), "fresh\n");
  opaque_dir("ign3", "y");
  opaque_dir("fresh", "y");  // a directory the base never had
  make_file(upper("fresh/a.txt"), "a\n");
  fs::create_directories(upper("deep/a"));
  make_file(upper("deep/a/new.txt"), "new\n");

  const Snapshot got = f.from_upper(mullet::git::fuse_overlayfs_upper);
  CHECK(f.at(got.tree, "README") == "changed\n");
  CHECK_FALSE(f.at(got.tree, "same.txt"));
  CHECK(f.at(got.tree, "redo/only.txt") == "fresh\n");
  CHECK_FALSE(f.at(got.tree, "redo/old.txt"));
  CHECK_FALSE(f.at(got.tree, "ign3/keep.txt"));
  CHECK(f.at(got.tree, "fresh/a.txt") == "a\n");
  CHECK(f.at(got.tree, "deep/a/new.txt") == "new\n");
  CHECK(f.at(got.tree, "deep/a/b/c/d.txt") == "d\n");
  CHECK(f.at(got.tree, "deep/other/x.txt") == "x\n");
  for (const char* marker : {"redo/.wh..wh..opq", "redo/.wh..opq", "ign3/.wh..opq", "fresh/.wh..wh..opq"}) {
    CHECK_MESSAGE(!f.at(got.tree, marker), marker);
  }
  CHECK(got.warnings.empty());
}

// fuse-overlayfs 1.10 refuses a worker `.wh.` names only for files it
// creates; as a directory, symlink, hard link or rename target the worker
// has one and sees it (and what it would hide) while the daemon runs, and the
// next daemon reads it as a deletion (found by experiment: the overlay
// attack suite's worker). user.overlay.opaque, which the worker may set, the
// next daemon honours. Each refuses the snapshot.
TEST_CASE("upper snapshot: a fuse-overlayfs upper dir with a worker's .wh. name or user.overlay.opaque is refused") {
  const std::vector<std::pair<std::string, std::function<void(OverlayFixture&)>>> cases = {
      {".wh.README as a file", [](OverlayFixture& f) { make_file(f.upper(".wh.README"), ""); }},
      {".wh.README as a directory", [](OverlayFixture& f) { fs::create_directories(f.upper(".wh.README")); }},
      {"deep/a/.wh.b as a symlink",
       [](OverlayFixture& f) {
         fs::create_directories(f.upper("deep/a"));
         fs::create_symlink("x", f.upper("deep/a/.wh.b"));
       }},
      {"a .wh..wh..opq in a directory not opaque",
       [](OverlayFixture& f) {
         fs::create_directories(f.upper("dir"));
         make_file(f.upper("dir/.wh..wh..opq"), "");
       }},
      {"a .wh..wh..opq that is a directory, in an opaque one",
       [](OverlayFixture& f) {
         fs::create_directories(f.upper("redo/.wh..wh..opq"));
         REQUIRE(::setxattr(f.upper("redo").c_str(), "user.fuseoverlayfs.opaque", "y", 1, 0) == 0);
       }},
      {"user.overlay.opaque on a directory",
       [](OverlayFixture& f) {
         fs::create_directories(f.upper("deep"));
         REQUIRE(::setxattr(f.upper("deep").c_str(), "user.overlay.opaque", "y", 1, 0) == 0);
       }},
  };
  for (const auto& [what, make] : cases) {
    INFO(what);
    OverlayFixture f;
    make(f);
    try {
      (void)f.from_upper(mullet::git::fuse_overlayfs_upper);
      FAIL("not refused");
    } catch (const mullet::Error& error) {
      CHECK(error.code() == mullet::ExitCode::refused);
      CHECK(contains(error.what(), "fuse-overlayfs reads differently"));
    }
    // Positive control: the kernel's overlay reads the same upper dir.
    CHECK_NOTHROW((void)f.from_upper(user_xattr));
  }
}
