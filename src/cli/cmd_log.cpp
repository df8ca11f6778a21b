#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "executors/claude_stream.hpp"
#include "executors/executor.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/phases.hpp"
#include "jobs/store.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct LogOptions {
  std::string job;
  bool raw = false;
};

// One job's, or one node's, log: its events readably, then its other output
// (`raw`: both as recorded).
std::string one_log(const git::Repository& repo, const jobs::JobStore& store, const cli::Addressed& job, int node,
                    bool raw) {
  std::optional<std::string> text;
  std::optional<std::string> events;
  const std::string prefix = node == 0 ? "" : "node-" + std::to_string(node) + ".";
  // While the job runs, its output is only in the scratch directory: as much
  // of it as the record will keep, however large the files have grown.
  if (jobs::effective_state(job.record) == jobs::JobState::running) {
    const auto paths =
        node == 0 ? jobs::job_paths(repo, job.job.record.id) : jobs::node_paths(repo, job.job.record.id, node);
    text = util::read_file_tail(paths.worker_log, jobs::worker_log_cap);
    events = util::read_file_tail(paths.events_log, jobs::events_log_cap);
  }
  if (!text) text = store.read_file(job.job, prefix + "worker.log");
  if (!events) events = store.read_file(job.job, prefix + "events.jsonl");
  // As recorded, bytes and all: for a program, or a person who asked.
  if (raw) return events.value_or("") + text.value_or("");
  std::string out;
  if (events) {
    executors::claude::EventSplitter splitter;
    auto parsed = splitter.feed(*events);
    for (auto& event : splitter.finish()) parsed.push_back(std::move(event));
    for (const auto& event : parsed) out += executors::render_event(job.record.executor.name, event);
    if (splitter.bad_lines() > 0) out += "(" + std::to_string(splitter.bad_lines()) + " lines were not events)\n";
    if (text && !text->empty()) out += "== the worker's other output:\n";
  }
  return out + text.value_or("");
}

int log(const LogOptions& options) {
  const git::Repository repo = open_repository();
  const jobs::JobStore store(repo);
  const auto job = find_addressed(store, options.job);
  std::string out;
  if (job.node == 0 && !job.record.nodes.empty()) {
    // Every node's, one after another, each under a header.
    for (const auto& node : job.record.nodes) {
      Addressed one = job;
      one.record = jobs::node_view(job.record, node.number);
      if (!options.raw) {
        out += "== node " + std::to_string(node.number) + " (" + node.executor.name + ", " +
               jobs::state_name(jobs::effective_state(one.record)) + ")\n";
      }
      out += one_log(repo, store, one, node.number, options.raw);
    }
  } else {
    out = one_log(repo, store, job, job.node, options.raw);
  }
  if (options.raw) {
    std::cout << out;
  } else {
    std::cout << util::terminal_safe(out);
  }
  return 0;
}

}  // namespace

void add_log_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<LogOptions>();
  CLI::App* sub = app.add_subcommand("log", "Print what the worker did (its events, readably) and its output");
  sub->add_option("JOB", options->job, "Job id or unique prefix; JOB/N for node N of a job of several")->required();
  sub->add_flag("--raw", options->raw,
                "Print the worker's event stream and output as recorded (raw bytes, escape sequences included)");
  sub->callback([options, &chosen] { chosen = [options] { return log(*options); }; });
}

}  // namespace mullet::cli
