#include "jobs/nodes.hpp"

#include <algorithm>

#include "jobs/liveness.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {

namespace {

// What a node and a job of one node both hold, in one list, copied either
// way: a field added to both is seen by node_view and node_from_view alike.
template <typename From, typename To>
void copy_run_fields(const From& from, To& to) {
  to.executor = from.executor;
  to.state = from.state;
  to.result = from.result;
  to.error = from.error;
  to.finished_at = from.finished_at;
  to.phases = from.phases;
  to.snapshot_warnings = from.snapshot_warnings;
  to.report = from.report;
  to.cost_usd = from.cost_usd;
  to.attempts = from.attempts;
  to.changes = from.changes;
  to.progress = from.progress;
}

}  // namespace

JobRecord node_view(const JobRecord& job, int number) {
  const NodeRecord& node = job.nodes.at(static_cast<std::size_t>(number - 1));
  JobRecord view = job;
  view.nodes.clear();
  copy_run_fields(node, view);
  return view;
}

NodeRecord node_from_view(const JobRecord& view, int number) {
  NodeRecord node;
  node.number = number;
  copy_run_fields(view, node);
  return node;
}

void store_node(JobRecord& job, const JobRecord& view, int number) {
  NodeRecord& node = job.nodes.at(static_cast<std::size_t>(number - 1));
  const std::string started_at = node.started_at;
  node = node_from_view(view, number);
  node.started_at = started_at;
  settle_job(job);
}

std::optional<int> choose_node(const std::vector<NodeStanding>& nodes) {
  const NodeStanding* best = nullptr;
  for (const auto& node : nodes) {
    if (!node.passed) continue;
    if (best == nullptr || node.changed_lines < best->changed_lines ||
        (node.changed_lines == best->changed_lines &&
         (node.cost_usd < best->cost_usd || (node.cost_usd == best->cost_usd && node.number < best->number)))) {
      best = &node;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->number;
}

namespace {

NodeStanding standing(const NodeRecord& node) {
  const std::int64_t lines = node.changes ? node.changes->insertions + node.changes->deletions : 0;
  return {node.number, node.state == JobState::succeeded, lines, node.cost_usd.value_or(node.report.cost_usd)};
}

}  // namespace

std::optional<int> chosen_node(const JobRecord& job) {
  std::vector<NodeStanding> nodes;
  for (const auto& node : job.nodes) nodes.push_back(standing(node));
  return choose_node(nodes);
}

std::string choice_reason(const JobRecord& job, int number) {
  const NodeStanding chosen = standing(job.nodes.at(static_cast<std::size_t>(number - 1)));
  std::size_t passed = 0;
  std::size_t same_lines = 0;
  for (const auto& node : job.nodes) {
    const NodeStanding other = standing(node);
    if (!other.passed) continue;
    ++passed;
    if (other.changed_lines == chosen.changed_lines) ++same_lines;
  }
  std::string why = "node " + std::to_string(number) + ": passed every gate, " + std::to_string(chosen.changed_lines) +
                    " changed lines";
  if (passed == 1) return why + " (the only node that passed)";
  why += " (fewest of " + std::to_string(passed) + " that passed";
  if (same_lines > 1) why += "; then lowest cost, then lowest number";
  return why + ")";
}

void settle_job(JobRecord& job) {
  if (job.nodes.empty()) return;
  std::optional<double> cost;
  for (const auto& node : job.nodes) {
    if (node.cost_usd) cost = cost.value_or(0) + *node.cost_usd;
  }
  job.cost_usd = cost;
  job.phases.clear();
  job.attempts.clear();
  job.snapshot_warnings.clear();
  job.report = {};
  job.progress.reset();
  const auto chosen = chosen_node(job);
  const NodeRecord& shown = job.nodes.at(chosen ? static_cast<std::size_t>(*chosen - 1) : 0);
  job.executor = shown.executor;
  job.result = chosen ? shown.result : std::string();
  job.changes = chosen ? shown.changes : std::nullopt;
  job.error.clear();
  const auto any = [&](JobState state) {
    return std::any_of(job.nodes.begin(), job.nodes.end(), [&](const NodeRecord& node) { return node.state == state; });
  };
  if (any(JobState::running)) {
    job.state = JobState::running;
    return;
  }
  if (chosen) {
    job.state = JobState::succeeded;
    return;
  }
  job.state = JobState::failed;
  for (const JobState state :
       {JobState::no_changes, JobState::interrupted, JobState::cancelled, JobState::failed, JobState::refused}) {
    if (any(state)) {
      job.state = state;
      break;
    }
  }
  if (job.state == JobState::no_changes) return;
  std::vector<std::string> each;
  for (const auto& node : job.nodes) {
    each.push_back("node " + std::to_string(node.number) + " " + state_name(node.state) +
                   (node.error.empty() ? "" : ": " + util::first_line(node.error, 160)));
  }
  job.error = "no node passed every gate (" + util::join(each, "; ") + ")";
}

namespace {

// For a whole record and its summary alike: the fields are the same.
template <typename Record, typename Node>
JobState effective_node_state_of(const Record& job, const Node& node) {
  if (node.state == JobState::running && !runner_alive(job.runner)) return JobState::interrupted;
  return node.state;
}

template <typename Record>
std::string nodes_summary_of(const Record& job) {
  std::size_t passed = 0;
  std::size_t running = 0;
  for (const auto& node : job.nodes) {
    const JobState state = effective_node_state_of(job, node);
    if (state == JobState::succeeded) ++passed;
    if (state == JobState::running) ++running;
  }
  const std::string count = "/" + std::to_string(job.nodes.size());
  if (running > 0) return std::to_string(running) + count + " running";
  return std::to_string(passed) + count + " passed";
}

}  // namespace

JobState effective_node_state(const JobRecord& job, const NodeRecord& node) {
  return effective_node_state_of(job, node);
}
JobState effective_node_state(const RecordSummary& job, const NodeSummary& node) {
  return effective_node_state_of(job, node);
}
std::string nodes_summary(const JobRecord& job) {
  return nodes_summary_of(job);
}
std::string nodes_summary(const RecordSummary& job) {
  return nodes_summary_of(job);
}

std::string node_ending(JobState state, const std::optional<ChangeStats>& changes, const std::string& error) {
  std::string ended = state_name(state);
  if (changes) {
    ended += " · " + std::to_string(changes->files) + " files +" + std::to_string(changes->insertions) + " -" +
             std::to_string(changes->deletions);
  }
  if (!error.empty()) ended += " · " + util::first_line(error, 160);
  return ended;
}

}  // namespace mullet::jobs
