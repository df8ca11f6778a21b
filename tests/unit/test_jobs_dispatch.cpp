#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "jobs/dispatch.hpp"
#include "jobs/record.hpp"
#include "util/error.hpp"

using mullet::Error;
using mullet::jobs::batch_script;
using mullet::jobs::parse_scontrol_job;
using mullet::jobs::sbatch_argv;
using mullet::jobs::SchedulerStatus;
using mullet::jobs::SubmitRequest;

namespace {

SubmitRequest request() {
  SubmitRequest submit;
  submit.binary = "/usr/bin/git-mullet";
  submit.repository = "/shared/repo";
  submit.repository_key = "0a1b2c3d";
  submit.job_id = "0123456789";
  submit.script_path = "/shared/repo/.git/mullet/jobs/0123456789/dispatch.sh";
  submit.output_path = "/shared/repo/.git/mullet/jobs/0123456789/dispatch.log";
  submit.time_seconds = 3600;
  submit.memory_mb = 512;
  submit.dispatch.cpus = 2;
  return submit;
}

bool has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

}  // namespace

TEST_CASE("sbatch's argv: the limits become the request, the job's id and paths come after the script") {
  auto submit = request();
  submit.dispatch.partition = "gpu";
  submit.dispatch.account = "team";
  submit.dispatch.sbatch_args = {"--qos=low", "--comment=a b; $(touch /tmp/x)"};
  const auto argv = sbatch_argv(submit);
  CHECK(argv[0] == "sbatch");
  CHECK(has(argv, "--parsable"));
  CHECK(has(argv, "--job-name=mullet-0a1b2c3d.0123456789"));
  // job_timeout in whole minutes, rounded up, plus one so our wall ends it first.
  CHECK(has(argv, "--time=61"));
  CHECK(has(argv, "--mem=512M"));
  CHECK(has(argv, "--cpus-per-task=2"));
  CHECK(has(argv, "--partition=gpu"));
  CHECK(has(argv, "--account=team"));
  // Each extra argument is one argument, passed as it is.
  CHECK(has(argv, "--comment=a b; $(touch /tmp/x)"));
  // No --wrap: a shell string would be parsed on the node.
  for (const auto& word : argv) CHECK(word.rfind("--wrap", 0) != 0);
  const std::vector<std::string> tail(argv.end() - 4, argv.end());
  CHECK(tail == std::vector<std::string>{submit.script_path, submit.binary, "__run-dispatched", submit.job_id});
}

TEST_CASE("sbatch's argv refuses what a scheduler should not be given") {
  for (const std::string& bad :
       std::vector<std::string>{"relative/path", "", "/a\nb", std::string("/a\0b", 4), "/a\rb"}) {
    auto submit = request();
    submit.repository = bad;
    CHECK_THROWS_AS(sbatch_argv(submit), Error);
  }
  for (const std::string bad : {"", "01234", "0123456789; rm", "ABCDEFGHIJ", "../../etc"}) {
    auto submit = request();
    submit.job_id = bad;
    CHECK_THROWS_AS(sbatch_argv(submit), Error);
  }
  for (const std::string bad : {"", "0a1b2c3", "0A1B2C3D", "0a1b2c3d.", "../0a1b"}) {
    auto submit = request();
    submit.repository_key = bad;
    CHECK_THROWS_AS(sbatch_argv(submit), Error);
  }
}

TEST_CASE("the batch script runs its arguments and interpolates nothing of ours") {
  const std::string script = batch_script();
  CHECK(script.rfind("#!/bin/sh\n", 0) == 0);
  CHECK(script.find("exec \"$@\"") != std::string::npos);
  // Only "$@" is expanded.
  CHECK(std::count(script.begin(), script.end(), '$') == 1);
}

