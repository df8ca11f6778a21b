#include <doctest/doctest.h>

#include <cstdlib>

#include <algorithm>
#include <string>
#include <vector>

#include "git/cli.hpp"
#include "git/repository.hpp"
#include "util/error.hpp"

using mullet::git::create_ref_args;
using mullet::git::diff_args;
using mullet::git::read_tree_args;

namespace {

std::size_t index_of(const std::vector<std::string>& argv, const std::string& word) {
  return static_cast<std::size_t>(std::find(argv.begin(), argv.end(), word) - argv.begin());
}

// Every value comes after --end-of-options, so git reads none as an option.
void check_after_end_of_options(const std::vector<std::string>& argv, const std::vector<std::string>& values) {
  const std::size_t end = index_of(argv, "--end-of-options");
  REQUIRE(end < argv.size());
  for (const auto& value : values) {
    INFO("value: " << value);
    const std::size_t at = index_of(argv, value);
    REQUIRE(at < argv.size());
    CHECK(at > end);
  }
}

}  // namespace

TEST_CASE("diff puts --end-of-options before its revisions and -- after them") {
  const std::string from = "--output=/tmp/x";
  const std::string to = "-p";
  const auto argv = diff_args(from, to);
  CHECK(argv.front() == "diff");
  check_after_end_of_options(argv, {from, to});
  CHECK(argv.back() == "--");
  CHECK(index_of(argv, to) == argv.size() - 2);
  // No external diff or textconv: their commands come from the worker's tree.
  CHECK(index_of(argv, "--no-ext-diff") < index_of(argv, "--end-of-options"));
  CHECK(index_of(argv, "--no-textconv") < index_of(argv, "--end-of-options"));
}

TEST_CASE("diff arguments: the user's options replace --stat --patch, the hardening follows them, paths follow --") {
  const auto argv = diff_args("aaaa", "bbbb", false, {"--stat", "--textconv"}, {"src/", "--output=x"});
  CHECK(index_of(argv, "--patch") == argv.size());
  CHECK(index_of(argv, "--stat") < index_of(argv, "--no-textconv"));
  // git takes the last of --textconv and --no-textconv.
  CHECK(index_of(argv, "--textconv") < index_of(argv, "--no-textconv"));
  CHECK(index_of(argv, "--no-ext-diff") < index_of(argv, "--end-of-options"));
  check_after_end_of_options(argv, {"aaaa", "bbbb"});
  const std::size_t separator = index_of(argv, "--");
  CHECK(index_of(argv, "src/") == separator + 1);
  CHECK(index_of(argv, "--output=x") == separator + 2);
}

TEST_CASE("read-tree puts --end-of-options before its tree") {
  const auto argv = read_tree_args("--index-output=/tmp/x");
  CHECK(index_of(argv, "read-tree") < index_of(argv, "--end-of-options"));
  check_after_end_of_options(argv, {"--index-output=/tmp/x"});
  CHECK(argv.back() == "--index-output=/tmp/x");
}

TEST_CASE("creating a branch names the zero id as its old value, after --end-of-options") {
  const auto argv = create_ref_args("refs/heads/-d", "--stdin", "git-mullet merge x");
  CHECK(index_of(argv, "update-ref") < index_of(argv, "--end-of-options"));
  check_after_end_of_options(argv, {"refs/heads/-d", "--stdin"});
  CHECK(argv.back() == std::string(40, '0'));
  // The message is the value of -m, never a word of its own.
  CHECK(argv[index_of(argv, "-m") + 1] == "git-mullet merge x");
}

TEST_CASE("variables that move objects, refs, the index or history are refused, even empty") {
  using mullet::git::check_git_environment;
  using mullet::git::refused_git_environment;
  CHECK(refused_git_environment().size() == 9);
  for (const auto& name : refused_git_environment()) {
    INFO("variable: " << name);
    for (const char* value : {"/tmp/elsewhere", ""}) {
      ::setenv(name.c_str(), value, 1);
      try {
        check_git_environment();
        FAIL("not refused");
      } catch (const mullet::Error& error) {
        CHECK(error.code() == mullet::ExitCode::usage);
        CHECK(std::string(error.what()).rfind(name + " is set", 0) == 0);
        CHECK(error.hint() == "unset " + name + " (see ENVIRONMENT in git-mullet(1))");
      }
      ::unsetenv(name.c_str());
    }
  }
  // The variables that choose the repository are not refused.
  for (const char* name : {"GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"}) {
    ::setenv(name, "/tmp", 1);
    CHECK_NOTHROW(check_git_environment());
    ::unsetenv(name);
  }
}
