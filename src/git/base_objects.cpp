#include "git/base_objects.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "git/cli.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

void check_git(const util::CapturedRun& run, const std::string& what) {
  if (run.status.success()) return;
  throw failure(what + " failed (" + run.status.describe() + "): " + util::trim(run.err));
}

std::string bases_dir(const Repository& repo) {
  return util::real_path(repo.common_dir()) + "/mullet/bases";
}

// An entry some job renamed into place: ours, and holding a pack.
void check_entry(const std::string& entry) {
  for (const char* part : {"", "/objects", "/objects/pack"}) check_directory_of_ours(entry + part, entry);
  util::DirectoryReader pack(AT_FDCWD, entry + "/objects/pack");
  bool has_index = false;
  for (const auto& found : pack.read_all()) {
    if (found.name.size() > 4 && found.name.compare(found.name.size() - 4, 4, ".idx") == 0) has_index = true;
  }
  if (!has_index) {
    throw refused_error(entry + " holds no pack", "remove it; the next job builds it again");
  }
}

// A git dir of our own around the pack being built: our fixed config (none
// of the user's), the user's objects borrowed through the environment.
void make_build_git_dir(const std::string& dir, const git_oid& base) {
  for (const char* sub : {"/objects/pack", "/objects/info", "/refs"}) util::make_dirs(dir + sub);
  util::write_file(dir + "/HEAD", oid_to_string(base) + "\n");
  util::write_file(dir + "/config",
                   "[core]\n"
                   "\trepositoryformatversion = 0\n"
                   "\tbare = true\n"
                   "\tlogallrefupdates = false\n");
}

// The user's shallow commits that `base` reaches: the pack has no parent
// of theirs, so the clone must not look for one either.
std::string shallow_commits_reached(const GitCliTarget& target, const std::string& user_shallow, const git_oid& base) {
  const auto reached = run_git(target, {"rev-list", "--end-of-options", oid_to_string(base)});
  check_git(reached, "listing the base's history");
  const auto lines = util::split(reached.out, '\n');
  const std::set<std::string> commits(lines.begin(), lines.end());
  std::string kept;
  for (auto line : util::split(user_shallow, '\n')) {
    line = util::trim(line);
    if (!line.empty() && commits.count(line) != 0) kept += line + "\n";
  }
  return kept;
}

void open_for_sandboxes(const std::string& entry) {
  // As root, a sandbox's uid reads the pack through its bind: the tree is
  // world-readable (the directory holding it stays private).
  for (const char* part : {"", "/objects", "/objects/pack", "/objects/info"}) {
    if (::chmod((entry + part).c_str(), 0755) != 0) {
      throw failure("cannot open " + entry + part + " to sandboxes: " + util::errno_text(errno));
    }
  }
}

}  // namespace

void check_directory_of_ours(const std::string& path, const std::string& entry) {
  struct stat info {};
  const bool ours = ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid();
  if (!ours) {
    throw refused_error(path + " is not a directory of the user running git-mullet",
                        "it is a cache of the base; remove " + entry + " and the next job builds it again");
  }
}

std::string base_objects_entry_name(const git_oid& base, BaseHistory history) {
  return oid_to_string(base) + (history == BaseHistory::ancestry ? "-base" : "-none");
}

std::string base_objects_dir(const Repository& repo, const git_oid& base, BaseHistory history) {
  return bases_dir(repo) + "/" + base_objects_entry_name(base, history) + "/objects";
}

BaseObjects ensure_base_objects(const Repository& repo, const git_oid& base, BaseHistory history) {
  const std::string common = util::real_path(repo.common_dir());
  util::make_private_dirs(common, "mullet/bases");
  const std::string bases = common + "/mullet/bases";
  const std::string entry = bases + "/" + base_objects_entry_name(base, history);
  struct stat info {};
  if (::lstat(entry.c_str(), &info) != 0) {
    if (errno != ENOENT) throw failure("cannot look at " + entry + ": " + util::errno_text(errno));
    util::TempDir building(bases, "building-");
    const std::string dir = building.path();
    make_build_git_dir(dir, base);
    const GitCliTarget target{dir, std::nullopt, {util::real_path(repo.objects_dir())}};
    if (history == BaseHistory::commit_only) {
      // The walk stops at a shallow commit: the pack gets the base and its tree.
      util::write_file(dir + "/shallow", oid_to_string(base) + "\n");
    } else if (const auto user_shallow = util::read_file_if_exists(common + "/shallow")) {
      util::write_file(dir + "/shallow", *user_shallow);
    }
    const auto pack =
        run_git(target, {"pack-objects", "--revs", "--delta-base-offset", "-q", dir + "/objects/pack/pack"},
                oid_to_string(base) + "\n");
    check_git(pack, "packing the base's objects");
    if (history == BaseHistory::ancestry && util::exists(dir + "/shallow")) {
      const std::string kept = shallow_commits_reached(target, util::read_file(dir + "/shallow"), base);
      if (kept.empty()) {
        ::unlink((dir + "/shallow").c_str());
      } else {
        util::write_file(dir + "/shallow", kept);
      }
    }
    open_for_sandboxes(dir);
    if (::rename(dir.c_str(), entry.c_str()) == 0) {
      building.release();
    } else if (errno != EEXIST && errno != ENOTEMPTY) {
      throw failure("cannot move the base's objects into " + entry + ": " + util::errno_text(errno));
    }
    // Otherwise another job on this base renamed its entry first: ours goes.
  }
  check_entry(entry);
  return {entry + "/objects", util::read_file_if_exists(entry + "/shallow").value_or("")};
}

void add_objects_beyond_base(const Repository& repo, const std::string& clone_git_dir, const git_oid& commit,
                             const git_oid& base) {
  if (git_oid_cmp(&commit, &base) == 0) return;
  const GitCliTarget target{clone_git_dir, std::nullopt, {util::real_path(repo.objects_dir())}};
  const auto pack =
      run_git(target, {"pack-objects", "--revs", "--delta-base-offset", "-q", clone_git_dir + "/objects/pack/pack"},
              oid_to_string(commit) + "\n^" + oid_to_string(base) + "\n");
  check_git(pack, "packing the job's own commits");
}

}  // namespace mullet::git
