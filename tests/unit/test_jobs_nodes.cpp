#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobs/id.hpp"
#include "jobs/nodes.hpp"
#include "jobs/record.hpp"

using mullet::ExitCode;
using mullet::jobs::check_node_number;
using mullet::jobs::choose_node;
using mullet::jobs::chosen_node;
using mullet::jobs::DamagedRecord;
using mullet::jobs::JobAddress;
using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::max_nodes;
using mullet::jobs::node_view;
using mullet::jobs::NodeRecord;
using mullet::jobs::NodeStanding;
using mullet::jobs::parse_job_address;
using mullet::jobs::record_from_json;
using mullet::jobs::settle_job;
using mullet::jobs::store_node;
using mullet::jobs::to_json;
using nlohmann::json;

namespace {

NodeRecord node(int number, JobState state, char result, std::int64_t lines, double cost = 0) {
  NodeRecord made;
  made.number = number;
  made.executor.name = "command";
  made.state = state;
  if (result != 0) made.result = std::string(40, result);
  made.changes = mullet::jobs::ChangeStats{1, lines, 0};
  made.cost_usd = cost;
  return made;
}

JobRecord job_of(std::vector<NodeRecord> nodes) {
  JobRecord job;
  job.id = "0123abcdef";
  job.base = std::string(40, 'a');
  job.executor.name = "command";
  job.nodes = std::move(nodes);
  settle_job(job);
  return job;
}

}  // namespace

TEST_CASE("parse_job_address reads ID and ID/N") {
  CHECK(*parse_job_address("0123abcdef", max_nodes) == JobAddress{"0123abcdef", 0});
  CHECK(*parse_job_address("01/3", max_nodes) == JobAddress{"01", 3});
  CHECK(*parse_job_address("0/16", max_nodes) == JobAddress{"0", 16});
  CHECK(*parse_job_address("0123abcdef/1", max_nodes) == JobAddress{"0123abcdef", 1});
}

TEST_CASE("parse_job_address refuses a bad node number, naming it") {
  for (const std::string bad : {"01/0", "01/17", "01/", "01/-1", "01/+1", "01/01", "01/1a", "01/ 1", "/2", "01/1000",
                                "01/99999999999999999999", "01/2/3x"}) {
    CAPTURE(bad);
    const auto parsed = parse_job_address(bad, max_nodes);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().code() == ExitCode::usage);
    CHECK(std::string(parsed.error().hint()).find("JOB/N") != std::string::npos);
  }
}

TEST_CASE("check_node_number: a node the job has, none of a job of one") {
  CHECK(*check_node_number("0123abcdef", 0, 0) == 0);
  CHECK(*check_node_number("0123abcdef", 0, 4) == 0);
  CHECK(*check_node_number("0123abcdef", 4, 4) == 4);
  const auto beyond = check_node_number("0123abcdef", 5, 4);
  REQUIRE_FALSE(beyond.has_value());
  CHECK(std::string(beyond.error().what()).find("has 4 nodes; there is no node 5") != std::string::npos);
  const auto single = check_node_number("0123abcdef", 1, 0);
  REQUIRE_FALSE(single.has_value());
  CHECK(std::string(single.error().what()).find("a job of one node") != std::string::npos);
}

TEST_CASE("choose_node: passed, then fewest changed lines, then lowest cost, then lowest number") {
  CHECK_FALSE(choose_node({}).has_value());
  CHECK_FALSE(choose_node({{1, false, 1, 0}, {2, false, 0, 0}}).has_value());
  CHECK(*choose_node({{1, false, 1, 0}, {2, true, 50, 0}}) == 2);
  CHECK(*choose_node({{1, true, 30, 0}, {2, true, 20, 9}, {3, true, 25, 0}}) == 2);
  CHECK(*choose_node({{1, true, 20, 2.5}, {2, true, 20, 1.5}, {3, true, 21, 0}}) == 2);
  CHECK(*choose_node({{3, true, 20, 1}, {1, true, 20, 1}, {2, true, 20, 1}}) == 1);
  // A node that failed is never chosen, however small.
  CHECK(*choose_node({{1, false, 0, 0}, {2, true, 1000, 100}}) == 2);
}

TEST_CASE("settle_job: the job is its chosen node's, or says why there is none") {
  SUBCASE("running while a node runs") {
    const auto job = job_of({node(1, JobState::succeeded, 'b', 3), node(2, JobState::running, 0, 0)});
    CHECK(job.state == JobState::running);
  }
  SUBCASE("the chosen node's result and changes") {
    const auto job = job_of({node(1, JobState::succeeded, 'b', 3, 1.0), node(2, JobState::succeeded, 'c', 2, 0.5),
                             node(3, JobState::failed, 'd', 1)});
    CHECK(job.state == JobState::succeeded);
    CHECK(*chosen_node(job) == 2);
    CHECK(job.result == std::string(40, 'c'));
    CHECK(job.changes->insertions == 2);
    CHECK(*job.cost_usd == doctest::Approx(1.5));
    CHECK(job.error.empty());
  }
  SUBCASE("none passed: no result, an error naming each node") {
    const auto job = job_of({node(1, JobState::failed, 'b', 3), node(2, JobState::refused, 0, 0)});
    CHECK(job.state == JobState::failed);
    CHECK(job.result.empty());
    CHECK(job.error.find("node 1 failed") != std::string::npos);
    CHECK(job.error.find("node 2 refused") != std::string::npos);
  }
  SUBCASE("an interrupted node makes the job interrupted, not failed") {
    const auto job = job_of({node(1, JobState::failed, 'b', 3), node(2, JobState::interrupted, 0, 0)});
    CHECK(job.state == JobState::interrupted);
  }
}

