// The job record: plain data, stored as JSON in git (see jobs/store.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executors/report.hpp"
#include "sandbox/stop_reason.hpp"
#include "util/error.hpp"

namespace mullet::jobs {

// The longest title a record keeps.
inline constexpr std::size_t title_max_bytes = 1024;

// `queued`: a dispatched job the scheduler has not started yet (its record
// written by the host, no runner yet).
enum class JobState { running, succeeded, no_changes, failed, refused, cancelled, interrupted, queued };

// Running or queued: the job has not ended.
bool is_active(JobState state);
// What a record may hold as a scheduler's job id (empty, digits, digits_digits)
// and as a node's host name (empty, letters, digits, '.', '-').
bool is_scheduler_id(const std::string& text);
bool is_host_name(const std::string& text);

std::string state_name(JobState state);
std::optional<JobState> parse_state(const std::string& name);
// The state a job ends in when one of its phases ended for `reason` and
// failed: cancelled, refused (the wall check, or the worker as its executor
// saw it start), else failed.
JobState state_after(sandbox::StopReason reason);
// What `run`, `resume` and `wait` exit with for a job in `state`.
int exit_code_for(JobState state);

// What a phase sent upstream, through its egress proxy and its credential
// endpoint together, and the job's cap on it (limits.egress_mb).
struct UploadRecord {
  std::uint64_t limit_bytes = 0;
  std::uint64_t before_bytes = 0;                 // what the job's earlier phases sent
  std::map<std::string, std::uint64_t> bytes_up;  // this phase's, by destination ("host:port")
  std::uint64_t total() const;                    // this phase's
  bool operator==(const UploadRecord&) const = default;
};

struct PhaseRecord {
  std::string name;  // setup, worker, gate:<name>
  std::vector<std::string> command;
  int exit_code = -1;
  std::optional<sandbox::StopReason> ended_by;  // unset in records that predate it
  std::int64_t duration_ms = 0;
  std::string output_tail;                           // the last part of its output
  std::vector<std::string> grants;                   // network destinations it was granted
  nlohmann::json network = nlohmann::json::array();  // the egress proxy's decisions
  // The credential endpoint's account (upstream, budget, totals, requests);
  // null when the phase had none.
  nlohmann::json api;
  // Unset when the phase had neither an egress proxy nor an endpoint.
  std::optional<UploadRecord> upload;
  // The most memory its sandbox's cgroup held (the kernel's count); unset
  // without a cgroup.
  std::optional<std::uint64_t> memory_peak_bytes = std::nullopt;
};

// One gate's run against one attempt's tree.
struct GateRecord {
  std::string name;
  std::string command;
  std::string commit;  // the commit whose tree it ran against
  bool passed = false;
  int exit_code = -1;
  std::optional<sandbox::StopReason> ended_by;  // unset in records that predate it
  std::int64_t duration_ms = 0;
  std::string output_tail;
};

// What made an attempt: the worker, or a person in `git mullet shell
// --record` (no gates judged it).
enum class AttemptKind { worker, shell };

// One run of the worker, its snapshot and the gates that judged it.
struct AttemptRecord {
  int number = 0;
  std::string result;  // this attempt's snapshot commit; empty when the tree was the base's
  std::string error;   // empty when the worker succeeded
  std::vector<GateRecord> gates;
  // The user's new instruction when `run --continue` started this attempt;
  // empty for attempts of the job's own task.
  std::string instruction;
  AttemptKind kind = AttemptKind::worker;
};

// What an executor produces (executors/report.hpp), as the record keeps it.
using ExecutorRecord = executors::ExecutorRecord;
using WorkerReport = executors::WorkerReport;

// Who is running the job, so a later reader can tell a live job from one whose
// runner died (pid reuse is ruled out by the process start time).
struct RunnerRecord {
  int pid = 0;
  std::uint64_t start_ticks = 0;
  std::string boot_id;
  // The repository_key (jobs/layout.hpp) of the repository whose git-mullet
  // it is: a record copied to another repository on this host still names a
  // live process, which that repository's stop must not signal. Empty in
  // records written before it.
  std::string repository;
};

// What the result changed against the base (`git diff --shortstat`).
struct ChangeStats {
  std::int64_t files = 0;
  std::int64_t insertions = 0;
  std::int64_t deletions = 0;
  bool operator==(const ChangeStats&) const = default;
};

// Where a running job is, for `show` and `wait`: written when a phase starts.
struct LiveProgress {
  std::string phase;  // setup, worker, gate:<name>
  int attempt = 0;    // 0 before the first attempt (setup)
  int attempts = 0;   // the last attempt this run may reach
  std::string phase_started_at;
  bool operator==(const LiveProgress&) const = default;
};

// The most nodes a job may have (`run --nodes N`, `--node`).
inline constexpr int max_nodes = 16;

// A job dispatched to a scheduler (`run --on slurm`): which engine, the
// scheduler's own id for it, the node that claimed it, and why the
// scheduler ended it when it did before the job did.
struct DispatchRecord {
  std::string engine;        // "slurm"
  std::string scheduler_id;  // Slurm's job id (digits, `_N` for an array task)
  std::string node;          // the host name of the node that runs it; empty while queued
  std::string reason;        // the scheduler's word when it ended the job (TIMEOUT, NODE_FAIL...)
  bool operator==(const DispatchRecord&) const = default;
};

// One node of a job of several (`run --nodes N`, `--node`): the same task,
// run in a clone of its own, with its own sandbox, attempts, gates and logs.
// The fields mean what JobRecord's fields of the same names mean for a job of
// one node, and are copied between the two in one place (nodes.cpp,
// copy_run_fields).
struct NodeRecord {
  int number = 0;  // 1..max_nodes, its place in JobRecord::nodes
  ExecutorRecord executor;
  JobState state = JobState::running;
  std::string result;  // full sha, empty when there is none
  std::string error;
  std::string started_at;   // empty until it held a slot
  std::string finished_at;  // empty while running
  std::vector<PhaseRecord> phases;
  std::vector<std::string> snapshot_warnings;
  WorkerReport report;
  std::optional<double> cost_usd;
  std::vector<AttemptRecord> attempts;
  std::optional<ChangeStats> changes;
  std::optional<LiveProgress> progress;
  // A node of a job dispatched as a job array (`run --on slurm --nodes N`):
  // its array task (`<array id>_<N>` of the array that last ran it), the
  // host that claimed it, the scheduler's word when it ended it. Unset for
  // a job run where it was started.
  std::optional<DispatchRecord> dispatch;
};

// The reason a dispatched job's record holds once `git mullet stop` asked its
// scheduler to cancel it: the node then ends it `cancelled`; a SIGTERM from
// the scheduler without it (scancel from outside, time limit, preemption)
// ends it `interrupted`.
inline constexpr const char* stop_requested_reason = "git mullet stop";

struct JobRecord;
// `stored = now`, but a dispatched job's `dispatch` stays as stored: the host
// writes its part (a stop's mark) while the node runs the job. A dispatched
// job that `now` says was cancelled without that mark was ended by its
// scheduler: it is stored interrupted, in the same write, so no reader ever
// sees it cancelled first.
void overwrite_keeping_dispatch(JobRecord& stored, const JobRecord& now);

struct JobRecord {
  int format = 1;
  std::string id;
  std::string title;
  std::string prompt;
  JobState state = JobState::running;
  std::string base;  // full sha
  // run --include-uncommitted: the base is a commit of the work tree's
  // uncommitted changes whose only parent is base_head (HEAD then).
  bool base_uncommitted = false;
  std::string base_head;  // full sha; empty unless base_uncommitted
  std::string result;     // full sha, empty when there is none
  ExecutorRecord executor;
  // Its place among this repository's jobs (1, 2, ...; 0 in records that
  // predate it): orders jobs created within one clock tick.
  std::int64_t sequence = 0;
  std::string created_at;   // RFC 3339 UTC, with milliseconds since sequence exists
  std::string finished_at;  // empty while running
  std::string error;        // empty unless failed or refused
  std::vector<PhaseRecord> phases;
  std::vector<std::string> snapshot_warnings;
  RunnerRecord runner;
  // Unset for a job run where it was started.
  std::optional<DispatchRecord> dispatch;
  // The host uid its sandboxes ran as (root only: one of [sandbox] uid's
  // range, its own while it ran); unset when they ran as the invoking user.
  std::optional<std::int64_t> sandbox_uid;
  WorkerReport report;  // the last attempt's
  // What the credential endpoint measured the worker's API requests to cost,
  // every attempt together (the report keeps the worker's own figure);
  // unset when no phase had an endpoint.
  std::optional<double> cost_usd;
  std::vector<AttemptRecord> attempts;
  // Unset without a result, and in records that predate it.
  std::optional<ChangeStats> changes;
  // Unset once the job ended (and in records that predate it).
  std::optional<LiveProgress> progress;
  // What the command line added to the configuration, so `resume` runs the
  // job as it was started: {"config": {key: value}, "gates": [{name, command,
  // timeout}]}.
  nlohmann::json run_flags = nlohmann::json::object();
  // Empty for a job of one node (every job before nodes existed). A job of
  // several keeps each node here, and its own fields describe the job as a
  // whole (jobs/nodes.hpp: settle_job): state and error, the chosen node's
  // result and changes, the nodes' cost together; phases, attempts, report
  // and snapshot_warnings stay empty.
  std::vector<NodeRecord> nodes;
};

// A record that is not one git-mullet writes. Records travel with
// `git fetch 'refs/mullet/*'`, so every field is hostile input until checked.
class DamagedRecord : public Error {
 public:
  DamagedRecord(std::string job, const std::string& field, std::string problem);
  const std::string& job() const { return m_job; }
  const std::string& field() const { return m_field; }
  const std::string& problem() const { return m_problem; }

