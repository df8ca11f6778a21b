#include <doctest/doctest.h>

#include <string>

#include "jobs/resume.hpp"

using mullet::jobs::AttemptRecord;
using mullet::jobs::continuable;
using mullet::jobs::continued_prompt;
using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::resumable;

TEST_CASE("a job that ended can be continued; resume takes only what did not finish") {
  for (const auto state : {JobState::succeeded, JobState::no_changes, JobState::failed, JobState::refused,
                           JobState::cancelled, JobState::interrupted}) {
    CHECK(continuable(state));
  }
  CHECK_FALSE(continuable(JobState::running));
  CHECK_FALSE(resumable(JobState::succeeded));
  CHECK_FALSE(resumable(JobState::no_changes));
  CHECK(resumable(JobState::failed));
}

TEST_CASE("a continued job's prompt: the task, what came of it, the earlier instructions, the new one last") {
  JobRecord record;
  record.prompt = "fix the parser";
  record.result = std::string(40, 'a');
  record.report.summary = "I fixed two of three cases; the third needs a decision.";
  AttemptRecord first;
  first.number = 1;
  AttemptRecord second;
  second.number = 2;
  second.instruction = "handle empty input too";
  record.attempts = {first, second};

  const std::string prompt = continued_prompt(record, "use an error for the third case");
  CHECK(prompt.rfind("fix the parser", 0) == 0);
  CHECK(prompt.find("(2 attempts so far)") != std::string::npos);
  CHECK(prompt.find("the work tree holds the result so far") != std::string::npos);
  CHECK(prompt.find("the third needs a decision") != std::string::npos);
  const auto earlier = prompt.find("handle empty input too");
  const auto newest = prompt.find("use an error for the third case");
  REQUIRE(earlier != std::string::npos);
  REQUIRE(newest != std::string::npos);
  CHECK(earlier < newest);
  CHECK(prompt.find("already worked on") < newest);
  CHECK(prompt.find("it rules") < newest);

  SUBCASE("without a result or a summary") {
    record.result.clear();
    record.report.summary.clear();
    const std::string bare = continued_prompt(record, "try again");
    CHECK(bare.find("the work tree is where the task started") != std::string::npos);
    CHECK(bare.find("summary") == std::string::npos);
  }
  SUBCASE("a long summary is cut to its end") {
    record.report.summary = std::string(100000, 'x') + "THE END";
    const std::string cut = continued_prompt(record, "go on");
    CHECK(cut.size() < 40000);
    CHECK(cut.find("THE END") != std::string::npos);
  }
}

TEST_CASE("an array task's number: digits naming one of the job's nodes, nothing else") {
  using mullet::jobs::parse_array_task;
  CHECK(parse_array_task("1", 3) == 1);
  CHECK(parse_array_task("3", 3) == 3);
  for (const char* bad : {"0", "01", "4", "", "-1", "+1", "1 ", " 1", "01x", "1;2", "2,3", "1e0", "99999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_array_task(bad, 3).has_value());
  }
}