TEST_CASE("a node's view and its record round trip") {
  auto job = job_of({node(1, JobState::running, 0, 0), node(2, JobState::running, 0, 0)});
  job.nodes[1].started_at = "2026-01-02T03:04:05.000Z";
  JobRecord view = node_view(job, 2);
  CHECK(view.nodes.empty());
  view.state = JobState::succeeded;
  view.result = std::string(40, 'e');
  view.attempts.push_back({});
  view.attempts.back().number = 1;
  store_node(job, view, 2);
  CHECK(job.nodes[1].state == JobState::succeeded);
  CHECK(job.nodes[1].started_at == "2026-01-02T03:04:05.000Z");
  CHECK(job.nodes[1].attempts.size() == 1);
  CHECK(job.nodes[0].state == JobState::running);
  CHECK(job.state == JobState::running);
}

TEST_CASE("a job of several nodes survives to_json and record_from_json; one of one has no nodes") {
  auto job = job_of({node(1, JobState::succeeded, 'b', 3, 0.25), node(2, JobState::failed, 'c', 1)});
  job.nodes[0].executor.model = "sonnet";
  job.nodes[1].error = "gate test failed";
  const JobRecord back = record_from_json(json::parse(to_json(job).dump()), job.id);
  REQUIRE(back.nodes.size() == 2);
  CHECK(back.nodes[0].executor.model == "sonnet");
  CHECK(back.nodes[1].error == "gate test failed");
  CHECK(back.nodes[0].changes == job.nodes[0].changes);
  CHECK(back.result == std::string(40, 'b'));
  CHECK(to_json(back)["nodes"] == to_json(job)["nodes"]);

  JobRecord single = job;
  single.nodes.clear();
  CHECK_FALSE(to_json(single).contains("nodes"));
}

TEST_CASE("record_from_json refuses forged nodes, naming the field") {
  const json good = to_json(job_of({node(1, JobState::succeeded, 'b', 3), node(2, JobState::failed, 'c', 1)}));
  const auto refused = [&](const std::function<void(json&)>& forge, const std::string& field) {
    json forged = good;
    forge(forged);
    try {
      record_from_json(forged, "0123abcdef");
      FAIL("accepted a forged record: " << field);
    } catch (const DamagedRecord& damaged) {
      CHECK(damaged.field().find(field) == 0);
    }
  };
  refused([](json& j) { j["nodes"] = json::array({j["nodes"][0]}); }, "nodes");
  refused([](json& j) { j["nodes"] = json::object(); }, "nodes");
  refused(
      [](json& j) {
        for (int n = 3; n <= 17; ++n) {
          json more = j["nodes"][1];
          more["number"] = n;
          j["nodes"].push_back(more);
        }
      },
      "nodes");
  refused([](json& j) { j["nodes"][1]["number"] = 1; }, "nodes[1].number");
  refused([](json& j) { j["nodes"][1]["number"] = 99; }, "nodes[1].number");
  refused([](json& j) { j["nodes"][0]["state"] = "won"; }, "nodes[0].state");
  refused([](json& j) { j["nodes"][0]["result"] = "HEAD"; }, "nodes[0].result");
  refused([](json& j) { j["nodes"][0]["executor"] = "sh"; }, "nodes[0].executor");
  refused([](json& j) { j["nodes"][0]["cost_usd"] = -1; }, "nodes[0].cost_usd");
  refused([](json& j) { j["nodes"][0]["started_at"] = "a\nb"; }, "nodes[0].started_at");
  refused(
      [](json& j) {
        j["nodes"][0]["attempts"] = json::array({{{"number", "one"}}});
      },
      "nodes[0].attempts[0].number");
  refused([](json& j) { j["result"] = std::string(40, 'f'); }, "result");
}

TEST_CASE("node_ending: the state, then the changes, then the error's first line") {
  CHECK(mullet::jobs::node_ending(mullet::jobs::JobState::succeeded, mullet::jobs::ChangeStats{2, 3, 1}, "") ==
        "succeeded · 2 files +3 -1");
  CHECK(mullet::jobs::node_ending(mullet::jobs::JobState::failed, std::nullopt, "gate tests failed\nmore") ==
        "failed · gate tests failed");
  CHECK(mullet::jobs::node_ending(mullet::jobs::JobState::running, std::nullopt, "") == "running");
}
