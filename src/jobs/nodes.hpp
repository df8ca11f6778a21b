// A job of several nodes (`run --nodes N`, `--node`): each node's record seen
// as a job's (so one node runs as a job of one does), the job as a whole
// settled from its nodes, and the rule that chooses the node `merge` takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jobs/record.hpp"

namespace mullet::jobs {

// The job's record with node `number`'s fields in place of its own (state,
// result, error, phases, attempts, report, cost, changes, progress, executor,
// started_at as created_at, finished_at) and no nodes: what a node's run
// reads and writes.
JobRecord node_view(const JobRecord& job, int number);
// Node `number` as `view` (from node_view) left it.
NodeRecord node_from_view(const JobRecord& view, int number);
// Puts `view` back as node `number` and settles the job (settle_job).
void store_node(JobRecord& job, const JobRecord& view, int number);

// What the choosing rule weighs of one node.
struct NodeStanding {
  int number = 0;
  bool passed = false;             // it ended succeeded: every gate passed
  std::int64_t changed_lines = 0;  // insertions + deletions against the base
  double cost_usd = 0;
};
// The chosen node: one that passed; ties go to the fewest changed lines,
// then the lowest cost, then the lowest number. nullopt when none passed.
std::optional<int> choose_node(const std::vector<NodeStanding>& nodes);
// The rule applied to the job's nodes as recorded (a node's cost is what the
// credential endpoint metered, else what its worker reported).
std::optional<int> chosen_node(const JobRecord& job);
// One line saying why: "node 2: passed every gate, 12 changed lines (fewest of 3 that passed)".
std::string choice_reason(const JobRecord& job, int number);

// The job as a whole from its nodes: running while one runs; else succeeded
// with the chosen node's result and changes; else the first of no_changes,
// interrupted, cancelled, failed and refused a node ended in, with an error
// naming each node's. cost_usd is the nodes' together; the executor is the
// chosen node's, else the first node's.
void settle_job(JobRecord& job);

// A node's state as shown: running with its job's runner gone is interrupted.
JobState effective_node_state(const JobRecord& job, const NodeRecord& node);
JobState effective_node_state(const RecordSummary& job, const NodeSummary& node);
// "3/4 passed", or "2/4 running" while nodes run.
std::string nodes_summary(const JobRecord& job);
std::string nodes_summary(const RecordSummary& job);

// How a node ended, as `run` and `wait` tell it: "failed · 2 files +3 -1 ·
// <the error's first line>".
std::string node_ending(JobState state, const std::optional<ChangeStats>& changes, const std::string& error);

}  // namespace mullet::jobs
