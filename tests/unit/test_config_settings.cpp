#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/settings.hpp"

using mullet::config::Config;
using mullet::config::Gate;
using mullet::config::Mebibytes;
using mullet::config::Problem;
using mullet::config::Settings;
using mullet::config::Source;
using mullet::config::Value;
using Strings = std::vector<std::string>;
using std::chrono::seconds;

namespace {

std::string messages(const std::vector<Problem>& problems) {
  std::string all;
  for (const auto& problem : problems) all += problem.message + "\n";
  return all;
}

// Settings as the schema's defaults make them, written out field by field.
Settings built_in() {
  Settings settings;
  settings.run = {"claude", "", "", {"node_modules", "vendor", ".venv", "target", "build"}, 1, 0, 0, {}};
  settings.sandbox = {{}, 1879048192, 1024, mullet::config::History::base, mullet::config::WorkTree::automatic, "auto"};
  settings.network = {{}, {}};
  settings.claude = {"claude", "https://api.anthropic.com", {}, "", ""};
  settings.opencode = {"opencode", "anthropic/claude-sonnet-4-5", {}, ""};
  settings.limits = {seconds(3600),   seconds(14400), seconds(1800),    seconds(1800),  200,           20.0,
                     Mebibytes(8192), 1024,           Mebibytes(10240), Mebibytes(100), Mebibytes(256)};
  return settings;
}

// A valid value for `key` that is no key's default. Keys of one kind get the
// same value, so two keys writing one field would give equal Settings.
Value other_value(const std::string& key, const Value& current) {
  if (std::holds_alternative<std::int64_t>(current)) return std::int64_t{2};
  if (std::holds_alternative<double>(current)) return 2.5;
  if (std::holds_alternative<std::string>(current))
    return std::string(key == "run.executor"        ? "command"
                       : key == "sandbox.history"   ? "none"
                       : key == "sandbox.work_tree" ? "checkout"
                       : key == "sandbox.cgroup"    ? "off"
                       : key == "sandbox.disk_cap"  ? "off"
                       : key == "dispatch.engine"   ? "slurm"
                                                    : "x");
  if (key == "sandbox.env") return Strings{"NAME_"};
  if (key.rfind("network.", 0) == 0) return Strings{"host:1"};
  return Strings{"x"};
}

}  // namespace

TEST_CASE("Settings from a new Config are the schema's defaults") {
  const Settings settings = Config().settings();
  CHECK(settings == built_in());
  CHECK(settings.limits.timeout == std::chrono::hours(1));
  CHECK(settings.limits.memory_mb.bytes() == 8192ULL << 20U);
  CHECK(settings.gates.empty());
}

TEST_CASE("every key of the schema lands in a field of its own") {
  const Config defaults;
  const Settings default_settings = defaults.settings();
  std::map<std::string, Settings> changed;
  for (const auto& [key, entry] : defaults.entries()) {
    INFO("key: " << key);
    Config config;
    config.set_from_flag(key, other_value(key, entry.value), "--test");
    changed[key] = config.settings();
    CHECK(changed[key] != default_settings);
  }
  CHECK(changed.size() == 42);
  for (auto first = changed.begin(); first != changed.end(); ++first) {
    for (auto second = std::next(first); second != changed.end(); ++second) {
      INFO(first->first << " and " << second->first);
      CHECK(first->second != second->second);
    }
  }
}

