#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "git/base_objects.hpp"
#include "git/clone.hpp"
#include "git/handles.hpp"
#include "git/repository.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::git::BaseHistory;
using mullet::git::Repository;
using mullet::test::contains;
using mullet::test::GitRepo;
using mullet::test::make_file;
using mullet::test::ScratchDir;
using Strings = std::vector<std::string>;

namespace {

// A user repository with two commits on main, a secret on another branch
// and an unreachable blob: what a base's pack must leave out.
class BaseFixture {
 public:
  BaseFixture() : m_user(m_scratch / "user") {
    make_file(m_user.path("README"), "first\n");
    m_first = m_user.commit_all("first");
    make_file(m_user.path("README"), "second\n");
    fs::create_directories(m_user.path("dir"));
    make_file(m_user.path("dir/file.txt"), "nested\n");
    m_base = m_user.commit_all("second");
    m_branch = m_user.git({"symbolic-ref", "--short", "HEAD"});
    m_user.git({"checkout", "-q", "-b", "other"});
    make_file(m_user.path("other.txt"), "SECRET-on-another-branch\n");
    m_other = m_user.commit_all("other");
    m_user.git({"checkout", "-q", m_branch});
    make_file(m_scratch / "loose", "SECRET-unreachable\n");
    m_unreachable = m_user.git({"hash-object", "-w", m_scratch / "loose"});
  }

  Repository repo() const { return Repository::open_git_dir(m_user.path(".git")); }
  git_oid base() const { return mullet::git::oid_from_string(m_base); }

  // Every object id in the packs of `objects_dir`, as git lists them there.
  std::set<std::string> objects_in(const std::string& objects_dir) const {
    std::set<std::string> found;
    for (const auto& entry : fs::directory_iterator(objects_dir + "/pack")) {
      if (entry.path().extension() != ".idx") continue;
      const std::string listing = m_user.git({"verify-pack", "-v", entry.path().string()});
      for (const auto& line : mullet::util::split(listing, '\n')) {
        const auto words = mullet::util::split(line, ' ');
        if (!words.empty() && words[0].size() == 40) found.insert(words[0]);
      }
    }
    return found;
  }

  // What `git rev-list --objects ARGS` lists in the user's repository.
  std::set<std::string> rev_list(const Strings& args) const {
    Strings command = {"rev-list", "--objects"};
    command.insert(command.end(), args.begin(), args.end());
    std::set<std::string> found;
    for (const auto& line : mullet::util::split(m_user.git(command), '\n')) {
      if (line.size() >= 40) found.insert(line.substr(0, 40));
    }
    return found;
  }

  ScratchDir m_scratch;
  GitRepo m_user;
  std::string m_branch, m_first, m_base, m_other, m_unreachable;
};

}  // namespace

TEST_CASE("the base's pack holds exactly what the base reaches") {
  BaseFixture fixture;
  const Repository repo = fixture.repo();
  const auto built = mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry);
  CHECK(built.objects_dir == mullet::git::base_objects_dir(repo, fixture.base(), BaseHistory::ancestry));
  CHECK(contains(built.objects_dir, "/.git/mullet/bases/" + fixture.m_base + "-base/objects"));
  CHECK(built.shallow.empty());
  const auto objects = fixture.objects_in(built.objects_dir);
  CHECK(objects == fixture.rev_list({fixture.m_base}));
  CHECK(objects.count(fixture.m_first) == 1);
  CHECK(objects.count(fixture.m_other) == 0);
  CHECK(objects.count(fixture.m_unreachable) == 0);
  // Nothing is left of the build beside the entry; the sandboxes' uid may read it.
  Strings names;
  for (const auto& entry : fs::directory_iterator(fs::path(built.objects_dir).parent_path().parent_path())) {
    names.push_back(entry.path().filename().string());
  }
  CHECK(names == Strings{fixture.m_base + "-base"});
  struct stat info {};
  REQUIRE(::stat((built.objects_dir + "/pack").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0755);
  CHECK(!mullet::util::exists(built.objects_dir + "/info/alternates"));
}

