#include <doctest/doctest.h>

#include "jobs/notify.hpp"

using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::notify_environment;
using mullet::jobs::notify_job_end;

TEST_CASE("the notifier's environment is ours with the job's id and state, which no inherited value overrides") {
  JobRecord record;
  record.id = "0123456789";
  record.state = JobState::cancelled;
  const auto env = notify_environment({{"DISPLAY", ":0"}, {"MULLET_JOB_ID", "forged"}}, record);
  CHECK(env.at("DISPLAY") == ":0");
  CHECK(env.at("MULLET_JOB_ID") == "0123456789");
  CHECK(env.at("MULLET_JOB_STATE") == "cancelled");
}

TEST_CASE("no notifier configured: nothing runs, nothing to warn about") {
  CHECK(notify_job_end({}, JobRecord{}).empty());
}

TEST_CASE("a notifier that cannot start is a warning, not an exception") {
  const auto problem = notify_job_end({"/nonexistent/notifier", "x"}, JobRecord{});
  CHECK(problem.find("[run] notify (/nonexistent/notifier x)") == 0);
}
