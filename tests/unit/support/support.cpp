#include "support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "util/process.hpp"

namespace fs = std::filesystem;

namespace mullet::test {

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "XXXXXX";
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  m_path = fs::canonical(pattern).string();
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!fs::exists(fs::symlink_status(m_path, ignored))) return;
  // A test may leave directories it made unreadable or unwritable.
  fs::permissions(m_path, fs::perms::owner_all, fs::perm_options::add, ignored);
  for (auto it = fs::recursive_directory_iterator(m_path, ignored); it != fs::recursive_directory_iterator();
       it.increment(ignored)) {
    if (!it->is_symlink(ignored)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
  }
  fs::remove_all(m_path, ignored);
}

void make_file(const std::string& path, std::string_view content, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  REQUIRE_MESSAGE(fd >= 0, "cannot create " << path);
  REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  ::close(fd);
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

GitRepo::GitRepo(std::string dir) : m_dir(std::move(dir)) {
  fs::create_directories(m_dir);
  git({"init", "-q"});
}

std::string GitRepo::git(const std::vector<std::string>& args) const {
  util::SpawnOptions options;
  const std::string program = util::find_in_path("git", util::host_path());
  REQUIRE_MESSAGE(!program.empty(), "git is not on PATH");
  options.argv = {program, "-C", m_dir};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = {{"PATH", util::host_path()},    {"HOME", m_dir},
                 {"GIT_CONFIG_NOSYSTEM", "1"},   {"GIT_CONFIG_GLOBAL", "/dev/null"},
                 {"GIT_AUTHOR_NAME", "test"},    {"GIT_AUTHOR_EMAIL", "test@example.invalid"},
                 {"GIT_COMMITTER_NAME", "test"}, {"GIT_COMMITTER_EMAIL", "test@example.invalid"}};
  const auto run = util::run_capture(options);
  std::string shown;
  for (const auto& word : args) shown += " " + word;
  REQUIRE_MESSAGE(run.status.success(), "git" << shown << ": " << run.err);
  std::string out = run.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string GitRepo::commit_all(const std::string& message, bool include_ignored) const {
  if (include_ignored) {
    git({"add", "-A", "-f", "."});
  } else {
    git({"add", "-A"});
  }
  git({"commit", "-q", "--allow-empty", "-m", message});
  return git({"rev-parse", "HEAD"});
}

}  // namespace mullet::test
