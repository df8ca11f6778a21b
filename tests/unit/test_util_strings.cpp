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

using mullet::util::terminal_safe;
using mullet::util::TerminalSafeStream;

TEST_CASE("terminal_safe escapes every C0 control but newline and tab, and DEL") {
  for (int c = 0; c < 0x20; ++c) {
    const std::string text(1, static_cast<char>(c));
    if (c == '\n' || c == '\t') {
      CHECK(terminal_safe(text) == text);
    } else {
      const std::string escaped = terminal_safe(text);
      CHECK(escaped.size() == 4);
      CHECK(escaped.rfind("\\x", 0) == 0);
    }
  }
  CHECK(terminal_safe("\x7f") == "\\x7f");
  CHECK(terminal_safe("a\tb\nc") == "a\tb\nc");
}

TEST_CASE("terminal_safe neutralises the escape sequences a worker would use on the terminal") {
  CHECK(terminal_safe("\x1b]52;c;cm0gLXJm\x07") == "\\x1b]52;c;cm0gLXJm\\x07");  // OSC 52 clipboard
  CHECK(terminal_safe("\x1b]0;pwned\x1b\\") == "\\x1b]0;pwned\\x1b\\");          // OSC 0 title
  CHECK(terminal_safe("\x1b[2J\x1b[H") == "\\x1b[2J\\x1b[H");                    // clear screen
  CHECK(terminal_safe("\x1b]8;;http://x\x1b\\y\x1b]8;;\x1b\\").find('\x1b') == std::string::npos);
  CHECK(terminal_safe("\x1b[31mred") == "\\x1b[31mred");  // colours too: only diff keeps them
  CHECK(terminal_safe("\a") == "\\x07");
}

TEST_CASE("terminal_safe keeps CR only right before LF") {
  CHECK(terminal_safe("line\r\n") == "line\r\n");
  CHECK(terminal_safe("safe\rrm -rf /") == "safe\\x0drm -rf /");
  CHECK(terminal_safe("end\r") == "end\\x0d");
}

TEST_CASE("terminal_safe escapes C1 controls, raw and UTF-8 encoded") {
  CHECK(terminal_safe("\x9b"
                      "2J") == "\\x9b2J");
  CHECK(terminal_safe("\xc2\x9b"
                      "2J") == "\\u009b2J");
  CHECK(terminal_safe("\xc2\x80") == "\\u0080");
  CHECK(terminal_safe("\xc2\x9f") == "\\u009f");
  CHECK(terminal_safe("\xc2\xa0") == "\xc2\xa0");  // U+00A0 is printable
}

TEST_CASE("terminal_safe escapes bidi embeddings, overrides and isolates") {
  CHECK(terminal_safe("a\xe2\x80\xae"
                      "b") == "a\\u202eb");
  CHECK(terminal_safe("\xe2\x80\xaa") == "\\u202a");
  CHECK(terminal_safe("\xe2\x81\xa6\xe2\x81\xa9") == "\\u2066\\u2069");
  CHECK(terminal_safe("\xe2\x80\x94") == "\xe2\x80\x94");  // an em dash stays
}

TEST_CASE("terminal_safe keeps valid UTF-8 and escapes invalid bytes") {
  const std::string text = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x9f";
  CHECK(terminal_safe(text) == text);
  CHECK(terminal_safe("\xff") == "\\xff");
  CHECK(terminal_safe("\xc0\xaf") == "\\xc0\\xaf");           // overlong '/'
  CHECK(terminal_safe("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(terminal_safe("\xe6\x97") == "\\xe6\\x97");           // cut short at the end
  CHECK(terminal_safe("\xe6x") == "\\xe6x");
}

TEST_CASE("TerminalSafeStream gives the same text whatever the chunk boundaries") {
  const std::string text =
      "ok \xf0\x9f\x90\x9f \xe6\x97\xa5\r\nnext\rover \x1b]0;t\x07 \xc2\x9b \xe2\x80\xae \x1b[1;31mc\x1b[m \xff end\r";
  for (const bool colours : {false, true}) {
    TerminalSafeStream whole(colours);
    std::string expected = whole.feed(text);
    expected += whole.finish();
    for (std::size_t size = 1; size <= 7; ++size) {
      TerminalSafeStream stream(colours);
      std::string got;
      for (std::size_t at = 0; at < text.size(); at += size) got += stream.feed(text.substr(at, size));
      got += stream.finish();
      CHECK(got == expected);
    }
  }
  TerminalSafeStream plain;
  std::string got = plain.feed(text);
  got += plain.finish();
  CHECK(got == terminal_safe(text));
}

TEST_CASE("TerminalSafeStream with colours keeps only SGR sequences that cannot hide text") {
  TerminalSafeStream colours(true);
  CHECK(colours.feed("\x1b[8mhidden\x1b[31;41mred on red\x1b[30mblack\x1b[38;5;0mx\x1b[47mw") ==
        "\\x1b[8mhidden\\x1b[31;41mred on red\\x1b[30mblack\\x1b[38;5;0mx\\x1b[47mw");
  CHECK(colours.feed("\x1b[1m\x1b[36m@@\x1b[m\x1b[0;1;32m+\x1b[39;22m") ==
        "\x1b[1m\x1b[36m@@\x1b[m\x1b[0;1;32m+\x1b[39;22m");
}

TEST_CASE("TerminalSafeStream with colours keeps SGR sequences and nothing else") {
  TerminalSafeStream stream(true);
  std::string got = stream.feed("\x1b[1;32m+ok\x1b[m \x1b[2J \x1b]52;c;eA==\x07 \x1b[31;1");
  got += stream.feed("m\x1b");
  got += stream.finish();
  CHECK(got == "\x1b[1;32m+ok\x1b[m \\x1b[2J \\x1b]52;c;eA==\\x07 \x1b[31;1m\\x1b");
}

TEST_CASE("indent_later_lines indents every line but the first, and nothing after a last newline") {
  CHECK(mullet::util::indent_later_lines("one", "  ") == "one");
  CHECK(mullet::util::indent_later_lines("one\ntwo\nthree", "  ") == "one\n  two\n  three");
  CHECK(mullet::util::indent_later_lines("one\n", "  ") == "one\n");
  CHECK(mullet::util::indent_later_lines("\n\n", "> ") == "\n> \n");
  CHECK(mullet::util::indent_later_lines("", "  ").empty());
}
