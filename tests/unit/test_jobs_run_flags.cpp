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
    restore_run_flags(record_with_flags({{"claude.model", "opus"}}), config, std::nullopt);
    CHECK(config.settings().claude.model == "opus");
  }
  SUBCASE("a key a repository may only lower is lowered by any record, raised only by one started here") {
    Config config;
    REQUIRE(config.merge_toml("[run]\nattempts = 5\n", "user.toml", Source::user_file).empty());
    restore_run_flags(record_with_flags({{"run.attempts", 3}}), config, std::nullopt);
    CHECK(config.settings().run.attempts == 3);
  }
}

TEST_CASE("a record from elsewhere raises no key a repository may only lower") {
  // A forged record asking for 100 attempts would be up to 100 worker runs
  // on the user's credential: it is held to what a repository may do.
  Config config;
  const JobRecord record = record_with_flags({{"run.attempts", 100}});
  std::string refusal;
  try {
    restore_run_flags(record, config, std::nullopt);
  } catch (const Error& error) {
    refusal = error.what();
  }
  CHECK(refusal.find("asks resume to raise run.attempts to 100") != std::string::npos);
  CHECK(config.entry("run.attempts").source == Source::built_in);
  // Started here with it: replayed.
  restore_run_flags(record, config, json{{"config", {{"run.attempts", 100}}}});
  CHECK(config.settings().run.attempts == 100);
}

TEST_CASE("each node's flags are replayed onto the job's configuration, under the same rules") {
  using mullet::jobs::restore_node_flags;
  JobRecord record = record_with_flags(json::object());
  record.nodes.resize(2);
  record.run_flags["nodes"] = json::array({{{"run.executor", "command"}}, {{"run.executor", "opencode"}}});
  Config config;
  SUBCASE("started here with them: each node gets its own executor") {
    const json local = record.run_flags;
    const auto nodes = restore_node_flags(record, config, local);
    REQUIRE(nodes.size() == 2);
    CHECK(nodes[0].settings().run.executor == "command");
    CHECK(nodes[1].settings().run.executor == "opencode");
    CHECK(config.settings().run.executor == "claude");
  }
  SUBCASE("a record this machine did not start with them chooses no node's executor") {
    CHECK_THROWS_AS(restore_node_flags(record, config, std::nullopt), Error);
    json local = record.run_flags;
    local["nodes"][1]["run.executor"] = "command";
    CHECK_THROWS_AS(restore_node_flags(record, config, local), Error);
  }
  SUBCASE("a job started with --nodes N: every node has the job's configuration") {
    record.run_flags.erase("nodes");
    const auto nodes = restore_node_flags(record, config, std::nullopt);
    REQUIRE(nodes.size() == 2);
    CHECK(nodes[1].settings().run.executor == config.settings().run.executor);
  }
}
