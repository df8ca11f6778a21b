#include "git/pristine.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "git/base_objects.hpp"
#include "git/clone.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

constexpr const char* claim_file = "pristine";

// The one lock around claims and removals, beside the entries.
class PristineLock {
 public:
  explicit PristineLock(const std::string& common) {
    const std::string path = common + "/mullet/pristine.lock";
    m_fd = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!m_fd) throw failure("cannot open " + path + ": " + util::errno_text(errno));
    while (::flock(m_fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) throw failure("cannot lock " + path + ": " + util::errno_text(errno));
    }
  }

 private:
  UniqueFd m_fd;  // the lock goes with it
};

// Entries some job renamed into place: ours, not symlinks, a tree and an index.
void check_entry(const std::string& entry, uid_t owner) {
  check_directory_of_ours(entry, entry);
  struct stat tree {};
  struct stat index {};
  const bool ok = ::lstat((entry + "/tree").c_str(), &tree) == 0 && S_ISDIR(tree.st_mode) && tree.st_uid == owner &&
                  ::lstat((entry + "/index").c_str(), &index) == 0 && S_ISREG(index.st_mode) &&
                  index.st_uid == ::geteuid();
  if (!ok)
    throw refused_error(entry + " is not a pristine checkout of ours", "remove it; the next job builds it again");
}

// A build holds a flock on its `building-XXXXXX` directory for as long as
// it runs; one that can be locked by someone else was left by a build that
// died (its process holds no lock any more).
bool lock_directory(const UniqueFd& dir, bool wait) {
  while (::flock(dir.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EWOULDBLOCK && !wait) return false;
    if (errno != EINTR) throw failure("cannot lock a pristine build: " + util::errno_text(errno));
  }
  return true;
}

UniqueFd open_directory(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// A checkout of `commit` in a new `building-XXXXXX` directory, renamed to
// `entry` unless another job's rename came first.
void build_entry(const Repository& repo, const git_oid& commit, uid_t owner, const std::string& entry,
                 const std::string& git_dir_as_seen_inside) {
  util::TempDir building;
  UniqueFd build_lock;
  {
    // Made and locked under the removers' lock, so a removal never sees
    // this build's directory unlocked.
    const PristineLock lock(util::real_path(repo.common_dir()));
    building = util::TempDir(pristine_directory(repo), "building-");
    build_lock = open_directory(building.path());
    if (!build_lock) throw failure("cannot open " + building.path() + ": " + util::errno_text(errno));
    lock_directory(build_lock, true);
  }
  const std::string dir = building.path();
  const ClonePaths clone{dir + "/git", dir + "/tree"};
  create_private_clone(repo, commit, clone, git_dir_as_seen_inside);
  if (owner != ::geteuid()) {
    util::chown_tree(clone.work_tree, owner, static_cast<gid_t>(owner));
    refresh_index_after_chown(clone);
  }
  if (::rename((clone.git_dir + "/index").c_str(), (dir + "/index").c_str()) != 0) {
    throw failure("cannot move the pristine checkout's index: " + util::errno_text(errno));
  }
  util::remove_tree(clone.git_dir);
  if (::rename(dir.c_str(), entry.c_str()) == 0) {
    building.release();
  } else if (errno != EEXIST && errno != ENOTEMPTY) {
    throw failure("cannot move the pristine checkout into " + entry + ": " + util::errno_text(errno));
  }
  // Otherwise another job on this base renamed its entry first: ours goes.
}

}  // namespace

std::string pristine_entry_name(const git_oid& commit, uid_t owner) {
  return oid_to_string(commit) + "-" + std::to_string(owner);
}

std::string pristine_directory(const Repository& repo) {
  return util::real_path(repo.common_dir()) + "/mullet/pristine";
}

Pristine claim_pristine(const Repository& repo, const git_oid& commit, uid_t owner, const std::string& job_dir,
                        const std::string& git_dir_as_seen_inside) {
  const std::string common = util::real_path(repo.common_dir());
  util::make_private_dirs(common, "mullet/pristine");
  const std::string name = pristine_entry_name(commit, owner);
  const std::string entry = pristine_directory(repo) + "/" + name;
  // Two tries: an entry removed (its last job discarded) between the build
  // and the claim is built again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat info {};
    if (::lstat(entry.c_str(), &info) != 0) {
      if (errno != ENOENT) throw failure("cannot look at " + entry + ": " + util::errno_text(errno));
      build_entry(repo, commit, owner, entry, git_dir_as_seen_inside);
    }
    const PristineLock lock(common);
    if (::lstat(entry.c_str(), &info) != 0 && errno == ENOENT) continue;
    check_entry(entry, owner);
    util::write_file(job_dir + "/" + claim_file, name + "\n", 0600);
    return {entry, entry + "/tree", entry + "/index"};
  }
  throw failure("the pristine checkout " + entry + " was removed twice while this job claimed it", "run the job again");
}

void remove_unclaimed_pristines(const Repository& repo, const std::string& jobs_dir) {
  const std::string common = util::real_path(repo.common_dir());
  const std::string pristine = pristine_directory(repo);
  if (!util::is_directory(pristine)) return;
  const PristineLock lock(common);
  std::set<std::string> claimed;
  const auto note_claim = [&](const std::string& dir) {
    if (const auto name = util::read_file_if_exists(dir + "/" + claim_file)) claimed.insert(util::trim(*name));
  };
  util::DirectoryReader jobs(AT_FDCWD, jobs_dir);
  for (const auto& job : jobs.read_all()) {
    // A job's claim, and its nodes' (<job>/nodes/<n>/, each a clone of its own).
    const std::string job_dir = jobs_dir + "/" + job.name;
    note_claim(job_dir);
    if (!util::is_directory(job_dir + "/nodes")) continue;
    util::DirectoryReader nodes(AT_FDCWD, job_dir + "/nodes");
    for (const auto& node : nodes.read_all()) note_claim(job_dir + "/nodes/" + node.name);
  }
  util::DirectoryReader entries(AT_FDCWD, pristine);
  for (const auto& found : entries.read_all()) {
    if (claimed.count(found.name) != 0) continue;
    const std::string path = pristine + "/" + found.name;
    if (found.name.rfind("building-", 0) == 0) {
      // A build in progress keeps its lock; one that died left it free.
      const UniqueFd build = open_directory(path);
      if (!build || !lock_directory(build, false)) continue;
    }
    util::remove_tree(path);
  }
}

}  // namespace mullet::git
