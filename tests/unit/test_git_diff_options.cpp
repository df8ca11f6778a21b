#include <doctest/doctest.h>

#include "git/diff_options.hpp"

using mullet::git::parse_diff_request;
using Words = std::vector<std::string>;

namespace {

std::string refusal(const Words& words) {
  const auto request = parse_diff_request(words);
  REQUIRE_FALSE(request.has_value());
  return request.error().what();
}

}  // namespace

TEST_CASE("diff options: allowed options pass, paths come after -- or are not options") {
  const auto request =
      parse_diff_request({"--stat", "--name-only", "-U5", "--stat=80", "-w", "-M50%", "--", "src/", "--output=x"});
  REQUIRE(request.has_value());
  CHECK(request->options == Words{"--stat", "--name-only", "-U5", "--stat=80", "-w", "-M50%"});
  CHECK(request->paths == Words{"src/", "--output=x"});
  const auto bare = parse_diff_request({"--color-words", "README", "-"});
  REQUIRE(bare.has_value());
  CHECK(bare->options == Words{"--color-words"});
  CHECK(bare->paths == Words{"README", "-"});
  CHECK(parse_diff_request({})->options.empty());
}

TEST_CASE("diff options: what writes files, runs programs or leaves the job is refused, abbreviated or not") {
  CHECK(refusal({"--output=/tmp/x"}).find("standard output") != std::string::npos);
  CHECK(refusal({"--out=/tmp/x"}).find("standard output") != std::string::npos);
  CHECK(refusal({"--o=/tmp/x"}).find("--o=/tmp/x") != std::string::npos);
  CHECK(refusal({"--ext-diff"}).find("run a program") != std::string::npos);
  CHECK(refusal({"--ext"}).find("run a program") != std::string::npos);
  CHECK(refusal({"--textconv"}).find("run a program") != std::string::npos);
  CHECK(refusal({"--textc"}).find("run a program") != std::string::npos);
  // An exact name on the list is what git takes it for, though it starts --textconv.
  CHECK(parse_diff_request({"--text"}).has_value());
  CHECK(refusal({"--no-index"}).find("outside the job") != std::string::npos);
  // Anything not on the list, and what git reads as a file.
  CHECK(!refusal({"--bogus"}).empty());
  CHECK(!refusal({"-O/etc/orderfile"}).empty());
  CHECK(!refusal({"-c"}).empty());
  CHECK(!refusal({"--exit-code"}).empty());
  // Values go in the same word; short flags one by one.
  CHECK(refusal({"--unified"}).find("same word") != std::string::npos);
  CHECK(refusal({"-U"}).find("same word") != std::string::npos);
  CHECK(refusal({"--name-only=yes"}).find("takes no value") != std::string::npos);
  CHECK(refusal({"-pw"}).find("one word each") != std::string::npos);
  // The option is refused wherever it stands before --.
  CHECK(!refusal({"--stat", "src/", "--ext-diff"}).empty());
}
