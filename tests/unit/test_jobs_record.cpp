#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobs/record.hpp"

using mullet::jobs::DamagedRecord;
using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::parse_state;
using mullet::jobs::PhaseRecord;
using mullet::jobs::record_from_json;
using mullet::jobs::state_name;
using mullet::jobs::summary_json;
using mullet::jobs::to_json;
using mullet::jobs::UploadRecord;
using mullet::jobs::WorkerReport;
using mullet::sandbox::StopReason;
using nlohmann::json;

namespace {

JobRecord full_record() {
  JobRecord record;
  record.format = 1;
  record.id = "0123abcdef";
  record.title = "Fix the parser";
  record.prompt = "Fix the parser.\nIt drops the last line.";
  record.state = JobState::succeeded;
  record.base = std::string(40, 'a');
  record.result = std::string(40, 'b');
  record.executor.name = "command";
  record.executor.command = "make fix";
  record.executor.version = "1.2.3";
  record.executor.model = "anthropic/claude-sonnet-4-5";
  record.created_at = "2026-01-02T03:04:05Z";
  record.finished_at = "2026-01-02T03:14:05Z";
  record.error = "";
  record.phases.push_back(PhaseRecord{"worker",
                                      {"sh", "-c", "make fix"},
                                      0,
                                      StopReason::exit,
                                      1234,
                                      "done\n",
                                      {"api.example:443"},
                                      nlohmann::json::array({{{"host", "api.example"}, {"allowed", true}}}),
                                      {{"upstream", "https://api.anthropic.com"},
                                       {"budget_usd", 2.5},
                                       {"totals", {{"cost_usd", 0.42}}},
                                       {"requests", nlohmann::json::array({{{"status", 200}}})}},
                                      UploadRecord{5U << 20U, 1000, {{"api.example:443", 4096}, {"[::1]:8080", 1}}}});
  record.phases.push_back(PhaseRecord{"gate:test",
                                      {"make", "test"},
                                      2,
                                      StopReason::timeout,
                                      60000,
                                      "FAIL x\n",
                                      {},
                                      nlohmann::json::array(),
                                      {},
                                      std::nullopt});
  record.cost_usd = 0.42;
  record.snapshot_warnings = {"skipped a socket: run/x.sock", "skipped a fifo"};
  record.runner.pid = 4242;
  record.runner.start_ticks = 9876543210123ULL;
  record.runner.boot_id = "6f1c0a58-0000-4000-8000-000000000000";
  record.runner.repository = "0a1b2c3d";
  return record;
}

// What Claude Code's result said about a real run (see test_executors_claude.cpp).
WorkerReport full_report() {
  WorkerReport report;
  report.status = "done";
  report.summary = "wrote hello.txt";
  report.turns = 5;
  report.cost_usd = 0.004;
  report.model = "claude-opus-4-8[1m]";
  report.session_id = "f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc";
  report.permission_denials = json::parse(
      R"([{"tool_name":"Bash","tool_use_id":"toolu_3_0","tool_input":{"command":"touch ok; touch evil","description":"t"}}])");
  return report;
}

void check_same_report(const WorkerReport& a, const WorkerReport& b) {
  CHECK(a.status == b.status);
  CHECK(a.summary == b.summary);
  CHECK(a.turns == b.turns);
  CHECK(a.cost_usd == b.cost_usd);
  CHECK(a.model == b.model);
  CHECK(a.session_id == b.session_id);
  CHECK(a.permission_denials == b.permission_denials);
}

void check_same(const JobRecord& a, const JobRecord& b) {
  CHECK(a.format == b.format);
  CHECK(a.id == b.id);
  CHECK(a.title == b.title);
  CHECK(a.prompt == b.prompt);
  CHECK(a.state == b.state);
  CHECK(a.base == b.base);
  CHECK(a.base_uncommitted == b.base_uncommitted);
  CHECK(a.base_head == b.base_head);
  CHECK(a.result == b.result);
  CHECK(a.executor.name == b.executor.name);
  CHECK(a.executor.command == b.executor.command);
  CHECK(a.executor.version == b.executor.version);
  CHECK(a.executor.model == b.executor.model);
  CHECK(a.sequence == b.sequence);
  CHECK(a.created_at == b.created_at);
  CHECK(a.finished_at == b.finished_at);
  CHECK(a.error == b.error);
  CHECK(a.changes == b.changes);
  CHECK(a.progress == b.progress);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t i = 0; i < a.phases.size(); ++i) {
    CHECK(a.phases[i].name == b.phases[i].name);
    CHECK(a.phases[i].command == b.phases[i].command);
    CHECK(a.phases[i].exit_code == b.phases[i].exit_code);
    CHECK(a.phases[i].ended_by == b.phases[i].ended_by);
    CHECK(a.phases[i].duration_ms == b.phases[i].duration_ms);
    CHECK(a.phases[i].output_tail == b.phases[i].output_tail);
    CHECK(a.phases[i].grants == b.phases[i].grants);
    CHECK(a.phases[i].network == b.phases[i].network);
    CHECK(a.phases[i].upload == b.phases[i].upload);
  }
  CHECK(a.snapshot_warnings == b.snapshot_warnings);
  CHECK(a.runner.pid == b.runner.pid);
  CHECK(a.runner.start_ticks == b.runner.start_ticks);
  CHECK(a.runner.boot_id == b.runner.boot_id);
  CHECK(a.runner.repository == b.runner.repository);
  check_same_report(a.report, b.report);
}

}  // namespace