 private:
  DamagedRecord(std::string job, std::string field, std::string problem, int);
  std::string m_job;
  std::string m_field;
  std::string m_problem;
};

// The keys `run` records in run_flags.config, which `resume` may replay.
const std::vector<std::string>& replayable_run_flags();

nlohmann::json to_json(const JobRecord& record);
// Checks every field for type, size and content and throws DamagedRecord
// (naming `job`, the field and the problem) at the first one that is wrong.
// Missing optional fields take their defaults (records written by older
// versions); id, state and base are required.
JobRecord record_from_json(const nlohmann::json& json, const std::string& job = {});
// True for a full lowercase hex object id.
bool is_object_id(const std::string& text);

// A node as its job's summary names it.
struct NodeSummary {
  int number = 0;
  JobState state = JobState::running;
  std::string result;
};

// The small subset of a record `list` needs (what it shows and orders by,
// and what tells whether a running job still runs), kept in the record
// commit's message. `list` holds one for every job, so it is a type of its
// own, a twentieth of a JobRecord's size with nothing allocated by default.
struct RecordSummary {
  int format = 1;
  std::string id;
  std::string title;
  JobState state = JobState::running;
  std::string base;
  std::string result;
  std::string executor;  // its name
  std::int64_t sequence = 0;
  std::string created_at;
  std::string finished_at;
  std::string error;
  RunnerRecord runner;
  std::optional<double> cost_usd;
  std::optional<ChangeStats> changes;
  std::optional<DispatchRecord> dispatch;
  std::vector<NodeSummary> nodes;
};

RecordSummary summary_of(const JobRecord& record);
nlohmann::json summary_json(const RecordSummary& summary);
nlohmann::json summary_json(const JobRecord& record);

}  // namespace mullet::jobs
