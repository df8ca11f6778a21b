#include "git/uncommitted.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "git/cli.hpp"
#include "git/clone.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

constexpr std::size_t max_index_bytes = std::size_t{2} << 30U;
constexpr std::size_t max_exclude_bytes = 1U << 20U;

void check_git(const util::CapturedRun& run, const std::string& what) {
  if (run.status.success()) return;
  throw failure(what + " failed (" + run.status.describe() + "): " + util::trim(run.err),
                "commit or stash the changes yourself, or run without --include-uncommitted");
}

// A git dir of ours over the user's work tree: HEAD at `head`, a copy of the
// user's index (with its mtime, which git's racy-clean check reads), the
// user's info/exclude, our fixed config and neutral attributes, and the
// user's objects. Removed when it goes away.
class ScratchGitDir {
 public:
  ScratchGitDir(const Repository& repo, const std::string& work_tree, const git_oid& head) {
    // Outside the repository: a run refused later leaves no trace in it.
    const std::string common = util::real_path(repo.common_dir());
    m_dir = util::TempDir("/tmp", "mullet-uncommitted-");
    const std::string& g = m_dir.path();
    write_fixed_git_dir(g, head, 0600);
    if (const auto exclude = util::read_regular_file_if_exists(common + "/info/exclude", max_exclude_bytes)) {
      util::write_file(g + "/info/exclude", *exclude, 0600);
    }
    copy_index(repo.git_dir() + "/index", g + "/index");
    m_target = {g, work_tree, {}};
    m_target.index_file = g + "/index";
    m_target.object_directory = util::real_path(repo.objects_dir());
    // The user's own ignore file, which our config lacks: what they ignore
    // everywhere (secrets, editor files) stays out too.
    m_prefix = {"-c", "core.excludesFile=" + user_excludes_file(repo)};
  }

  // core.excludesFile as the user's git reads it, else git's default for it
  // ($XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore); our own git
  // gets neither the user's config nor XDG_CONFIG_HOME, so it is named here.
  static std::string user_excludes_file(const Repository& repo) {
    GitCliTarget user{repo.git_dir(), std::nullopt, {}};
    user.user_config = true;
    const auto excludes = run_git(user, {"config", "--path", "--get", "core.excludesFile"});
    std::string file = util::trim(util::split(excludes.out, '\n').front());
    if (excludes.status.success() && !file.empty()) return file;
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/git/ignore";
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr ? home : "/nonexistent") + "/.config/git/ignore";
  }

  util::CapturedRun run(const std::vector<std::string>& args) const {
    std::vector<std::string> all = m_prefix;
    all.insert(all.end(), args.begin(), args.end());
    return run_git(m_target, all);
  }

 private:
  static void copy_index(const std::string& from, const std::string& to) {
    struct stat info {};
    if (::stat(from.c_str(), &info) != 0) return;  // nothing staged ever: git starts from an empty index
    const auto content = util::read_regular_file_if_exists(from, max_index_bytes);
    if (!content) return;
    util::write_file(to, *content, 0600);
    const struct timespec times[2] = {info.st_atim, info.st_mtim};
    if (::utimensat(AT_FDCWD, to.c_str(), times, 0) != 0) {
      throw failure("cannot copy the index: " + util::errno_text(errno));
    }
  }

  util::TempDir m_dir;
  GitCliTarget m_target;
  std::vector<std::string> m_prefix;
};

// `git status --porcelain -z` in the scratch git dir: "XY PATH\0" entries.
std::string status(const ScratchGitDir& scratch, const char* untracked) {
  const auto run = scratch.run({"status", "--porcelain", "-z", "--no-renames", untracked, "--ignore-submodules=dirty"});
  check_git(run, "git status of the work tree");
  return run.out;
}

void check_sizes(const std::string& work_tree, const std::string& entries, std::uint64_t max_file_bytes) {
  for (const auto& entry : util::split(entries, '\0')) {
    if (entry.size() < 4 || entry[0] == 'D' || entry[1] == 'D') continue;
    const std::string path = entry.substr(3);
    struct stat info {};
    if (::lstat((work_tree + "/" + path).c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (static_cast<std::uint64_t>(info.st_size) > max_file_bytes) {
      throw usage_error("cannot include the uncommitted file " + path + ": it is larger than " +
                            std::to_string(max_file_bytes >> 20U) + " MiB (limits.file_mb)",
                        "ignore it (.gitignore), commit it, or raise [limits] file_mb");
    }
  }
}

}  // namespace

bool has_uncommitted_changes(const Repository& repo, const git_oid& head) {
  const auto work_tree = repo.work_tree();
  if (!work_tree) return false;
  const ScratchGitDir scratch(repo, *work_tree, head);
  return !status(scratch, "--untracked-files=normal").empty();
}

std::optional<git_oid> commit_uncommitted_changes(const Repository& repo, const git_oid& head,
                                                  std::uint64_t max_file_bytes, const UserIdentity& identity) {
  const auto work_tree = repo.work_tree();
  if (!work_tree) return std::nullopt;
  const ScratchGitDir scratch(repo, *work_tree, head);
  check_sizes(*work_tree, status(scratch, "--untracked-files=all"), max_file_bytes);
  check_git(scratch.run({"add", "--all"}), "git add of the uncommitted changes");
  const auto written = scratch.run({"write-tree"});
  check_git(written, "git write-tree of the uncommitted changes");
  const git_oid tree_id = oid_from_string(util::trim(written.out));
  const git_oid head_tree = repo.tree_of(head);
  if (git_oid_cmp(&tree_id, &head_tree) == 0) return std::nullopt;

  git_tree* raw_tree = nullptr;
  check(git_tree_lookup(&raw_tree, repo.get(), &tree_id), "cannot read the tree of the uncommitted changes");
  const TreePtr tree(raw_tree);
  git_commit* raw_parent = nullptr;
  check(git_commit_lookup(&raw_parent, repo.get(), &head), "cannot read HEAD");
  const CommitPtr parent(raw_parent);
  const git_commit* parents[] = {parent.get()};
  const auto author = signature_or_mullet(identity.author);
  const auto committer = signature_or_mullet(identity.committer);
  const std::string message = "Uncommitted changes on " + oid_to_string(head).substr(0, 12) +
                              "\n\nThe work tree as git-mullet found it, the base of a job "
                              "(run --include-uncommitted).\n";
  git_oid commit_id{};
  check(git_commit_create(&commit_id, repo.get(), nullptr, author.get(), committer.get(), nullptr, message.c_str(),
                          tree.get(), 1, parents),
        "cannot write the commit of the uncommitted changes");
  return commit_id;
}

}  // namespace mullet::git