TEST_CASE("state names round trip") {
  const std::vector<std::pair<JobState, std::string>> states = {
      {JobState::running, "running"},        {JobState::succeeded, "succeeded"}, {JobState::no_changes, "no_changes"},
      {JobState::failed, "failed"},          {JobState::refused, "refused"},     {JobState::cancelled, "cancelled"},
      {JobState::interrupted, "interrupted"}};
  for (const auto& [state, name] : states) {
    CHECK(state_name(state) == name);
    const auto parsed = parse_state(name);
    REQUIRE(parsed.has_value());
    CHECK(*parsed == state);
  }
  CHECK_FALSE(parse_state("").has_value());
  CHECK_FALSE(parse_state("Running").has_value());
  CHECK_FALSE(parse_state("done").has_value());
}

TEST_CASE("to_json writes every field under its documented name") {
  const json out = to_json(full_record());
  CHECK(out["format"] == 1);
  CHECK(out["id"] == "0123abcdef");
  CHECK(out["title"] == "Fix the parser");
  CHECK(out["state"] == "succeeded");
  CHECK(out["base"] == std::string(40, 'a'));
  CHECK(out["base_uncommitted"] == false);
  CHECK(out["base_head"].is_null());
  CHECK(out["result"] == std::string(40, 'b'));
  CHECK(out["executor"] == "command");
  CHECK(out["executor_command"] == "make fix");
  CHECK(out["executor_version"] == "1.2.3");
  CHECK(out["executor_model"] == "anthropic/claude-sonnet-4-5");
  CHECK(out["created_at"] == "2026-01-02T03:04:05Z");
  CHECK(out["finished_at"] == "2026-01-02T03:14:05Z");
  CHECK(out["error"].is_null());
  REQUIRE(out["phases"].is_array());
  REQUIRE(out["phases"].size() == 2);
  CHECK(out["phases"][1]["name"] == "gate:test");
  CHECK(out["phases"][1]["command"] == json::array({"make", "test"}));
  CHECK(out["phases"][1]["exit_code"] == 2);
  CHECK(out["phases"][1]["ended_by"] == "timeout");
  CHECK(out["phases"][1]["duration_ms"] == 60000);
  CHECK(out["phases"][1]["output_tail"] == "FAIL x\n");
  CHECK(out["phases"][0]["upload"] == json{{"limit_bytes", 5U << 20U},
                                           {"before_bytes", 1000},
                                           {"bytes_up", {{"api.example:443", 4096}, {"[::1]:8080", 1}}}});
  CHECK(out["phases"][1]["upload"].is_null());
  CHECK(out["snapshot_warnings"] == json::array({"skipped a socket: run/x.sock", "skipped a fifo"}));
  CHECK(out["runner"]["pid"] == 4242);
  CHECK(out["runner"]["start_ticks"] == 9876543210123ULL);
  CHECK(out["runner"]["boot_id"] == "6f1c0a58-0000-4000-8000-000000000000");
  CHECK(out["runner"]["repository"] == "0a1b2c3d");
}