TEST_CASE("Settings follow the user's file, typed") {
  Config config;
  const auto problems = config.merge_toml(
      "[run]\nexecutor = \"command\"\ncommand = \"make fix\"\nsetup = \"npm ci\"\nattempts = 3\nmax_parallel = "
      "2\nmax_attempts = 4\n"
      "dependency_dirs = [\"node_modules\"]\n"
      "[sandbox]\nenv = [\"GOFLAGS\"]\nuid = 100000\nuid_count = 8\nhistory = \"all\"\n"
      "[network]\nsetup = [\"registry.npmjs.org:443\"]\nworker = [\"*\"]\n"
      "[claude]\nbinary = \"/opt/claude\"\nbase_url = \"http://127.0.0.1:8080\"\nallow_bash = [\"make *\"]\nmodel = "
      "\"opus\"\n"
      "[opencode]\nbinary = \"/opt/opencode\"\nmodel = \"local/qwen\"\nallow_bash = [\"make test\"]\ncredential = "
      "\"local\"\n"
      "[limits]\ntimeout = 600\njob_timeout = 1200\ngate_timeout = 60\ninactivity = 30\nturns = 7\ncost_usd = 1.5\n"
      "memory_mb = 512\nprocesses = 64\ndisk_mb = 100\nfile_mb = 2\negress_mb = 9\n"
      "[[gate]]\nname = \"tests\"\ncommand = \"make test\"\ntimeout = 90\n",
      "user.toml", Source::user_file);
  INFO(messages(problems));
  REQUIRE(problems.empty());
  Settings expected;
  expected.run = {"command", "make fix", "npm ci", {"node_modules"}, 3, 2, 4, {}};
  expected.sandbox = {{"GOFLAGS"}, 100000, 8, mullet::config::History::all};
  expected.network = {{"registry.npmjs.org:443"}, {"*"}};
  expected.claude = {"/opt/claude", "http://127.0.0.1:8080", {"make *"}, "", "opus"};
  expected.opencode = {"/opt/opencode", "local/qwen", {"make test"}, "local"};
  expected.limits = {seconds(600), seconds(1200),  seconds(60),  seconds(30), 7, 1.5, Mebibytes(512),
                     64,           Mebibytes(100), Mebibytes(2), Mebibytes(9)};
  expected.gates = {Gate{"tests", "make test", 90, "user.toml:39"}};
  const Settings settings = config.settings();
  CHECK(settings.run == expected.run);
  CHECK(settings.sandbox == expected.sandbox);
  CHECK(settings.network == expected.network);
  CHECK(settings.claude == expected.claude);
  CHECK(settings.opencode == expected.opencode);
  CHECK(settings.limits == expected.limits);
  REQUIRE(settings.gates.size() == 1);
  CHECK(settings == expected);
  CHECK(settings.limits.disk_mb.bytes() == 100ULL << 20U);
}

TEST_CASE("Settings follow the repository's narrowing, and never its widening") {
  Config config;
  REQUIRE(config
              .merge_toml("[network]\nworker = [\"a.example:443\", \"b.example:443\"]\n"
                          "[limits]\ntimeout = 600\nmemory_mb = 2048\n",
                          "user.toml", Source::user_file)
              .empty());
  const auto problems = config.merge_toml(
      "[network]\nworker = [\"b.example:443\"]\nsetup = [\"c.example:443\"]\n"
      "[limits]\ntimeout = 300\nmemory_mb = 4096\n"
      "[run]\nattempts = 2\nsetup = \"make deps\"\nexecutor = \"command\"\n",
      ".mullet.toml", Source::repo_file);
  INFO(messages(problems));
  // Refused: a setup grant the user never gave, more memory, more attempts,
  // the executor (user only). Taken: the narrower list, the lower timeout, setup.
  CHECK(problems.size() == 4);
  const Settings settings = config.settings();
  CHECK(settings.network.worker == Strings{"b.example:443"});
  CHECK(settings.network.setup.empty());
  CHECK(settings.limits.timeout == seconds(300));
  CHECK(settings.limits.memory_mb == Mebibytes(2048));
  CHECK(settings.run.setup == "make deps");
  CHECK(settings.run.attempts == 1);
  CHECK(settings.run.executor == "claude");
}

TEST_CASE("Settings follow flags, last") {
  Config config;
  REQUIRE(config.merge_toml("[run]\nattempts = 5\n", "user.toml", Source::user_file).empty());
  config.set_from_flag("run.attempts", std::int64_t{2}, "--attempts");
  config.set_from_flag("run.command", std::string("true"), "--command");
  const Settings settings = config.settings();
  CHECK(settings.run.attempts == 2);
  CHECK(settings.run.command == "true");
}

TEST_CASE("[sandbox] work_tree: auto, overlay, fuse-overlayfs, checkout; nothing else") {
  using mullet::config::WorkTree;
  for (const auto& [word, expected] : std::vector<std::pair<std::string, WorkTree>>{{"auto", WorkTree::automatic},
                                                                                    {"overlay", WorkTree::overlay},
                                                                                    {"fuse-overlayfs", WorkTree::fuse},
                                                                                    {"checkout", WorkTree::checkout}}) {
    Config config;
    const auto problems =
        config.merge_toml("[sandbox]\nwork_tree = \"" + word + "\"\n", "user.toml", Source::user_file);
    INFO(word << ": " << messages(problems));
    REQUIRE(problems.empty());
    CHECK(config.settings().sandbox.work_tree == expected);
  }
  Config config;
  const auto problems = config.merge_toml("[sandbox]\nwork_tree = \"fuse\"\n", "user.toml", Source::user_file);
  REQUIRE_FALSE(problems.empty());
  CHECK(messages(problems).find("must be auto, overlay, fuse-overlayfs or checkout") != std::string::npos);
}
