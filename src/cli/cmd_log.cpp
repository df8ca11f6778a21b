#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "executors/claude_stream.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "util/fs.hpp"

namespace mullet::cli {
namespace {

struct LogOptions {
  std::string job;
  bool raw = false;
};

int log(const LogOptions& options) {
  const git::Repository repo = open_repository();
  const jobs::JobStore store(repo);
  const auto job = store.find(options.job);
  std::optional<std::string> text;
  std::optional<std::string> events;
  // While the job runs, its output is only in the scratch directory.
  if (jobs::effective_state(job.record) == jobs::JobState::running) {
    const auto paths = jobs::job_paths(repo, job.record.id);
    text = util::read_file_if_exists(paths.worker_log);
    events = util::read_file_if_exists(paths.events_log);
  }
  if (!text) text = store.read_file(job, "worker.log");
  if (!events) events = store.read_file(job, "events.jsonl");
  if (events && options.raw) {
    std::cout << *events;
  } else if (events) {
    executors::claude::EventSplitter splitter;
    auto parsed = splitter.feed(*events);
    for (auto& event : splitter.finish()) parsed.push_back(std::move(event));
    for (const auto& event : parsed) std::cout << executors::claude::render_event(event);
    if (splitter.bad_lines() > 0) std::cout << "(" << splitter.bad_lines() << " lines were not events)\n";
    if (text && !text->empty()) std::cout << "== the worker's other output:\n";
  }
  std::cout << text.value_or("");
  return 0;
}

}  // namespace

void add_log_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<LogOptions>();
  CLI::App* sub = app.add_subcommand("log", "Print what the worker did (its events, readably) and its output");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--raw", options->raw, "Print the worker's event stream as it was recorded (JSON lines)");
  sub->callback([options, &chosen] { chosen = [options] { return log(*options); }; });
}

}  // namespace mullet::cli