TEST_CASE("a record survives to_json, text and record_from_json unchanged") {
  JobRecord record = full_record();
  SUBCASE("succeeded") {}
  SUBCASE("failed with an error and no result") {
    record.state = JobState::failed;
    record.result.clear();
    record.error = "the worker exited with 2";
  }
  SUBCASE("with milliseconds, a sequence and its changes") {
    record.sequence = 41;
    record.created_at = "2026-01-02T03:04:05.123Z";
    record.finished_at = "2026-01-02T03:14:05.007Z";
    record.changes = mullet::jobs::ChangeStats{3, 120, 7};
  }
  SUBCASE("running in its second attempt's gate") {
    record.state = JobState::running;
    record.progress = mullet::jobs::LiveProgress{"gate:tests", 2, 3, "2026-01-02T03:04:09.500Z"};
  }
  SUBCASE("running, nothing finished, no phases") {
    record.state = JobState::running;
    record.result.clear();
    record.finished_at.clear();
    record.phases.clear();
    record.snapshot_warnings.clear();
    record.executor.command.clear();
    record.executor.version.clear();
  }
  SUBCASE("based on uncommitted changes") {
    record.base_uncommitted = true;
    record.base_head = std::string(40, 'c');
  }
  SUBCASE("every state") {
    for (const auto state : {JobState::no_changes, JobState::refused, JobState::cancelled, JobState::interrupted}) {
      record.state = state;
      CHECK(record_from_json(json::parse(to_json(record).dump())).state == state);
    }
  }
  const JobRecord back = record_from_json(json::parse(to_json(record).dump(2)));
  check_same(back, record);
}

TEST_CASE("empty result, finished_at, error and executor details are written as null") {
  JobRecord record = full_record();
  record.result.clear();
  record.finished_at.clear();
  record.error.clear();
  record.executor.command.clear();
  record.executor.version.clear();
  record.executor.model.clear();
  const json out = to_json(record);
  CHECK(out.at("result").is_null());
  CHECK(out.at("finished_at").is_null());
  CHECK(out.at("error").is_null());
  CHECK(out.at("executor_command").is_null());
  CHECK(out.at("executor_version").is_null());
  CHECK(out.at("executor_model").is_null());
  // ...and read back as empty strings.
  const JobRecord back = record_from_json(out);
  CHECK(back.result.empty());
  CHECK(back.finished_at.empty());
  CHECK(back.error.empty());

  record.error = "boom";
  CHECK(to_json(record).at("error") == "boom");
}

TEST_CASE("record_from_json requires id, state and base and fills defaults for the rest") {
  CHECK_THROWS_AS(record_from_json(json::object()), DamagedRecord);

  // An older record: no runner, no warnings, a phase without most fields.
  const json old = {{"format", 1},
                    {"id", "00000000aa"},
                    {"state", "no_changes"},
                    {"base", std::string(40, 'c')},
                    {"phases", json::array({json{{"name", "worker"}}})}};
  const JobRecord back = record_from_json(old);
  CHECK(back.id == "00000000aa");
  CHECK(back.state == JobState::no_changes);
  REQUIRE(back.phases.size() == 1);
  CHECK(back.phases[0].name == "worker");
  CHECK(back.phases[0].command.empty());
  CHECK(back.phases[0].exit_code == -1);
  CHECK(back.phases[0].duration_ms == 0);
  CHECK_FALSE(back.phases[0].ended_by.has_value());
  CHECK(back.runner.pid == 0);
  CHECK(back.title.empty());
  CHECK(back.result.empty());
  CHECK(back.run_flags == json::object());
}