TEST_CASE("history none packs the base commit and its tree, and clones are shallow at the base") {
  BaseFixture fixture;
  const Repository repo = fixture.repo();
  const auto built = mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::commit_only);
  CHECK(contains(built.objects_dir, fixture.m_base + "-none/objects"));
  CHECK(built.shallow == fixture.m_base + "\n");
  const auto objects = fixture.objects_in(built.objects_dir);
  CHECK(objects == fixture.rev_list({"--no-walk", fixture.m_base}));
  CHECK(objects.count(fixture.m_base) == 1);
  CHECK(objects.count(fixture.m_first) == 0);
}

TEST_CASE("an existing entry is reused; one that is not ours is refused") {
  BaseFixture fixture;
  const Repository repo = fixture.repo();
  const auto first = mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry);
  const auto pack_files = [&] {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(first.objects_dir + "/pack")) {
      struct stat info {};
      ::stat(entry.path().c_str(), &info);
      names.insert(entry.path().filename().string() + "@" + std::to_string(info.st_ino));
    }
    return names;
  };
  const auto before = pack_files();
  const auto again = mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry);
  CHECK(again.objects_dir == first.objects_dir);
  CHECK(pack_files() == before);

  SUBCASE("a symlink in its place") {
    const std::string entry = fs::path(first.objects_dir).parent_path().string();
    fs::rename(entry, entry + ".real");
    fs::create_directory_symlink(entry + ".real", entry);
    CHECK_THROWS_AS(mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry), mullet::Error);
  }
  SUBCASE("an entry without a pack") {
    for (const auto& entry : fs::directory_iterator(first.objects_dir + "/pack")) fs::remove(entry.path());
    CHECK_THROWS_AS(mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry), mullet::Error);
  }
}

TEST_CASE("a clone's own pack holds what its commit reaches beyond the base") {
  BaseFixture fixture;
  const Repository repo = fixture.repo();
  fixture.m_user.git({"checkout", "-q", "-b", "job"});
  make_file(fixture.m_user.path("new.txt"), "attempt 1\n");
  const std::string attempt1 = fixture.m_user.commit_all("attempt 1");
  make_file(fixture.m_user.path("new.txt"), "attempt 2\n");
  const std::string attempt2 = fixture.m_user.commit_all("attempt 2");
  fixture.m_user.git({"checkout", "-q", fixture.m_branch});
  ScratchDir clone;
  mullet::git::create_private_clone(repo, mullet::git::oid_from_string(attempt2), {clone / "git", clone / "work"},
                                    "/mullet/git");
  mullet::git::add_objects_beyond_base(repo, clone / "git", mullet::git::oid_from_string(attempt2), fixture.base());
  const auto objects = fixture.objects_in(clone / "git/objects");
  CHECK(objects == fixture.rev_list({attempt2, "^" + fixture.m_base}));
  CHECK(objects.count(attempt1) == 1);
  CHECK(objects.count(fixture.m_base) == 0);

  SUBCASE("nothing for the base itself") {
    ScratchDir other;
    mullet::git::create_private_clone(repo, fixture.base(), {other / "git", other / "work"}, "/mullet/git");
    mullet::git::add_objects_beyond_base(repo, other / "git", fixture.base(), fixture.base());
    CHECK(fs::is_empty(other / "git/objects/pack"));
  }
}

TEST_CASE("a shallow user repository: the base's pack and clones stop where it does") {
  BaseFixture fixture;
  ScratchDir scratch;
  GitRepo shallow(scratch / "shallow");
  shallow.git({"fetch", "-q", "--depth=1", "file://" + fixture.m_user.dir(), fixture.m_branch});
  const std::string tip = shallow.git({"rev-parse", "FETCH_HEAD"});
  REQUIRE(tip == fixture.m_base);
  const Repository repo = Repository::open_git_dir(shallow.path(".git"));
  const auto built = mullet::git::ensure_base_objects(repo, fixture.base(), BaseHistory::ancestry);
  CHECK(built.shallow == fixture.m_base + "\n");
  CHECK(fixture.objects_in(built.objects_dir) == fixture.rev_list({"--no-walk", fixture.m_base}));
}
