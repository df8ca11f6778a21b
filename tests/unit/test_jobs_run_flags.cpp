#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "jobs/record.hpp"
#include "jobs/run_flags.hpp"

using mullet::Error;
using mullet::ExitCode;
using mullet::config::Config;
using mullet::config::Source;
using mullet::jobs::JobRecord;
using mullet::jobs::restore_run_flags;
using nlohmann::json;

namespace {

JobRecord record_with_flags(const json& config_flags) {
  JobRecord record;
  record.id = "0123abcdef";
  record.run_flags = {{"config", config_flags}, {"gates", json::array()}};
  return record;
}

// A value of the key's type that differs from what `config` holds.
json other_value(const Config& config, const std::string& key) {
  const auto& value = config.entry(key).value;
  if (const auto* word = std::get_if<std::string>(&value)) return *word + "-from-the-record";
  if (const auto* number = std::get_if<std::int64_t>(&value)) return *number + 1;
  return json::array({"from-the-record"});
}

}  // namespace

TEST_CASE("resume replays no user-only key from a record this machine did not start with it") {
  // The record travels with fetches: whoever wrote it (another machine, a
  // pushed ref) must not choose what only the user's own configuration
  // chooses. Every key the schema marks user-only, not a hand-kept list.
  const auto keys = mullet::config::user_only_keys();
  REQUIRE(keys.size() > 5);
  for (const auto& key : keys) {
    INFO("key: " << key);
    Config config;
    const json value = other_value(config, key);
    const JobRecord record = record_with_flags({{key, value}});
    bool refused = false;
    try {
      restore_run_flags(record, config, std::nullopt);
    } catch (const Error& error) {
      refused = true;
      CHECK(error.code() == ExitCode::usage);
      CHECK(std::string(error.what()).find("which only your own configuration may set") != std::string::npos);
    }
    // The run flags hold strings and integers only; those are refused, and
    // nothing at all is applied.
    if (value.is_string() || value.is_number_integer()) CHECK(refused);
    CHECK(config.entry(key).source == Source::built_in);

    // A local copy that says otherwise does not help either.
    Config again;
    const json local = {{"config", {{key, "something else"}}}};
    bool refused_again = false;
    try {
      restore_run_flags(record, again, local);
    } catch (const Error&) {
      refused_again = true;
    }
    if (value.is_string() || value.is_number_integer()) CHECK(refused_again);
    CHECK(again.entry(key).source == Source::built_in);
  }
}

TEST_CASE("resume replays a user-only flag this machine started the job with, or one your config already says") {
  const JobRecord record = record_with_flags({{"claude.model", "opus"}, {"run.attempts", 3}});
  SUBCASE("started here with it") {
    Config config;
    const json local = {{"config", {{"claude.model", "opus"}, {"run.attempts", 3}}}};
    restore_run_flags(record, config, local);
    CHECK(config.settings().claude.model == "opus");
    CHECK(config.entry("claude.model").source == Source::flag);
    CHECK(config.settings().run.attempts == 3);
  }
  SUBCASE("your config says the same") {
    Config config;
    REQUIRE(config.merge_toml("[claude]\nmodel = \"opus\"\n", "user.toml", Source::user_file).empty());
    restore_run_flags(record, config, std::nullopt);
    CHECK(config.settings().claude.model == "opus");
  }
  SUBCASE("a key a repository may set is replayed from any record") {
    Config config;
    const JobRecord attempts_only = record_with_flags({{"run.attempts", 3}});
    restore_run_flags(attempts_only, config, std::nullopt);
    CHECK(config.settings().run.attempts == 3);
  }
}