namespace {

json valid_record() {
  return json::parse(to_json(full_record()).dump());
}

// The field record_from_json names when `change` is applied to a valid record.
std::string damaged_field(const std::function<void(json&)>& change) {
  json record = valid_record();
  change(record);
  try {
    record_from_json(record, "0123abcdef");
  } catch (const DamagedRecord& damaged) {
    CHECK(damaged.code() == mullet::ExitCode::usage);
    CHECK(std::string(damaged.what()).find("job 0123abcdef is damaged: " + damaged.field()) == 0);
    return damaged.field();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("record_from_json refuses every field of the wrong type, size or content, naming it") {
  CHECK(damaged_field([](json&) {}) == "(accepted)");
  const std::string huge(2U << 20U, 'x');
  // Ids and object ids.
  CHECK(damaged_field([](json& r) { r["id"] = "../../etc"; }) == "id");
  CHECK(damaged_field([](json& r) { r["id"] = "0123abcde/"; }) == "id");
  CHECK(damaged_field([](json& r) { r["id"] = "abcdef0123"; }) == "id");  // not the ref's
  CHECK(damaged_field([](json& r) { r["id"] = 12; }) == "id");
  CHECK(damaged_field([](json& r) { r["base"] = "--output=/tmp/x"; }) == "base");
  CHECK(damaged_field([](json& r) { r["base"] = std::string(40, 'A'); }) == "base");
  CHECK(damaged_field([](json& r) { r["base"] = std::string(39, 'a'); }) == "base");
  CHECK(damaged_field([](json& r) { r.erase("base"); }) == "base");
  CHECK(damaged_field([](json& r) { r["result"] = "HEAD"; }) == "result");
  CHECK(damaged_field([](json& r) { r["base_uncommitted"] = "yes"; }) == "base_uncommitted");
  CHECK(damaged_field([](json& r) { r["base_head"] = "HEAD"; }) == "base_head");
  CHECK(damaged_field([](json& r) { r["base_head"] = std::string(40, 'c'); }) == "base_head");  // not uncommitted
  CHECK(damaged_field([](json& r) { r["base_uncommitted"] = true; }) == "base_head");           // no HEAD named
  CHECK(damaged_field([](json& r) {
          r["base_uncommitted"] = true;
          r["base_head"] = std::string(40, 'c');
        }) == "(accepted)");
  CHECK(damaged_field([](json& r) { r["result"] = false; }) == "result");
  CHECK(damaged_field([](json& r) {
          r["attempts"] = json::array({{{"number", 1}, {"result", "-p"}}});
        }) == "attempts[0].result");
  CHECK(damaged_field([](json& r) {
          r["attempts"] = json::array({{{"number", 1}, {"gates", json::array({{{"commit", "--all"}}})}}});
        }) == "attempts[0].gates[0].commit");
  // Strings: size, NUL, and line breaks in a line. Other control characters
  // are kept (and neutralised where printed for a person).
  CHECK(damaged_field([&](json& r) { r["title"] = huge; }) == "title");
  CHECK(damaged_field([](json& r) { r["title"] = std::string("a\0b", 3); }) == "title");
  CHECK(damaged_field([](json& r) { r["title"] = "two\nlines"; }) == "title");
  CHECK(damaged_field([](json& r) { r["title"] = "two\rlines"; }) == "title");
  CHECK(damaged_field([](json& r) { r["prompt"] = std::string("nul \0 inside", 12); }) == "prompt");
  CHECK(damaged_field([](json& r) { r["title"] = "a\x1b]0;kept\x07"; }) == "(accepted)");
  CHECK(damaged_field([](json& r) { r["prompt"] = "clear \x1b[2J"; }) == "(accepted)");
  CHECK(damaged_field([](json& r) { r["error"] = std::string(100000, 'e'); }) == "error");
  CHECK(damaged_field([](json& r) { r["title"] = json::array({"x"}); }) == "title");
  CHECK(damaged_field([](json& r) { r["snapshot_warnings"] = json::array({"ok", 7}); }) == "snapshot_warnings[1]");
  // Enums.
  CHECK(damaged_field([](json& r) { r["state"] = "pwned"; }) == "state");
  CHECK(damaged_field([](json& r) { r["state"] = 3; }) == "state");
  CHECK(damaged_field([](json& r) { r["executor"] = "sh"; }) == "executor");
  CHECK(damaged_field([](json& r) { r["phases"][0]["ended_by"] = "exploded"; }) == "phases[0].ended_by");
  CHECK(damaged_field([](json& r) { r["phases"][0]["ended_by"] = "Exit"; }) == "phases[0].ended_by");
  CHECK(damaged_field([](json& r) { r["phases"][0]["ended_by"] = 0; }) == "phases[0].ended_by");
  CHECK(damaged_field([](json& r) { r["phases"][0]["upload"] = "lots"; }) == "phases[0].upload");
  CHECK(damaged_field([](json& r) { r["phases"][0]["upload"]["limit_bytes"] = -1; }) == "phases[0].upload.limit_bytes");
  CHECK(damaged_field([](json& r) { r["phases"][0]["upload"]["bytes_up"] = json::array({1}); }) ==
        "phases[0].upload.bytes_up");
  CHECK(damaged_field([](json& r) { r["phases"][0]["upload"]["bytes_up"]["x:1"] = -5; }) ==
        "phases[0].upload.bytes_up");
  CHECK(damaged_field([](json& r) { r["phases"][0]["upload"]["bytes_up"]["two\nlines:1"] = 5; }) ==
        "phases[0].upload.bytes_up");
  CHECK(damaged_field([](json& r) {
          r["attempts"] = json::array({{{"number", 1}, {"gates", json::array({{{"ended_by", "timeout "}}})}}});
        }) == "attempts[0].gates[0].ended_by");
  // Numbers.
  CHECK(damaged_field([](json& r) { r["format"] = 2; }) == "format");
  CHECK(damaged_field([](json& r) { r["format"] = "1"; }) == "format");
  CHECK(damaged_field([](json& r) { r["runner"]["pid"] = -1; }) == "runner.pid");
  CHECK(damaged_field([](json& r) { r["runner"]["repository"] = "0A1B2C3D"; }) == "runner.repository");
  CHECK(damaged_field([](json& r) { r["runner"]["repository"] = "0a1b2c3"; }) == "runner.repository");
  CHECK(damaged_field([](json& r) { r["runner"]["repository"] = "../0a1b2c"; }) == "runner.repository");
  CHECK(damaged_field([](json& r) { r["runner"]["repository"] = 12; }) == "runner.repository");
  CHECK(damaged_field([](json& r) { r["runner"].erase("repository"); }) == "(accepted)");
  CHECK(damaged_field([](json& r) { r["runner"]["pid"] = "42"; }) == "runner.pid");
  CHECK(damaged_field([](json& r) { r["runner"]["start_ticks"] = 18446744073709551615ULL; }) == "runner.start_ticks");
  CHECK(damaged_field([](json& r) { r["phases"][0]["exit_code"] = 4294967296LL; }) == "phases[0].exit_code");
  CHECK(damaged_field([](json& r) { r["phases"][0]["duration_ms"] = "12"; }) == "phases[0].duration_ms");
  CHECK(damaged_field([](json& r) { r["report"] = {{"cost_usd", 1e300}}; }) == "report.cost_usd");
  CHECK(damaged_field([](json& r) { r["report"] = {{"cost_usd", -1}}; }) == "report.cost_usd");
  CHECK(damaged_field([](json& r) { r["report"] = {{"turns", "7"}}; }) == "report.turns");
  CHECK(damaged_field([](json& r) { r["report"] = "done"; }) == "report");
  CHECK(damaged_field([](json& r) { r["report"] = {{"status", "do\nne"}}; }) == "report.status");
  // Shapes.
  CHECK(damaged_field([](json& r) {
          json deep = json::array();
          for (int i = 0; i < 200; ++i) {
            json wrapped = json::array();
            wrapped.push_back(deep);
            deep = wrapped;
          }
          r["phases"][0]["network"] = deep;
        }) == "phases[0].network");
  CHECK(damaged_field([](json& r) { r["phases"] = "worker"; }) == "phases");
  CHECK(damaged_field([](json& r) { r["phases"] = json::array({"worker"}); }) == "phases[0]");
  CHECK(damaged_field([](json& r) {
          r["attempts"] = json::array({{{"number", 1}, {"gates", json::array({{{"passed", "yes"}}})}}});
        }) == "attempts[0].gates[0].passed");
  CHECK(damaged_field([](json& r) {
          r["snapshot_warnings"] = json::array();
          r["snapshot_warnings"].get_ref<json::array_t&>().resize(10001, "w");
        }) == "snapshot_warnings");
}

TEST_CASE("every stop reason is written by its name and read back") {
  for (const auto& name : mullet::sandbox::stop_names()) {
    INFO(name);
    const auto reason = mullet::sandbox::parse_stop_reason(name);
    REQUIRE(reason.has_value());
    JobRecord record = full_record();
    record.phases[0].ended_by = *reason;
    record.attempts.push_back({1, "", "", {}, ""});
    record.attempts[0].gates.push_back({"g", "true", std::string(40, 'b'), false, 1, *reason, 5, ""});
    const json written = to_json(record);
    CHECK(written["phases"][0]["ended_by"] == name);
    CHECK(written["attempts"][0]["gates"][0]["ended_by"] == name);
    const JobRecord back = record_from_json(json::parse(written.dump()), record.id);
    CHECK(back.phases[0].ended_by == reason);
    CHECK(back.attempts[0].gates[0].ended_by == reason);
  }
}

TEST_CASE("a phase without a stop reason is written as older records have it") {
  JobRecord record = full_record();
  record.phases[0].ended_by.reset();
  const json written = to_json(record);
  CHECK(written["phases"][0]["ended_by"] == "");
  CHECK_FALSE(record_from_json(written, record.id).phases[0].ended_by.has_value());
}

TEST_CASE("an executor's refusal in an older record reads as worker_refused") {
  json written = to_json(full_record());
  written["phases"][0]["ended_by"] = "stopped: permission mode is 'default'";
  CHECK(record_from_json(written).phases[0].ended_by == StopReason::worker_refused);
}

TEST_CASE("to_json writes only what record_from_json accepts") {
  // Whatever a worker or a run puts in a record, the record can be read back:
  // a job must never become "damaged" by its own output.
  JobRecord record = full_record();
  record.title = "tab\there and \x1b[31mred" + std::string(5000, 't');
  record.error = "bell \x07" + std::string(200000, 'e');
  record.phases[0].name = "gate:" + std::string(1000, 'n') + "\n";
  record.phases[0].command = {"sh", "-c", std::string(100000, 'c') + "\x01"};
  record.phases[0].output_tail = "\x1b[2J" + std::string(100000, 'o');
  record.snapshot_warnings.assign(20000, "skipped a fifo \x1b");
  record.report = full_report();
  record.report.status = "completed\n";
  record.report.summary = std::string(100000, 's');
  record.report.model = std::string(1000, 'm');
  record.report.permission_denials = json::array();
  for (int i = 0; i < 10010; ++i) record.report.permission_denials.push_back(json::object());
  record.attempts.push_back({1, std::string(40, 'b'), "\x1b", {}, ""});
  record.attempts[0].gates.push_back(
      {"t\x1b", std::string(70000, 'g'), std::string(40, 'b'), false, 1, StopReason::exit, 5, "x"});
  JobRecord back;
  REQUIRE_NOTHROW(back = record_from_json(json::parse(to_json(record).dump()), "0123abcdef"));
  CHECK(back.title.rfind("tab\there and \x1b[31mred", 0) == 0);
  CHECK(back.snapshot_warnings.size() == 10000);
  CHECK(back.report.permission_denials.size() == 10000);
  CHECK(back.phases[0].output_tail.find("\x1b[2J") == std::string::npos);  // its end is kept
}

TEST_CASE("run_flags may hold only what run records") {
  auto flags = [](json value) { return [value](json& r) { r["run_flags"] = value; }; };
  CHECK(damaged_field(flags({{"config", {{"run.command", "make"}, {"run.attempts", 3}}},
                             {"gates", json::array({{{"name", "t"}, {"command", "make test"}, {"timeout", 0}}})}})) ==
        "(accepted)");
  CHECK(damaged_field(flags({{"config", {{"claude.binary", "/tmp/evil"}}}})) == "run_flags.config.claude.binary");
  CHECK(damaged_field(flags({{"config", {{"claude.model", "opus"}, {"opencode.model", "local/qwen"}}}})) ==
        "(accepted)");
  CHECK(damaged_field(flags({{"config", {{"claude.model", std::string(257, 'm')}}}})) ==
        "run_flags.config.claude.model");
  CHECK(damaged_field(flags({{"config", {{"run.max_attempts", 100}}}})) == "run_flags.config.run.max_attempts");
  CHECK(damaged_field(flags({{"config", {{"network.worker", json::array({"*"})}}}})) ==
        "run_flags.config.network.worker");
  CHECK(damaged_field(flags({{"config", {{"sandbox.uid", 0}}}})) == "run_flags.config.sandbox.uid");
  CHECK(damaged_field(flags({{"config", {{"run.attempts", 1000000}}}})) == "run_flags.config.run.attempts");
  CHECK(damaged_field(flags({{"config", {{"run.command", 5}}}})) == "run_flags.config.run.command");
  CHECK(damaged_field(flags({{"env", {{"LD_PRELOAD", "x"}}}})) == "run_flags.env");
  CHECK(damaged_field(flags({{"gates", json::array({{{"name", "t"}}})}})) == "run_flags.gates[0].command");
  CHECK(damaged_field(flags("x")) == "run_flags");
  // A key with control characters is named without them.
  const std::string shown = damaged_field(flags({{"config", {{"a\x1b[2Jb", "x"}}}}));
  CHECK(shown.find('\x1b') == std::string::npos);
}

TEST_CASE("a record whose output tail is not valid UTF-8 can still be written") {
  // Regression: the worker's output is arbitrary bytes, and run_job stores
  // util::tail(kept_log, 4096) as output_tail, a cut at a byte count that can
  // split a UTF-8 sequence (any non-ASCII output longer than 4 KiB). to_json
  // copies the bytes as they are, nlohmann::json::dump() throws type_error 316,
  // and JobStore::write_record_commit (to_json(record).dump(2)) fails outside
  // run_job's try block, leaving the job record unfinished.
  JobRecord record = full_record();
  record.phases[0].output_tail = "[... earlier output cut ...]\n\xA9 tail of a cut \xC3";
  std::string text;
  CHECK_NOTHROW(text = to_json(record).dump(2));
  // Whatever the bytes become, the readable part survives a round trip.
  if (!text.empty()) {
    const JobRecord back = record_from_json(json::parse(text));
    CHECK(back.phases.at(0).output_tail.find(" tail of a cut ") != std::string::npos);
  }
}

TEST_CASE("summary_json holds only what list needs") {
  const JobRecord record = full_record();
  const json summary = summary_json(record);
  std::vector<std::string> keys;
  for (const auto& item : summary.items()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"base", "changes", "cost_usd", "created_at", "error", "executor",
                                         "finished_at", "format", "id", "result", "runner", "sequence", "state",
                                         "title"});
  CHECK(summary["id"] == "0123abcdef");
  CHECK(summary["state"] == "succeeded");
  CHECK(summary["title"] == "Fix the parser");
  CHECK(summary["runner"]["pid"] == 4242);
  CHECK(summary["error"].is_null());
  CHECK_FALSE(summary.contains("prompt"));
  CHECK_FALSE(summary.contains("phases"));
  CHECK_FALSE(summary.contains("snapshot_warnings"));

  // The summary reads back into a record with the same list-level fields.
  const JobRecord back = record_from_json(summary);
  CHECK(back.id == record.id);
  CHECK(back.state == record.state);
  CHECK(back.result == record.result);
  CHECK(back.runner.start_ticks == record.runner.start_ticks);
  CHECK(back.prompt.empty());
  CHECK(back.phases.empty());
}

TEST_CASE("a record without a worker report writes report as null and reads back an empty one") {
  const JobRecord record = full_record();
  CHECK(record.report.empty());
  const json out = to_json(record);
  REQUIRE(out.contains("report"));
  CHECK(out.at("report").is_null());
  const JobRecord back = record_from_json(json::parse(out.dump()));
  CHECK(back.report.empty());
  check_same_report(back.report, WorkerReport{});

  // Older records have no report key at all.
  json old = out;
  old.erase("report");
  CHECK(record_from_json(old).report.empty());
}

TEST_CASE("to_json writes the worker report under its documented names") {
  JobRecord record = full_record();
  record.executor.name = "claude";
  record.report = full_report();
  const json report = to_json(record).at("report");
  REQUIRE(report.is_object());
  std::vector<std::string> keys;
  for (const auto& item : report.items()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"cost_usd", "model", "permission_denials", "session_id", "status", "summary",
                                         "turns"});
  CHECK(report.at("status") == "done");
  CHECK(report.at("summary") == "wrote hello.txt");
  CHECK(report.at("turns") == 5);
  CHECK(report.at("cost_usd") == 0.004);
  CHECK(report.at("model") == "claude-opus-4-8[1m]");
  CHECK(report.at("session_id") == "f300d4f6-5b49-496d-b0aa-a0d5d7dfd3cc");
  CHECK(report.at("permission_denials") == full_report().permission_denials);
  // The summary line for `list` stays small.
  CHECK_FALSE(summary_json(record).contains("report"));
}

TEST_CASE("a worker report survives to_json, text and record_from_json unchanged") {
  JobRecord record = full_record();
  record.executor.name = "claude";
  record.report = full_report();
  SUBCASE("done, with refused tool uses") {}
  SUBCASE("blocked, nothing refused") {
    record.report.status = "blocked";
    record.report.summary = "the tests need network access";
    record.report.permission_denials = json::array();
  }
  SUBCASE("no structured result: status and summary empty") {
    record.report.status.clear();
    record.report.summary.clear();
    record.report.turns = 3;
  }
  SUBCASE("odd numbers") {
    record.report.turns = 123456789012LL;
    record.report.cost_usd = 1.0 / 3.0;
  }
  SUBCASE("only a model (the worker died before its result)") {
    record.report = WorkerReport{};
    record.report.model = "claude-sonnet-4-5";
  }
  SUBCASE("only refusals") {
    const json denials = record.report.permission_denials;
    record.report = WorkerReport{};
    record.report.permission_denials = denials;
  }
  CHECK_FALSE(record.report.empty());
  const JobRecord back = record_from_json(json::parse(to_json(record).dump(2)));
  check_same_report(back.report, record.report);
  check_same(back, record);
}

TEST_CASE("an empty status and summary are written as null") {
  JobRecord record = full_record();
  record.report = full_report();
  record.report.status.clear();
  record.report.summary.clear();
  record.report.model.clear();
  record.report.session_id.clear();
  const json report = to_json(record).at("report");
  CHECK(report.at("status").is_null());
  CHECK(report.at("summary").is_null());
  CHECK(report.at("model").is_null());
  CHECK(report.at("session_id").is_null());
  CHECK(report.at("turns") == 5);
}

TEST_CASE("WorkerReport::empty is true only when there is nothing to say") {
  CHECK(WorkerReport{}.empty());
  WorkerReport report;
  report.status = "done";
  CHECK_FALSE(report.empty());
  report = WorkerReport{};
  report.turns = 1;
  CHECK_FALSE(report.empty());
  report = WorkerReport{};
  report.model = "claude-opus-4-8";
  CHECK_FALSE(report.empty());
  report = WorkerReport{};
  report.permission_denials.push_back(json::object());
  CHECK_FALSE(report.empty());
}

TEST_CASE("a worker report whose text is not valid UTF-8 can still be written") {
  JobRecord record = full_record();
  record.report = full_report();
  record.report.summary = "fixed caf\xC3";
  record.report.model = "m\xFF";
  std::string text;
  CHECK_NOTHROW(text = to_json(record).dump());
  if (!text.empty()) {
    const JobRecord back = record_from_json(json::parse(text));
    CHECK(back.report.summary.rfind("fixed caf", 0) == 0);
    CHECK(back.report.status == "done");
  }
}

TEST_CASE("an attempt's kind is written by name, read back, and worker when absent") {
  JobRecord record = full_record();
  record.attempts.push_back({1, std::string(40, 'b'), "", {}, ""});
  record.attempts.push_back({2, std::string(40, 'b'), "", {}, "", mullet::jobs::AttemptKind::shell});
  const json written = to_json(record);
  CHECK(written["attempts"][0]["kind"] == "worker");
  CHECK(written["attempts"][1]["kind"] == "shell");
  const JobRecord back = record_from_json(json::parse(written.dump()));
  CHECK(back.attempts[0].kind == mullet::jobs::AttemptKind::worker);
  CHECK(back.attempts[1].kind == mullet::jobs::AttemptKind::shell);
  json older = written;
  older["attempts"][1].erase("kind");
  CHECK(record_from_json(older).attempts[1].kind == mullet::jobs::AttemptKind::worker);
  older["attempts"][1]["kind"] = "human";
  CHECK_THROWS_AS(record_from_json(older), DamagedRecord);
}

TEST_CASE("a phase's kernel-counted memory peak is written, read back, null without a cgroup, and bounded") {
  JobRecord record = full_record();
  record.phases[0].memory_peak_bytes = 134217728;
  const json written = to_json(record);
  CHECK(written["phases"][0]["memory_peak_bytes"] == 134217728);
  CHECK(written["phases"][1]["memory_peak_bytes"].is_null());
  const JobRecord back = record_from_json(written, record.id);
  CHECK(back.phases[0].memory_peak_bytes == std::optional<std::uint64_t>(134217728));
  CHECK_FALSE(back.phases[1].memory_peak_bytes.has_value());
  CHECK(damaged_field([](json& r) { r["phases"][0]["memory_peak_bytes"] = -1; }) == "phases[0].memory_peak_bytes");
  CHECK(damaged_field([](json& r) { r["phases"][0]["memory_peak_bytes"] = "big"; }) == "phases[0].memory_peak_bytes");
}

TEST_CASE("a node's write keeps the host's dispatch fields and settles a cancel the host did not ask for") {
  using mullet::jobs::DispatchRecord;
  using mullet::jobs::overwrite_keeping_dispatch;
  JobRecord now;
  now.id = "0123456789";
  now.state = JobState::cancelled;
  now.error = "cancelled by signal";

  // A SIGTERM from the scheduler: interrupted, in the same write.
  JobRecord stored;
  stored.dispatch = DispatchRecord{"slurm", "12", "node7", ""};
  overwrite_keeping_dispatch(stored, now);
  CHECK(stored.state == JobState::interrupted);
  CHECK(stored.dispatch->node == "node7");
  CHECK(stored.dispatch->reason == "SIGTERM from the scheduler");
  CHECK(stored.error.find("the scheduler ended slurm job 12") == 0);

  // `git mullet stop` marked it first: cancelled, as asked.
  JobRecord stopped;
  stopped.dispatch = DispatchRecord{"slurm", "12", "node7", mullet::jobs::stop_requested_reason};
  overwrite_keeping_dispatch(stopped, now);
  CHECK(stopped.state == JobState::cancelled);
  CHECK(stopped.error == "cancelled by signal");

  // Any other end, and a job run where it was started, as written.
  JobRecord local;
  overwrite_keeping_dispatch(local, now);
  CHECK(local.state == JobState::cancelled);
  CHECK_FALSE(local.dispatch.has_value());
  JobRecord failed = now;
  failed.state = JobState::failed;
  JobRecord dispatched;
  dispatched.dispatch = DispatchRecord{"slurm", "12", "", ""};
  overwrite_keeping_dispatch(dispatched, failed);
  CHECK(dispatched.state == JobState::failed);
}
