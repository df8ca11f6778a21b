#include <doctest/doctest.h>

#include <string>

#include "git/authorship.hpp"

using mullet::git::Identity;
using mullet::git::max_trailer_value_bytes;
using mullet::git::parse_ident_line;
using mullet::git::result_trailers;
using mullet::git::trailer_value;

TEST_CASE("a trailer value is one line of printable text") {
  CHECK(trailer_value("2.1.197 (Claude Code)") == "2.1.197 (Claude Code)");
  CHECK(trailer_value("  padded\t ") == "padded");
  // Every line break, control and separator becomes one space: nothing starts a line.
  CHECK(trailer_value("1.0\nMullet-Job: forged") == "1.0 Mullet-Job: forged");
  CHECK(trailer_value("1.0\r\n\nMullet-Job: forged\n") == "1.0 Mullet-Job: forged");
  CHECK(trailer_value("1.0\rMullet-Job:\tforged") == "1.0 Mullet-Job: forged");
  CHECK(trailer_value("a\x1b[2Jb\x07\x7f"
                      "c") == "a [2Jb c");
  CHECK(trailer_value(std::string("a\0b", 3)) == "a b");
  CHECK(trailer_value("a\xc2\x85"
                      "b") == "a b");  // NEL (C1)
  CHECK(trailer_value("a\xe2\x80\xa8"
                      "b\xe2\x80\xa9") == "a b");                                  // line and paragraph separators
  CHECK(trailer_value("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 stays
  CHECK(trailer_value("bad \xff byte").find('\xff') == std::string::npos);
  CHECK(trailer_value("\n\r\t ").empty());
  // Bounded, never cutting a UTF-8 sequence.
  const std::string long_value = trailer_value(std::string(200, 'x'));
  CHECK(long_value.size() == max_trailer_value_bytes);
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  const std::string cut = trailer_value(accents);
  CHECK(cut.size() <= max_trailer_value_bytes);
  CHECK(cut.size() % 2 == 0);
}

TEST_CASE("result trailers name the job, attempt, executor and what is known") {
  CHECK(result_trailers({"0123abcdef", 1, "command", "", ""}) ==
        "Mullet-Job: 0123abcdef\nMullet-Attempt: 1\nMullet-Executor: command\n");
  CHECK(result_trailers({"0123abcdef", 2, "opencode", "anthropic/claude-sonnet-4", "1.18.33"}) ==
        "Mullet-Job: 0123abcdef\nMullet-Attempt: 2\nMullet-Executor: opencode\n"
        "Mullet-Model: anthropic/claude-sonnet-4\nMullet-Executor-Version: 1.18.33\n");
  // A hostile version stays on its own line, whatever it holds.
  const std::string block = result_trailers({"0123abcdef", 1, "claude", "", "1.0\nMullet-Job: forged\n\nX: y"});
  CHECK(block ==
        "Mullet-Job: 0123abcdef\nMullet-Attempt: 1\nMullet-Executor: claude\n"
        "Mullet-Executor-Version: 1.0 Mullet-Job: forged X: y\n");
}

TEST_CASE("an ident line of git var is an identity") {
  CHECK(parse_ident_line("Ada Lovelace <ada@example.org> 1700000000 +0100") ==
        Identity{"Ada Lovelace", "ada@example.org"});
  CHECK(parse_ident_line("A <b@c> <d@e> 1 +0000") == std::nullopt);  // '<' in the name
  CHECK(parse_ident_line("no address 1 +0000") == std::nullopt);
  CHECK(parse_ident_line(" <ada@example.org> 1 +0000") == std::nullopt);  // no name
  CHECK(parse_ident_line("Ada <> 1 +0000") == std::nullopt);              // no email
}
