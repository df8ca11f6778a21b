#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "git/pristine.hpp"
#include "git/repository.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::git::Repository;
using mullet::test::GitRepo;
using mullet::test::make_file;
using mullet::test::ScratchDir;

namespace {

ino_t inode_of(const std::string& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_ino;
}

}  // namespace

TEST_CASE("a pristine checkout is built once, claimed per job, and removed with its last claim") {
  ScratchDir scratch;
  GitRepo user(scratch / "user");
  make_file(user.path("README"), "hello\n");
  fs::create_directories(user.path("dir"));
  make_file(user.path("dir/file"), "nested\n");
  const git_oid base = mullet::git::oid_from_string(user.commit_all("base"));
  const Repository repo = Repository::open_git_dir(user.path(".git"));
  const std::string jobs = scratch / "jobs";
  for (const char* job : {"/a", "/b"}) mullet::util::make_dirs(jobs + job, 0700);

  const auto first = mullet::git::claim_pristine(repo, base, ::geteuid(), jobs + "/a", "/mullet/git");
  CHECK(mullet::util::read_file(first.tree + "/README") == "hello\n");
  CHECK(mullet::util::read_file(first.tree + "/dir/file") == "nested\n");
  CHECK(mullet::util::read_file(first.tree + "/.git") == "gitdir: /mullet/git\n");
  CHECK(mullet::util::exists(first.index));
  CHECK(mullet::util::read_file(jobs + "/a/pristine") == mullet::git::pristine_entry_name(base, ::geteuid()) + "\n");
  const ino_t tree_inode = inode_of(first.tree);

  SUBCASE("the second claim reuses it") {
    const auto second = mullet::git::claim_pristine(repo, base, ::geteuid(), jobs + "/b", "/mullet/git");
    CHECK(second.tree == first.tree);
    CHECK(inode_of(second.tree) == tree_inode);
    mullet::util::remove_tree(jobs + "/a");
    mullet::git::remove_unclaimed_pristines(repo, jobs);
    CHECK(mullet::util::exists(first.tree));
    mullet::util::remove_tree(jobs + "/b");
    mullet::git::remove_unclaimed_pristines(repo, jobs);
    CHECK_FALSE(mullet::util::exists(first.entry));
  }

  SUBCASE("a node's claim (<job>/nodes/<n>/pristine) keeps it too") {
    mullet::util::make_dirs(jobs + "/b/nodes/2", 0700);
    mullet::git::claim_pristine(repo, base, ::geteuid(), jobs + "/b/nodes/2", "/mullet/git");
    mullet::util::remove_tree(jobs + "/a");
    mullet::git::remove_unclaimed_pristines(repo, jobs);
    CHECK(mullet::util::exists(first.tree));
    mullet::util::remove_tree(jobs + "/b");
    mullet::git::remove_unclaimed_pristines(repo, jobs);
    CHECK_FALSE(mullet::util::exists(first.entry));
  }

  SUBCASE("an entry that is a symlink is refused") {
    const std::string elsewhere = scratch / "elsewhere";
    fs::rename(first.entry, elsewhere);
    fs::create_directory_symlink(elsewhere, first.entry);
    CHECK_THROWS_AS(mullet::git::claim_pristine(repo, base, ::geteuid(), jobs + "/b", "/mullet/git"), mullet::Error);
  }
}