TEST_CASE("scontrol's line maps onto our states") {
  const auto pending = parse_scontrol_job(
      "JobId=12 JobName=mullet-0a1b2c3d.0123456789 JobState=PENDING Reason=Resources Dependency=(null) "
      "BatchHost=(null)");
  CHECK(pending.status == SchedulerStatus::pending);
  CHECK(pending.reason == "Resources");
  CHECK(pending.node.empty());
  const auto running = parse_scontrol_job("JobId=12 JobState=RUNNING Reason=None BatchHost=node7");
  CHECK(running.status == SchedulerStatus::running);
  CHECK(running.reason.empty());
  CHECK(running.node == "node7");
  for (const char* ended : {"COMPLETED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "FAILED", "OUT_OF_MEMORY"}) {
    INFO(ended);
    CHECK(parse_scontrol_job(std::string("JobId=12 JobState=") + ended + " Reason=None").status ==
          SchedulerStatus::ended);
  }
  CHECK(parse_scontrol_job("").status == SchedulerStatus::unknown);
  CHECK(parse_scontrol_job("garbage without fields").status == SchedulerStatus::unknown);
}

TEST_CASE("scontrol's line: the job's name is read, and a path that spells a field later on changes nothing") {
  const auto view = parse_scontrol_job(
      "JobId=12 JobName=mullet-0a1b2c3d.0123456789 JobState=RUNNING Reason=None BatchHost=node7 "
      "WorkDir=/repos/x JobState=COMPLETED JobName=mullet-0a1b2c3d.9999999999 BatchHost=elsewhere Reason=Forged");
  CHECK(view.name == "mullet-0a1b2c3d.0123456789");
  CHECK(view.status == SchedulerStatus::running);
  CHECK(view.node == "node7");
  CHECK(view.reason.empty());
  CHECK(mullet::jobs::scheduler_job_name("0a1b2c3d", "0123456789") == view.name);
}

TEST_CASE("only the scheduler's answer for this job's own id lets it be cancelled") {
  using mullet::jobs::require_this_job;
  using mullet::jobs::SchedulerView;
  SchedulerView ours{SchedulerStatus::running, "RUNNING", "", "node7", "mullet-0a1b2c3d.0123456789", false};
  CHECK_NOTHROW(require_this_job(ours, "12", "0a1b2c3d", "0123456789"));
  SchedulerView foreign{SchedulerStatus::ended, "NOT_THIS_JOB", "", "", "nightly-backup", true};
  CHECK_THROWS_WITH(require_this_job(foreign, "12", "0a1b2c3d", "0123456789"),
                    doctest::Contains("is not known to be job 0123456789 of this repository (it is named "
                                      "'nightly-backup')"));
  CHECK_THROWS_WITH(require_this_job(SchedulerView{}, "12", "0a1b2c3d", "0123456789"),
                    doctest::Contains("nothing was cancelled"));
  // The same job id submitted from another repository on the cluster: its
  // copied record may be shown, never cancelled from here.
  CHECK_THROWS_WITH(require_this_job(ours, "12", "99999999", "0123456789"),
                    doctest::Contains("(it is named 'mullet-0a1b2c3d.0123456789')"));
}

TEST_CASE("status takes a job's name from any repository; cancel only from its own") {
  using mullet::jobs::names_job;
  CHECK(names_job("mullet-0a1b2c3d.0123456789", "0123456789"));
  CHECK(names_job("mullet-99999999.0123456789", "0123456789"));
  for (const char* other :
       {"mullet-0123456789", "mullet-0a1b2c3d.9999999999", "mullet-0A1B2C3D.0123456789", "mullet-0a1b2c3.0123456789",
        "mullet-0a1b2c3dd.0123456789", "nightly-backup", "xmullet-0a1b2c3d.0123456789", ""}) {
    INFO(other);
    CHECK_FALSE(names_job(other, "0123456789"));
  }
}

TEST_CASE("scheduler ids and host names a record may hold") {
  using mullet::jobs::is_host_name;
  using mullet::jobs::is_scheduler_id;
  for (const char* good : {"", "1", "123456", "12_3"}) CHECK(is_scheduler_id(good));
  for (const char* bad : {"a", "1_", "_1", "1_2_3", "1;2", "-1", " 1"}) CHECK_FALSE(is_scheduler_id(bad));
  CHECK_FALSE(is_scheduler_id(std::string(41, '1')));
  for (const char* good : {"", "node1", "n-1.example.org"}) CHECK(is_host_name(good));
  for (const char* bad : {"a b", "a/b", "a\nb", "$(x)"}) CHECK_FALSE(is_host_name(bad));
}

TEST_CASE("a job of several nodes is one job array: its task ids, a log per task, '%' in paths kept as they are") {
  auto submit = request();
  submit.repository = "/shared/50%x/repo";
  submit.output_path = "/shared/50%x/repo/.git/mullet/jobs/0123456789/dispatch.log";
  submit.array_tasks = {1, 2, 3};
  auto argv = sbatch_argv(submit);
  CHECK(has(argv, "--array=1,2,3"));
  // --output expands patterns: the path's own '%' doubled, then the task's.
  CHECK(has(argv, "--output=/shared/50%%x/repo/.git/mullet/jobs/0123456789/dispatch.log.%a"));
  // --chdir is taken as it is (Slurm 22.05 expands no pattern there).
  CHECK(has(argv, "--chdir=/shared/50%x/repo"));
  CHECK(has(argv, "--job-name=mullet-0a1b2c3d.0123456789"));
  // Resume: the unfinished nodes only.
  submit.array_tasks = {2, 3};
  CHECK(has(sbatch_argv(submit), "--array=2,3"));
  // A job of one: no array, its one log.
  submit.array_tasks.clear();
  argv = sbatch_argv(submit);
  CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string& word) { return word.starts_with("--array"); }));
  CHECK(has(argv, "--output=/shared/50%%x/repo/.git/mullet/jobs/0123456789/dispatch.log"));
  for (const int bad : {0, -1, 17}) {
    submit.array_tasks = {1, bad};
    CHECK_THROWS_AS(sbatch_argv(submit), Error);
  }
  CHECK(mullet::jobs::escape_sbatch_pattern("/a%%b%") == "/a%%%%b%%");
}

