#include "git/clone.hpp"

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

}  // namespace

void create_private_clone(const Repository& user_repo, const git_oid& base, const ClonePaths& paths,
                          const std::string& git_dir_as_seen_inside) {
  const std::string& g = paths.git_dir;
  for (const char* dir : {"", "/objects", "/objects/info", "/objects/pack", "/refs", "/refs/heads", "/refs/tags", "/info"}) {
    util::make_dirs(g + dir);
  }
  util::write_file(g + "/HEAD", oid_to_string(base) + "\n");
  // logallrefupdates off: nothing the worker does can produce reflogs, and we
  // keep the clone small. The checkout settings are fixed here, not inherited.
  util::write_file(g + "/config",
                   "[core]\n"
                   "\trepositoryformatversion = 0\n"
                   "\tfilemode = true\n"
                   "\tbare = false\n"
                   "\tsymlinks = true\n"
                   "\tlogallrefupdates = false\n"
                   "\tautocrlf = false\n");
  util::write_file(g + "/info/attributes", neutral_attributes);
  util::write_file(g + "/description", "git-mullet private clone\n");

  util::make_dirs(paths.work_tree);
  GitCliTarget target{g, paths.work_tree, {user_repo.objects_dir()}};
  // read-tree -u goes through git's parallel checkout (checkout.workers=0:
  // one worker per core), the fastest way to fill a work tree.
  const auto run = run_git(target, {"-c", "checkout.workers=0", "read-tree", "--reset", "-u", oid_to_string(base)});
  check_git(run, "checking out the base commit");
  util::write_file(paths.work_tree + "/.git", "gitdir: " + git_dir_as_seen_inside + "\n");
}

}  // namespace mullet::git
