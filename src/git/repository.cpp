#include "git/repository.hpp"

#include <cstdlib>

#include "util/error.hpp"

namespace mullet::git {
namespace {

std::string strip_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

const std::vector<std::string>& refused_git_environment() {
  // libgit2 honours some of these and the git we run (whose environment is
  // built from scratch) none, so honouring them half-way writes records into
  // one object store and refs into another.
  static const std::vector<std::string> names = {"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                                                 "GIT_INDEX_FILE",       "GIT_COMMON_DIR",
                                                 "GIT_NAMESPACE",        "GIT_REPLACE_REF_BASE",
                                                 "GIT_GRAFT_FILE",       "GIT_SHALLOW_FILE",
                                                 "GIT_QUARANTINE_PATH"};
  return names;
}

void check_git_environment() {
  for (const auto& name : refused_git_environment()) {
    if (std::getenv(name.c_str()) != nullptr) {
      throw usage_error(name +
                            " is set; git mullet does not work with a redirected object store, index, refs or "
                            "history",
                        "unset " + name + " (see ENVIRONMENT in git-mullet(1))");
    }
  }
}

Repository Repository::discover(const std::string& start_dir) {
  check_git_environment();
  // We never read or write a work tree (jobs start from commits, diff
  // compares commits), and libgit2 refuses to open a repository with
  // GIT_WORK_TREE set: it has no effect.
  ::unsetenv("GIT_WORK_TREE");
  initialise_libgit2();
  git_repository* raw = nullptr;
  // libgit2 reads GIT_DIR only when given no start path (it then starts
  // from ".", the current directory, which is what callers pass).
  const char* start = std::getenv("GIT_DIR") != nullptr ? nullptr : start_dir.c_str();
  const int rc = git_repository_open_ext(&raw, start, GIT_REPOSITORY_OPEN_FROM_ENV, nullptr);
  if (rc == GIT_ENOTFOUND) {
    throw usage_error("not a git repository: " + start_dir, "run git mullet inside a git repository");
  }
  if (rc < 0) throw usage_error("cannot open the git repository at " + start_dir + ": " + last_error_message());
  return Repository(RepositoryPtr(raw));
}

Repository Repository::open_git_dir(const std::string& git_dir) {
  initialise_libgit2();
  git_repository* raw = nullptr;
  check(git_repository_open_ext(&raw, git_dir.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr),
        "cannot open " + git_dir);
  return Repository(RepositoryPtr(raw));
}

std::string Repository::git_dir() const {
  return strip_slash(git_repository_path(m_repo.get()));
}
std::string Repository::common_dir() const {
  return strip_slash(git_repository_commondir(m_repo.get()));
}
std::string Repository::objects_dir() const {
  return common_dir() + "/objects";
}

std::optional<std::string> Repository::work_tree() const {
  const char* workdir = git_repository_workdir(m_repo.get());
  if (workdir == nullptr) return std::nullopt;
  return strip_slash(workdir);
}

git_oid Repository::resolve_commit(const std::string& rev) const {
  git_object* raw = nullptr;
  if (git_revparse_single(&raw, m_repo.get(), rev.c_str()) < 0) {
    throw usage_error("unknown revision '" + rev + "'", "name a commit, branch or tag that exists");
  }
  ObjectPtr object(raw);
  git_object* peeled = nullptr;
  if (git_object_peel(&peeled, object.get(), GIT_OBJECT_COMMIT) < 0) {
    throw usage_error("'" + rev + "' does not name a commit");
  }
  ObjectPtr commit(peeled);
  return *git_object_id(commit.get());
}

git_oid Repository::head_commit() const {
  if (git_repository_head_unborn(m_repo.get()) == 1) {
    throw usage_error("the repository has no commits yet (HEAD is unborn)", "commit something first, or pass --base");
  }
  return resolve_commit("HEAD");
}

Repository::ChangeCount Repository::count_changes(const git_oid& from_commit, const git_oid& to_commit) const {
  const auto tree = [&](const git_oid& commit) {
    const git_oid id = tree_of(commit);
    git_tree* raw = nullptr;
    check(git_tree_lookup(&raw, m_repo.get(), &id), "cannot read tree");
    return TreePtr(raw);
  };
  const TreePtr from = tree(from_commit);
  const TreePtr to = tree(to_commit);
  git_diff* raw_diff = nullptr;
  check(git_diff_tree_to_tree(&raw_diff, m_repo.get(), from.get(), to.get(), nullptr), "cannot compare two trees");
  const Owned<git_diff, git_diff_free> diff(raw_diff);
  git_diff_stats* raw_stats = nullptr;
  check(git_diff_get_stats(&raw_stats, diff.get()), "cannot count the changes between two trees");
  const Owned<git_diff_stats, git_diff_stats_free> stats(raw_stats);
  return {git_diff_stats_files_changed(stats.get()), git_diff_stats_insertions(stats.get()),
          git_diff_stats_deletions(stats.get())};
}

git_oid Repository::tree_of(const git_oid& commit_id) const {
  git_commit* raw = nullptr;
  check(git_commit_lookup(&raw, m_repo.get(), &commit_id), "cannot read commit " + oid_to_string(commit_id));
  CommitPtr commit(raw);
  return *git_commit_tree_id(commit.get());
}

std::optional<std::string> Repository::read_file_at(const git_oid& commit_id, const std::string& path,
                                                    std::size_t max_bytes) const {
  const git_oid tree_id = tree_of(commit_id);
  git_tree* raw_tree = nullptr;
  check(git_tree_lookup(&raw_tree, m_repo.get(), &tree_id), "cannot read tree");
  TreePtr tree(raw_tree);
  git_tree_entry* raw_entry = nullptr;
  if (git_tree_entry_bypath(&raw_entry, tree.get(), path.c_str()) < 0) return std::nullopt;
  TreeEntryPtr entry(raw_entry);
  const std::string shown = path + " in commit " + oid_to_string(commit_id);
  const git_filemode_t mode = git_tree_entry_filemode(entry.get());
  if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) {
    const char* kind = mode == GIT_FILEMODE_TREE     ? "a directory"
                       : mode == GIT_FILEMODE_LINK   ? "a symbolic link"
                       : mode == GIT_FILEMODE_COMMIT ? "a submodule"
                                                     : "not a file";
    throw usage_error(shown + " is " + kind + ", not a regular file");
  }
  // The size from the object's header, so a huge blob is never inflated.
  git_odb* raw_odb = nullptr;
  check(git_repository_odb(&raw_odb, m_repo.get()), "cannot open the object database");
  OdbPtr odb(raw_odb);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  check(git_odb_read_header(&size, &type, odb.get(), git_tree_entry_id(entry.get())), "cannot read " + shown);
  if (type != GIT_OBJECT_BLOB) throw usage_error(shown + " is not a blob");
  if (size > max_bytes) {
    throw usage_error(shown + " is " + std::to_string(size) + " bytes long; at most " + std::to_string(max_bytes) +
                      " are allowed");
  }
  return read_blob(*git_tree_entry_id(entry.get()));
}

std::string Repository::read_blob(const git_oid& blob_id) const {
  git_blob* raw = nullptr;
  check(git_blob_lookup(&raw, m_repo.get(), &blob_id), "cannot read blob " + oid_to_string(blob_id));
  BlobPtr blob(raw);
  const auto* data = static_cast<const char*>(git_blob_rawcontent(blob.get()));
  return std::string(data, static_cast<std::size_t>(git_blob_rawsize(blob.get())));
}

}  // namespace mullet::git
