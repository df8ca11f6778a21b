#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "executors/claude_stream.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/store.hpp"
#include "sandbox/stop_reason.hpp"
#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct ShowOptions {
  std::string job;
  bool json = false;
};

void print_field(std::ostream& out, const std::string& name, const std::string& value) {
  std::string padded = name;
  padded.resize(10, ' ');
  out << padded << value << "\n";
}

// Empty for a record older than the field.
std::string reason_name(const std::optional<sandbox::StopReason>& reason) {
  return reason ? sandbox::stop_name(*reason) : std::string();
}

// A running job's elapsed time, attempt and phase:
// "1m05s, attempt 2/3 · gate tests (for 12s)".
std::string where_it_is(const jobs::JobRecord& record) {
  const std::int64_t now = util::epoch_ms();
  const auto created = util::parse_utc_ms(record.created_at);
  std::string text = (created ? util::format_elapsed(now - *created) : std::string("?")) + " so far";
  // A job of several nodes: each node's place is in its line of the table (and in show JOB/N).
  if (!record.nodes.empty()) return text + ", " + jobs::nodes_summary(record);
  if (!record.progress) return text + ", starting";
  const auto& progress = *record.progress;
  text += ", ";
  if (progress.attempt > 0) {
    text += "attempt " + std::to_string(progress.attempt) + "/" + std::to_string(progress.attempts) + " · ";
  }
  const bool gate = progress.phase.rfind("gate:", 0) == 0;
  text += gate ? "gate " + progress.phase.substr(5) : progress.phase;
  if (const auto since = util::parse_utc_ms(progress.phase_started_at)) {
    text += " (for " + util::format_elapsed(now - *since) + ")";
  }
  return text;
}

// A job of several nodes: one line per node and which one `merge` takes.
void print_nodes(std::ostream& out, const jobs::JobRecord& record) {
  const auto chosen = jobs::chosen_node(record);
  print_field(out, "nodes",
              jobs::nodes_summary(record) +
                  (chosen ? "; merge takes " + jobs::choice_reason(record, *chosen)
                          : "; none is chosen (merge one with: git mullet merge " + record.id + "/N)"));
  for (const auto& node : record.nodes) {
    const auto state = jobs::effective_node_state(record, node);
    std::string line = std::string(chosen && *chosen == node.number ? "* " : "  ") + std::to_string(node.number);
    line.resize(5, ' ');
    std::string executor = node.executor.name + (node.executor.model.empty() ? "" : ":" + node.executor.model);
    executor.resize(std::max<std::size_t>(executor.size() + 1, 18), ' ');
    std::string shown_state = jobs::state_name(state);
    shown_state.resize(13, ' ');
    line += executor + shown_state;
    line += node.result.empty() ? std::string("-           ") : short_sha(node.result);
    if (node.changes) {
      line += "  " + std::to_string(node.changes->files) + " files +" + std::to_string(node.changes->insertions) +
              " -" + std::to_string(node.changes->deletions);
    }
    if (const double cost = node.cost_usd.value_or(node.report.cost_usd); cost > 0) {
      line += "  $" + util::format_decimal(cost);
    }
    const auto started = util::parse_utc_ms(node.started_at);
    const auto ended = util::parse_utc_ms(node.finished_at);
    if (started && ended) line += "  " + util::format_elapsed(*ended - *started);
    if (!node.error.empty()) line += "  " + util::first_line(node.error, 120);
    if (state == jobs::JobState::running && node.progress) {
      line +=
          "  now: " +
          (node.progress->attempt > 0 ? "attempt " + std::to_string(node.progress->attempt) + " · " : std::string()) +
          node.progress->phase;
    }
    out << line << "\n";
  }
}

// A dispatched job: its scheduler's id, the node that took it up, and why the
// scheduler ended it when it did.
std::string dispatch_line(const jobs::JobRecord& record, jobs::JobState state) {
  const auto& dispatch = *record.dispatch;
  std::string reason = dispatch.reason;
  if (reason.empty() && state == jobs::JobState::interrupted) reason = jobs::interrupted_reason(record);
  return dispatch.engine + " job " + (dispatch.scheduler_id.empty() ? "(not submitted yet)" : dispatch.scheduler_id) +
         (dispatch.node.empty() ? "" : " on " + dispatch.node) + (reason.empty() ? "" : " (" + reason + ")");
}

