// Our stderr log lines show what a worker, a repository or an upstream put
// in a message; they never let it drive the terminal.
#include <doctest/doctest.h>

#include <string>

#include <spdlog/details/log_msg.h>

#include "cli/logging.hpp"

namespace {

std::string formatted(std::string_view text, spdlog::level::level_enum level = spdlog::level::info) {
  const auto formatter = mullet::cli::make_log_formatter();
  const spdlog::details::log_msg message(spdlog::source_loc{}, "git-mullet", level, text);
  spdlog::memory_buf_t out;
  formatter->format(message, out);
  return {out.data(), out.size()};
}

}  // namespace

TEST_CASE("log lines: the prefix and level, then the message") {
  CHECK(formatted("the budget is spent", spdlog::level::warn) == "git mullet [warning] the budget is spent\n");
}

TEST_CASE("log lines: a message's escape sequences and control bytes are shown, never sent") {
  // A model name an upstream or a worker chose, as request_cap quotes it:
  // clear the screen, set the window title, move the cursor, ring the bell.
  const std::string hostile =
      "model \x1b[2J\x1b]0;pwned\x07\x1b[1;1H\r\x08\x9b"
      "31m done";
  const std::string line = formatted("POST /v1/messages refused: " + hostile);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find('\x07') == std::string::npos);
  CHECK(line.find('\r') == std::string::npos);
  CHECK(line.find('\x08') == std::string::npos);
  CHECK(line.find("\xc2\x9b") == std::string::npos);
  CHECK(line.find('\x9b') == std::string::npos);
  CHECK(line.starts_with("git mullet [info] POST /v1/messages refused: model "));
  CHECK(line.find("done") != std::string::npos);
}

TEST_CASE("log lines: a message's later lines are indented, so none passes for one of ours") {
  CHECK(formatted("first\ngit mullet [error] forged\r\nthird\n") ==
        "git mullet [info] first\n    git mullet [error] forged\r\n    third\n");
}
