#include <doctest/doctest.h>

#include "cli/usage.hpp"

using mullet::cli::edit_distance;
using mullet::cli::most_similar;

TEST_CASE("cli usage: edit distance counts inserts, deletes, substitutions and swapped neighbours") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("list", "list") == 0);
  CHECK(edit_distance("", "run") == 3);
  CHECK(edit_distance("lst", "list") == 1);
  CHECK(edit_distance("list", "lst") == 1);
  CHECK(edit_distance("lsit", "list") == 1);  // a swap is one edit
  CHECK(edit_distance("--comand", "--command") == 1);
  CHECK(edit_distance("show", "shoe") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("abc", "xyz") == 3);
}

TEST_CASE("cli usage: the most similar names are the closest, when they are close for the word's length") {
  const std::vector<std::string> commands = {"run",   "list",    "show",   "diff", "log",
                                             "merge", "discard", "resume", "wait"};
  CHECK(most_similar("lst", commands) == std::vector<std::string>{"list"});
  CHECK(most_similar("lsit", commands) == std::vector<std::string>{"list"});
  CHECK(most_similar("ru", commands) == std::vector<std::string>{"run"});
  CHECK(most_similar("frobnicate", commands).empty());
  CHECK(most_similar("x", commands).empty());
  // Two at the same distance are both offered.
  CHECK(most_similar("lag", {"log", "lap", "list"}) == std::vector<std::string>{"log", "lap"});
  const std::vector<std::string> options = {"--command", "--message", "-m", "--dry-run", "--json", "--detach"};
  CHECK(most_similar("--comand", options) == std::vector<std::string>{"--command"});
  CHECK(most_similar("--jsn", options) == std::vector<std::string>{"--json"});
  // Dashes do not count as the word: "--x" is not close to "-m".
  CHECK(most_similar("--x", options).empty());
  // A start of a name that is too far from it by edits.
  CHECK(most_similar("--dry", options) == std::vector<std::string>{"--dry-run"});
  CHECK(most_similar("--bogus", options).empty());
}
