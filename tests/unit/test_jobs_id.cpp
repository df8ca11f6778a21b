#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "jobs/id.hpp"

using mullet::ExitCode;
using mullet::jobs::is_valid_job_id;
using mullet::jobs::job_id_length;
using mullet::jobs::match_job_id;
using mullet::jobs::new_job_id;

TEST_CASE("new_job_id is job_id_length lowercase hex digits") {
  CHECK(job_id_length == 10);
  for (int i = 0; i < 50; ++i) {
    const std::string id = new_job_id();
    CHECK(id.size() == job_id_length);
    CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(is_valid_job_id(id));
  }
}

TEST_CASE("new_job_id does not repeat") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(new_job_id());
  // 40 random bits: a collision among 1000 ids has a chance of about 1 in 2 million.
  CHECK(seen.size() == 1000);
}

TEST_CASE("is_valid_job_id accepts exactly ten lowercase hex digits") {
  CHECK(is_valid_job_id("0123456789"));
  CHECK(is_valid_job_id("abcdefabcd"));
  CHECK_FALSE(is_valid_job_id(""));
  CHECK_FALSE(is_valid_job_id("012345678"));    // 9
  CHECK_FALSE(is_valid_job_id("0123456789a"));  // 11
  CHECK_FALSE(is_valid_job_id("ABCDEFABCD"));   // upper case
  CHECK_FALSE(is_valid_job_id("abcdefabcg"));   // not hex
  CHECK_FALSE(is_valid_job_id("../../etc0"));
  CHECK_FALSE(is_valid_job_id("0123 56789"));
}

TEST_CASE("match_job_id finds one id by its full text or a unique prefix") {
  const std::vector<std::string> known = {"abc1234567", "abd7654321", "ff00000000"};

  SUBCASE("exact") {
    const auto found = match_job_id(known, "abd7654321");
    REQUIRE(found.has_value());
    CHECK(*found == "abd7654321");
  }
  SUBCASE("unique prefix") {
    const auto found = match_job_id(known, "abc");
    REQUIRE(found.has_value());
    CHECK(*found == "abc1234567");
    const auto single = match_job_id(known, "f");
    REQUIRE(single.has_value());
    CHECK(*single == "ff00000000");
  }
  SUBCASE("ambiguous prefix lists every match") {
    const auto found = match_job_id(known, "ab");
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().code() == ExitCode::usage);
    const std::string message = found.error().what();
    CHECK(message.find("ambiguous") != std::string::npos);
    CHECK(message.find("abc1234567") != std::string::npos);
    CHECK(message.find("abd7654321") != std::string::npos);
    CHECK(message.find("ff00000000") == std::string::npos);
  }
  SUBCASE("no match") {
    const auto found = match_job_id(known, "0");
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().code() == ExitCode::usage);
    CHECK(std::string(found.error().what()).find("'0'") != std::string::npos);
    CHECK_FALSE(found.error().hint().empty());
  }
  SUBCASE("a prefix longer than any id matches nothing") {
    const auto found = match_job_id(known, "abc12345678");
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().code() == ExitCode::usage);
  }
  SUBCASE("empty prefix is refused, not matched against everything") {
    const auto found = match_job_id(known, "");
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().code() == ExitCode::usage);
    CHECK(std::string(found.error().what()).find("ambiguous") == std::string::npos);
  }
  SUBCASE("no known ids") {
    const auto found = match_job_id({}, "abc");
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().code() == ExitCode::usage);
  }
}

TEST_CASE("match_job_id lists ambiguous matches sorted") {
  const auto found = match_job_id({"aa2", "aa1", "aa3"}, "aa");
  REQUIRE_FALSE(found.has_value());
  CHECK(std::string(found.error().what()).find("aa1, aa2, aa3") != std::string::npos);
}
