// Helpers shared by the unit tests: scratch directories, small files, and
// throwaway git repositories.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace mullet::test {

// A fresh directory under /tmp (by its real path), removed afterwards with
// whatever the test left in it, unreadable directories included. It does not
// use util::remove_tree or util::TempDir, which tests check.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "mullet-unit-");
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();

  const std::string& path() const { return m_path; }
  std::string operator/(const std::string& name) const { return m_path + "/" + name; }

 private:
  std::string m_path;
};

// Creates or truncates `path` with exactly `content`.
void make_file(const std::string& path, std::string_view content = "x", mode_t mode = 0644);

bool contains(std::string_view text, std::string_view part);

// A git repository made with the git CLI (no system or global config, a
// fixed identity), for tests of code that reads or writes one.
class GitRepo {
 public:
  // `git init` in `dir` (created if needed).
  explicit GitRepo(std::string dir);

  const std::string& dir() const { return m_dir; }
  std::string path(const std::string& relative) const { return m_dir + "/" + relative; }
  // Runs git there; a failure fails the test. Returns stdout without its
  // last newline.
  std::string git(const std::vector<std::string>& args) const;
  // `git add -A` (forced, so ignored paths are tracked too when asked) and a
  // commit; returns its full id.
  std::string commit_all(const std::string& message, bool include_ignored = false) const;

 private:
  std::string m_dir;
};

}  // namespace mullet::test
