#include "git/clone.hpp"

#include <sys/stat.h>

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

}  // namespace

void write_fixed_git_dir(const std::string& dir, const git_oid& head, mode_t file_mode) {
  for (const char* sub : {"/objects", "/refs", "/info"}) util::make_dirs(dir + sub);
  util::write_file(dir + "/HEAD", oid_to_string(head) + "\n", file_mode);
  // logallrefupdates off: nothing the worker does can produce reflogs, and we
  // keep the clone small. splitIndex off: one index file, which a sandbox's
  // read-only git dir and a copied index both need.
  util::write_file(dir + "/config",
                   "[core]\n"
                   "\trepositoryformatversion = 0\n"
                   "\tfilemode = true\n"
                   "\tbare = false\n"
                   "\tsymlinks = true\n"
                   "\tlogallrefupdates = false\n"
                   "\tautocrlf = false\n"
                   "\tsplitIndex = false\n",
                   file_mode);
  util::write_file(dir + "/info/attributes", neutral_attributes, file_mode);
}

void create_private_clone(const Repository& user_repo, const git_oid& base, const ClonePaths& paths,
                          const std::string& git_dir_as_seen_inside) {
  const std::string& g = paths.git_dir;
  for (const char* dir :
       {"", "/objects", "/objects/info", "/objects/pack", "/refs", "/refs/heads", "/refs/tags", "/info"}) {
    util::make_dirs(g + dir);
  }
  write_fixed_git_dir(g, base, 0644);
  util::write_file(g + "/description", "git-mullet private clone\n");

  util::make_dirs(paths.work_tree);
  GitCliTarget target{g, paths.work_tree, {user_repo.objects_dir()}};
  const auto run = run_git(target, read_tree_args(oid_to_string(base)));
  check_git(run, "checking out the base commit");
  util::write_file(paths.work_tree + "/.git", "gitdir: " + git_dir_as_seen_inside + "\n");
}

void reset_git_file(const std::string& work_tree, const std::string& git_dir) {
  util::remove_tree(work_tree + "/.git");
  util::write_file(work_tree + "/.git", "gitdir: " + git_dir + "\n");
}

void refresh_index_after_chown(const ClonePaths& paths) {
  git_index* raw = nullptr;
  check(git_index_open(&raw, (paths.git_dir + "/index").c_str()), "cannot read the clone's index");
  IndexPtr index(raw);
  const std::size_t count = git_index_entrycount(index.get());
  std::vector<git_index_entry> updated;
  updated.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const git_index_entry* entry = git_index_get_byindex(index.get(), i);
    struct stat info {};
    if (::lstat((paths.work_tree + "/" + entry->path).c_str(), &info) != 0) continue;
    if (entry->file_size != static_cast<std::uint32_t>(info.st_size) ||
        entry->ino != static_cast<std::uint32_t>(info.st_ino) ||
        entry->mtime.seconds != static_cast<std::int32_t>(info.st_mtim.tv_sec) ||
        entry->mtime.nanoseconds != static_cast<std::uint32_t>(info.st_mtim.tv_nsec)) {
      continue;
    }
    git_index_entry copy = *entry;
    copy.ctime.seconds = static_cast<std::int32_t>(info.st_ctim.tv_sec);
    copy.ctime.nanoseconds = static_cast<std::uint32_t>(info.st_ctim.tv_nsec);
    copy.uid = info.st_uid;
    copy.gid = info.st_gid;
    updated.push_back(copy);
  }
  for (const auto& entry : updated) check(git_index_add(index.get(), &entry), "cannot update the clone's index");
  check(git_index_write(index.get()), "cannot write the clone's index");
}

}  // namespace mullet::git
