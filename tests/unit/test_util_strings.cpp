#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "util/strings.hpp"

using mullet::util::first_line;
using mullet::util::is_env_name;
using mullet::util::join;
using mullet::util::shell_join;
using mullet::util::shell_quote;
using mullet::util::split;
using mullet::util::tail;
using mullet::util::trim;

TEST_CASE("trim removes spaces, tabs and line ends at both ends only") {
  CHECK(trim("  hello  ") == "hello");
  CHECK(trim("\t\r\n a b \n\t") == "a b");
  CHECK(trim("inner  space") == "inner  space");
  CHECK(trim("") == "");
  CHECK(trim(" \t\r\n ") == "");
  CHECK(trim("x") == "x");
}

TEST_CASE("split keeps empty fields, including leading and trailing ones") {
  CHECK(split("a,b,c", ',') == std::vector<std::string>{"a", "b", "c"});
  CHECK(split("a,,b", ',') == std::vector<std::string>{"a", "", "b"});
  CHECK(split(",a,", ',') == std::vector<std::string>{"", "a", ""});
  CHECK(split("", ',') == std::vector<std::string>{""});
  CHECK(split("no separator", ',') == std::vector<std::string>{"no separator"});
  CHECK(split("/usr/bin", '/') == std::vector<std::string>{"", "usr", "bin"});
}

TEST_CASE("join puts the separator only between parts") {
  CHECK(join({}, ", ") == "");
  CHECK(join({"one"}, ", ") == "one");
  CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
  CHECK(join({"", ""}, "-") == "-");
  CHECK(join(split("x:y:z", ':'), ":") == "x:y:z");
}

TEST_CASE("shell_quote leaves safe words alone and quotes everything else") {
  CHECK(shell_quote("plain") == "plain");
  CHECK(shell_quote("/usr/bin/env") == "/usr/bin/env");
  CHECK(shell_quote("a=b,c:d@e%f+g.h-i_j") == "a=b,c:d@e%f+g.h-i_j");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("two words") == "'two words'");
  CHECK(shell_quote("$HOME") == "'$HOME'");
  CHECK(shell_quote("a;b") == "'a;b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("*") == "'*'");
  CHECK(shell_quote("line\nbreak") == "'line\nbreak'");
}

TEST_CASE("shell_join quotes each word and joins with one space") {
  CHECK(shell_join({}) == "");
  CHECK(shell_join({"sh", "-c", "echo hi"}) == "sh -c 'echo hi'");
  CHECK(shell_join({"", "x"}) == "'' x");
}

TEST_CASE("first_line takes the first non-blank line, trimmed") {
  CHECK(first_line("  title  \nbody\nmore", 100) == "title");
  CHECK(first_line("\n\n  later title\nbody", 100) == "later title");
  CHECK(first_line("", 10) == "");
  CHECK(first_line("short", 5) == "short");
}

TEST_CASE("first_line cuts a long line to max_chars with an ellipsis") {
  const std::string cut = first_line("abcdefghijklmnopqrstuvwxyz", 10);
  CHECK(cut == "abcdefg...");
  CHECK(cut.size() == 10);
  CHECK(first_line("abcdefghijk", 10) == "abcdefg...");
  CHECK(first_line("abcdefghij", 10) == "abcdefghij");
}

TEST_CASE("first_line never cuts a UTF-8 sequence in half") {
  // "é" is two bytes (C3 A9); "€" is three (E2 82 AC).
  const std::string accented = "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9";  // 6 x é, 12 bytes
  // Room for 5 bytes before the ellipsis: the cut falls inside the third é and
  // must back off to the end of the second.
  const std::string cut = first_line(accented, 8);
  CHECK(cut == "\xC3\xA9\xC3\xA9...");
  CHECK(cut.size() <= 8);

  const std::string euros = "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC";  // 3 x €, 9 bytes
  // Room for 4 bytes: one whole € and then the middle of the second.
  CHECK(first_line(euros, 7) == "\xE2\x82\xAC...");
  // Room for 5 bytes: still only one whole €.
  CHECK(first_line(euros, 8) == "\xE2\x82\xAC...");
  // Room for 3 bytes: exactly one €, nothing to back off.
  CHECK(first_line(euros, 6) == "\xE2\x82\xAC...");
  // Room for 2 bytes: not even one € fits.
  CHECK(first_line(euros, 5) == "...");

  // Every cut result is valid UTF-8: no trailing lead byte without its tail.
  for (std::size_t max = 4; max < accented.size(); ++max) {
    const std::string result = first_line(accented, max);
    REQUIRE(result.size() >= 3);
    const std::string body = result.substr(0, result.size() - 3);
    CHECK(body.size() % 2 == 0);
    CHECK(result.size() <= max);
  }
}

TEST_CASE("tail keeps the last max_bytes and marks the cut") {
  CHECK(tail("short", 10) == "short");
  CHECK(tail("exact", 5) == "exact");
  const std::string cut = tail("0123456789", 4);
  CHECK(cut == "[... earlier output cut ...]\n6789");
  CHECK(tail("", 0) == "");
}

TEST_CASE("is_env_name accepts shell variable names only") {
  CHECK(is_env_name("PATH"));
  CHECK(is_env_name("_"));
  CHECK(is_env_name("_private"));
  CHECK(is_env_name("lower_case9"));
  CHECK(is_env_name("A1"));
  CHECK_FALSE(is_env_name(""));
  CHECK_FALSE(is_env_name("1A"));
  CHECK_FALSE(is_env_name("A-B"));
  CHECK_FALSE(is_env_name("A B"));
  CHECK_FALSE(is_env_name("A=B"));
  CHECK_FALSE(is_env_name("A.B"));
  CHECK_FALSE(is_env_name("\xC3\xA9"));
}