int show(const ShowOptions& options) {
  const git::Repository repo = open_repository();
  const auto job = find_addressed(jobs::JobStore(repo), options.job);
  const auto& record = job.record;
  if (options.json) {
    nlohmann::json json = job_json(record);
    if (job.node != 0) json["node"] = job.node;
    std::cout << json.dump(2) << "\n";
    return 0;
  }
  // Nearly every field was chosen by the worker, the repository or whoever
  // wrote the record: all of it is made safe for the terminal at once.
  std::ostringstream out;
  const auto state = jobs::effective_state(record);
  print_field(out, "job", job.label);
  print_field(out, "title", record.title);
  print_field(out, "state", jobs::state_name(state) + (state == jobs::JobState::no_changes ? " (no changes)" : ""));
  if (state == jobs::JobState::running) print_field(out, "now", where_it_is(record));
  if (record.dispatch) print_field(out, "dispatch", dispatch_line(record, state));
  print_field(out, "base",
              record.base + (record.base_uncommitted ? " (uncommitted changes on " + short_sha(record.base_head) +
                                                           ", --include-uncommitted)"
                                                     : ""));
  print_field(out, "result", record.result.empty() ? "none" : record.result);
  print_field(out, "executor",
              record.executor.name + (record.executor.command.empty() ? "" : ": " + record.executor.command) +
                  (record.executor.version.empty() ? "" : " (" + record.executor.version + ")"));
  // The model asked for, and what the worker said it used when that differs.
  const std::string& asked = record.executor.model;
  const std::string& used = record.report.model;
  if (!asked.empty() || !used.empty()) {
    print_field(out, "model",
                asked.empty()                   ? used + " (the worker's choice)"
                : used.empty() || used == asked ? asked
                                                : asked + " (the worker reported " + used + ")");
  }
  print_field(out, "created", record.created_at);
  print_field(out, "finished", record.finished_at.empty() ? "-" : record.finished_at);
  if (!record.error.empty()) print_field(out, "error", record.error);
  const auto& report = record.report;
  if (!report.empty()) {
    if (!report.status.empty())
      print_field(out, "outcome", report.status + ": " + util::first_line(report.summary, 200));
    print_field(out, "turns",
                std::to_string(report.turns) + ", $" + util::format_decimal(report.cost_usd) +
                    (report.model.empty() ? "" : ", model " + report.model));
    for (const auto& denial : report.permission_denials) {
      print_field(out, "refused", executors::claude::describe_denial(denial));
    }
  }
  if (!record.nodes.empty()) print_nodes(out, record);
  if (!record.phases.empty()) {
    out << "phases:\n";
    for (const auto& phase : record.phases) {
      out << "  " << phase.name << "  " << reason_name(phase.ended_by) << " " << phase.exit_code << "  "
          << static_cast<double>(phase.duration_ms) / 1000.0 << "s\n";
    }
  }
  bool any_gate = false;
  for (const auto& attempt : record.attempts) any_gate = any_gate || !attempt.gates.empty();
  if (record.attempts.size() > 1 || any_gate) {
    out << "attempts:\n";
    for (const auto& attempt : record.attempts) {
      out << "  " << attempt.number << "  " << (attempt.result.empty() ? "no changes" : short_sha(attempt.result))
          << (attempt.kind == jobs::AttemptKind::shell ? "  (git mullet shell --record)" : "")
          << (attempt.error.empty() ? "" : "  " + attempt.error) << "\n";
      if (!attempt.instruction.empty()) out << "     continued: " << util::first_line(attempt.instruction, 100) << "\n";
      for (const auto& gate : attempt.gates) {
        std::string verdict = gate.passed ? "pass" : "FAIL";
        std::string how = gate.ended_by == sandbox::StopReason::exit ? "exit " + std::to_string(gate.exit_code)
                                                                     : reason_name(gate.ended_by);
        out << "     " << verdict << "  " << gate.name << "  (" << how << ", "
            << util::format_decimal(static_cast<double>(gate.duration_ms) / 1000.0, 1) << "s, on "
            << short_sha(gate.commit) << ")\n";
        if (!gate.passed) {
          for (const auto& line : util::split(util::trim(util::tail(gate.output_tail, 600)), '\n')) {
            out << "           | " << line << "\n";
          }
        }
      }
    }
  }
  for (const auto& warning : record.snapshot_warnings) out << "warning: " << warning << "\n";
  out << "prompt:\n";
  for (const auto& line : util::split(util::trim(record.prompt), '\n')) out << "  " << line << "\n";
  std::cout << util::terminal_safe(out.str());
  return 0;
}

}  // namespace

void add_show_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* sub = app.add_subcommand("show", "Show one job's record");
  sub->add_option("JOB", options->job, "Job id or unique prefix; JOB/N for node N of a job of several")->required();
  sub->add_flag("--json", options->json, "Print the record as one JSON object");
  sub->callback([options, &chosen] { chosen = [options] { return show(*options); }; });
}

}  // namespace mullet::cli
