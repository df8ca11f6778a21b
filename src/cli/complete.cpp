#include "cli/complete.hpp"

#include <algorithm>
#include <iostream>

#include "cli/common.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/resume.hpp"
#include "jobs/store.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

// Whether `command` takes this job (what it would refuse is not offered).
bool accepts(const std::string& command, bool has_result, jobs::JobState state) {
  if (command == "merge") return state != jobs::JobState::running && has_result;
  if (command == "diff") return has_result;
  if (command == "resume") return jobs::resumable(state);
  if (command == "continue") return jobs::continuable(state);  // run --continue
  if (command == "stop") return state == jobs::JobState::running;
  if (command == "shell") return state != jobs::JobState::running;
  return true;  // show, log, wait, discard
}

// The commands that take JOB/N.
bool takes_nodes(const std::string& command) {
  return command == "merge" || command == "diff" || command == "log" || command == "show" || command == "resume";
}

// A title on one line with no tab: it is a field of the line.
std::string one_field(const std::string& text) {
  std::string line = util::first_line(text, 60);
  std::replace(line.begin(), line.end(), '\t', ' ');
  return line;
}

}  // namespace

int complete_jobs(const std::string& command) {
  try {
    const git::Repository repo = open_repository();
    auto summaries = jobs::JobStore(repo).summaries();
    std::sort(summaries.begin(), summaries.end(),
              [](const auto& a, const auto& b) { return a.record.created_at > b.record.created_at; });
    std::string out;
    for (const auto& job : summaries) {
      if (!job.damage.empty()) {
        if (command == "discard") out += job.id + "\tdamaged\n";
        continue;
      }
      const auto state = jobs::effective_state(job.record);
      if (accepts(command, !job.record.result.empty(), state)) {
        out += job.id + "\t" + jobs::state_name(state) + " " + one_field(job.record.title) + "\n";
      }
      // A node of a job of several, where the command takes one: JOB/N.
      if (!takes_nodes(command)) continue;
      for (const auto& node : job.record.nodes) {
        const auto node_state = jobs::effective_node_state(job.record, node);
        if (!accepts(command, !node.result.empty(), node_state)) continue;
        out += job.id + "/" + std::to_string(node.number) + "\t" + jobs::state_name(node_state) + " node " +
               std::to_string(node.number) + " of " + one_field(job.record.title) + "\n";
      }
    }
    // Titles are the jobs' (a fetched record's: anyone's).
    std::cout << util::terminal_safe(out);
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace mullet::cli