TEST_CASE("scontrol's lines: an array's tasks one by one, waiting ones listed together") {
  using mullet::jobs::parse_scontrol_jobs;
  const std::string name = "JobName=mullet-0a1b2c3d.0123456789 ";
  const auto table = parse_scontrol_jobs(
      "JobId=20 ArrayJobId=20 ArrayTaskId=2-3 " + name + "JobState=PENDING Reason=Resources\n" +
      "JobId=21 ArrayJobId=20 ArrayTaskId=1 " + name + "JobState=RUNNING Reason=None BatchHost=node7\n" +
      "JobId=12 JobName=other JobState=RUNNING Reason=None\n" +
      "JobId=30 ArrayJobId=30 ArrayTaskId=1-100000%4 JobName=huge JobState=PENDING Reason=None\n" +
      "No jobs in the system\n");
  CHECK(table.answered);
  CHECK(table.view("20_1", "0123456789").status == SchedulerStatus::running);
  CHECK(table.view("20_1", "0123456789").node == "node7");
  CHECK(table.view("20_2", "0123456789").status == SchedulerStatus::pending);
  CHECK(table.view("20_3", "0123456789").status == SchedulerStatus::pending);
  // Not listed: ended (forgotten).
  CHECK(table.view("20_4", "0123456789").status == SchedulerStatus::ended);
  CHECK(table.view("99", "0123456789").status == SchedulerStatus::ended);
  // The array's own id: its tasks together.
  CHECK(table.view("20", "0123456789").status == SchedulerStatus::running);
  CHECK(table.view("20", "0123456789").name == "mullet-0a1b2c3d.0123456789");
  // Another job's id is foreign.
  CHECK(table.view("12", "0123456789").foreign);
  CHECK(table.view("12", "0123456789").status == SchedulerStatus::ended);
  // Someone's huge array costs a bounded table.
  CHECK(table.jobs.size() < 40);
  CHECK(table.jobs.count("30_16") == 1);
  CHECK(table.jobs.count("30_17") == 0);
  // A task asked for by its own id is that task: ours here, and another
  // job's task elsewhere is foreign, never "forgotten" (which would let
  // cancel through).
  CHECK(table.view("21", "0123456789").status == SchedulerStatus::running);
  const auto someone = parse_scontrol_jobs("JobId=41 ArrayJobId=40 ArrayTaskId=1 JobName=nightly JobState=RUNNING\n");
  CHECK(someone.view("41", "0123456789").foreign);
  CHECK_THROWS_AS(mullet::jobs::require_this_job(someone.view("41", "0123456789"), "41", "0a1b2c3d", "0123456789"),
                  Error);
  // No answer: nothing can be said.
  CHECK(mullet::jobs::SchedulerTable{}.view("20_1", "0123456789").status == SchedulerStatus::unknown);
  // A pending array whose tasks all ended but one.
  const auto waiting = parse_scontrol_jobs("JobId=20 ArrayJobId=20 ArrayTaskId=3 " + name +
                                           "JobState=PENDING Reason=Resources\nJobId=22 ArrayJobId=20 ArrayTaskId=2 " +
                                           name + "JobState=COMPLETED Reason=None\n");
  CHECK(waiting.view("20", "0123456789").status == SchedulerStatus::pending);
  CHECK(mullet::jobs::array_job_of("20_3") == "20");
  CHECK(mullet::jobs::array_job_of("20") == "20");
}
