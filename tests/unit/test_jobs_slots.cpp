#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "config/config.hpp"
#include "jobs/slots.hpp"
#include "util/error.hpp"

#include "support/support.hpp"

namespace fs = std::filesystem;
using mullet::Error;
using mullet::ExitCode;
using mullet::config::Config;
using mullet::config::Source;
using mullet::jobs::claim_sandbox_uid;
using mullet::jobs::sandbox_uid_range;
using mullet::test::ScratchDir;

namespace {

mullet::config::SandboxSettings with_range(const std::string& toml) {
  Config config;
  const auto problems = config.merge_toml(toml, "user.toml", Source::user_file);
  REQUIRE(problems.empty());
  return config.settings().sandbox;
}

void expect_bad_range(const std::string& toml, const std::string& part) {
  INFO("config: " << toml);
  try {
    sandbox_uid_range(with_range(toml));
    FAIL("accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ExitCode::usage);
    INFO("message: " << error.what());
    CHECK(std::string(error.what()).find(part) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("the sandbox uid range: a high default, checked bounds") {
  const auto range = sandbox_uid_range(Config{}.settings().sandbox);
  CHECK(range.first == 1879048192U);
  CHECK(range.count == 1024U);
  const auto last = sandbox_uid_range(with_range("[sandbox]\nuid = 4294967290\nuid_count = 5\n"));
  CHECK(last.first == 4294967290U);
  CHECK(last.count == 5U);
  // (uid_t)-1 is not a uid.
  expect_bad_range("[sandbox]\nuid = 4294967290\nuid_count = 6\n", "not a range");
  // Values no range could hold are refused by the schema already.
  for (const char* toml : {"[sandbox]\nuid = 4294967295\nuid_count = 1\n",
                           "[sandbox]\nuid = 9223372036854775807\nuid_count = 9223372036854775807\n"}) {
    Config config;
    CHECK_FALSE(config.merge_toml(toml, "user.toml", Source::user_file).empty());
  }
  // Never the uid that runs git-mullet (0 is refused by the schema already).
  const auto me = std::to_string(::getuid());
  if (::getuid() > 0) {
    expect_bad_range("[sandbox]\nuid = " + me + "\nuid_count = 1\n", "runs git-mullet");
    expect_bad_range("[sandbox]\nuid = 1\nuid_count = " + me + "\n", "runs git-mullet");
  }
}

TEST_CASE("claim_sandbox_uid: one job per uid while held, free again when released") {
  const ScratchDir scratch;
  const std::string directory = scratch / "uids";
  {
    auto first = claim_sandbox_uid({5000, 2}, directory);
    auto second = claim_sandbox_uid({5000, 2}, directory);
    CHECK(first.uid == 5000U);
    CHECK(second.uid == 5001U);
    CHECK(first.slot.held());
    try {
      claim_sandbox_uid({5000, 2}, directory);
      FAIL("a third job got a uid of a range of two");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("held by running jobs") != std::string::npos);
    }
    // Another range overlapping it: the held uids stay taken.
    CHECK(claim_sandbox_uid({5001, 3}, directory).uid == 5002U);
    first = {};
    CHECK(claim_sandbox_uid({5000, 2}, directory).uid == 5000U);
  }
  CHECK((fs::status(directory).permissions() & fs::perms::all) == fs::perms::owner_all);
}
