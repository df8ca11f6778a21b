#include "cli/common.hpp"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "jobs/dispatch.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/resume.hpp"
#include "jobs/run_flags.hpp"
#include "jobs/store.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {

git::Repository open_repository() {
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) throw usage_error("cannot read the current directory");
  return git::Repository::discover(cwd);
}

config::Config load_config(const git::Repository* repo, const std::optional<git_oid>& base) {
  auto files = read_config_files(repo, base);
  auto problems = files.user_problems;
  problems.insert(problems.end(), files.repo_problems.begin(), files.repo_problems.end());
  config::throw_if_problems(problems);
  // Said before the job starts: a repository asked for more than you allow.
  for (const auto& warning : files.config.warnings()) spdlog::warn("{}", warning);
  return std::move(files.config);
}

ConfigFiles read_config_files(const git::Repository* repo, const std::optional<git_oid>& base) {
  ConfigFiles files;
  config::Config& config = files.config;
  const auto location = config::user_config_location();
  std::optional<std::string> user_text;
  try {
    // /dev/null, as for GIT_CONFIG_GLOBAL, says "no user config"; every other
    // non-regular file is refused.
    user_text = location.path == "/dev/null" ? std::string()
                                             : util::read_regular_file_if_exists(location.path, config::max_file_bytes);
  } catch (const Error& error) {
    throw usage_error(std::string("cannot read your config file: ") + error.what());
  }
  if (!user_text && location.explicit_path) {
    throw usage_error("GIT_MULLET_CONFIG names " + location.path + ", which does not exist");
  }
  // /dev/null reads as an empty file: it says "no user file".
  files.user_file_exists = user_text.has_value() && location.path != "/dev/null";
  if (user_text) files.user_problems = config.merge_toml(*user_text, location.path, config::Source::user_file);
  if (repo != nullptr && base) {
    if (auto repo_text = repo->read_file_at(*base, ".mullet.toml", config::max_file_bytes)) {
      files.repo_file_exists = true;
      const std::string label = ".mullet.toml@" + short_sha(git::oid_to_string(*base));
      // A rejected file leaves nothing of itself behind.
      config::Config with_repo = config;
      files.repo_problems = with_repo.merge_toml(*repo_text, label, config::Source::repo_file);
      if (files.repo_problems.empty()) config = std::move(with_repo);
    }
  }
  return files;
}

nlohmann::json job_json(const jobs::JobRecord& record) {
  nlohmann::json json = jobs::to_json(record);
  json["state"] = jobs::state_name(jobs::effective_state(record));
  if (!record.nodes.empty()) {
    for (std::size_t n = 0; n < record.nodes.size() && n < json["nodes"].size(); ++n) {
      json["nodes"][n]["state"] = jobs::state_name(jobs::effective_node_state(record, record.nodes[n]));
    }
    const auto chosen = jobs::chosen_node(record);
    json["chosen_node"] = chosen ? nlohmann::json(*chosen) : nlohmann::json();
  }
  return json;
}

Addressed find_addressed(const jobs::JobStore& store, const std::string& address) {
  auto [job, node] = store.find_address(address);
  Addressed found{job, node, job.record, job.record.id};
  if (node != 0) {
    found.record = jobs::node_view(job.record, node);
    found.label = job.record.id + "/" + std::to_string(node);
  }
  return found;
}

std::string short_sha(const std::string& sha) {
  return sha.substr(0, 12);
}

namespace {

// The last attempt's gates in one line: "tests pass · lint FAIL".
std::string gates_line(const jobs::JobRecord& record) {
  if (record.attempts.empty()) return {};
  std::string line;
  for (const auto& gate : record.attempts.back().gates) {
    if (!line.empty()) line += " · ";
    line += util::first_line(gate.name, 60) + (gate.passed ? " pass" : " FAIL");
  }
  return line;
}

// What to do next, by how the job ended.
std::string next_steps(const jobs::JobRecord& record) {
  const std::string& id = record.id;
  const bool succeeded = record.state == jobs::JobState::succeeded;
  const bool resumable = record.state == jobs::JobState::failed || record.state == jobs::JobState::cancelled ||
                         record.state == jobs::JobState::interrupted;
  std::string steps;
  if (!record.result.empty()) {
    steps += "  review:  git mullet diff " + id + "\n";
    steps += "  take it: git mullet merge " + std::string(succeeded ? "" : "--force ") + id + "\n";
  }
  if (resumable) steps += "  go on:   git mullet resume " + id + "\n";
  if (!succeeded && record.state != jobs::JobState::no_changes) {
    steps += "  look:    git mullet show " + id + "  (and git mullet log " + id + ")\n";
  }
  return steps;
}

}  // namespace

void print_job_outcome(const jobs::JobRecord& record, const std::string& hint, bool json, bool failed) {
  // The error, hint and warnings quote the worker (its summary, file names).
  if (json) {
    // The record carries the error as data; a person reading stderr still
    // hears it, once.
    if (!record.error.empty()) {
      std::string text =
          "git mullet: job " + record.id + " " + jobs::state_name(record.state) + ": " + record.error + "\n";
      if (!hint.empty()) text += "hint: " + hint + "\n";
      std::cerr << util::terminal_safe(text);
    }
    std::cout << job_json(record).dump(2) << "\n";
    return;
  }
  // Said once, in the closing lines, with the summary, gates and next steps.
  std::string text = "job " + record.id + " " + jobs::state_name(record.state);
  if (!record.result.empty()) text += ": result " + short_sha(record.result);
  text += "\n";
  const auto field = [](const std::string& value) { return util::indent_later_lines(value, "           ") + "\n"; };
  if (!record.error.empty()) text += "  error:   " + field(record.error);
  if (!hint.empty()) text += "  hint:    " + field(hint);
  if (!record.report.summary.empty()) text += "  summary: " + util::first_line(record.report.summary, 200) + "\n";
  if (!record.nodes.empty()) {
    const auto chosen = jobs::chosen_node(record);
    text += "  nodes:   " + jobs::nodes_summary(record) +
            (chosen ? "; merge takes " + jobs::choice_reason(record, *chosen) : "") + "\n";
    for (const auto& node : record.nodes) {
      text += "    " + std::to_string(node.number) + " " + node.executor.name + " " +
              jobs::state_name(jobs::effective_node_state(record, node)) +
              (node.changes
                   ? " +" + std::to_string(node.changes->insertions) + " -" + std::to_string(node.changes->deletions)
                   : "") +
              "\n";
    }
  }
  if (const std::string gates = gates_line(record); !gates.empty()) text += "  gates:   " + gates + "\n";
  for (const auto& warning : record.snapshot_warnings) text += "  warning: " + warning + "\n";
  text += next_steps(record);
  (failed ? std::cerr : std::cout) << util::terminal_safe(text);
}

jobs::RunOutcome take_up_job(const std::string& job, jobs::RunRequest request) {
  const git::Repository repo = open_repository();
  const auto [found, node] = jobs::JobStore(repo).find_address(job);
  // A task of a job array runs the node its scheduler says, checked first.
  request.node = request.dispatched ? jobs::dispatched_node(repo, found.record) : node;
  const git_oid base = git::oid_from_string(found.record.base);
  std::optional<config::Config> config;
  try {
    config = load_config(&repo, base);
    const auto local = jobs::local_run_flags(repo, found.record.id);
    request.gates = jobs::restore_run_flags(found.record, *config, local);
    for (const auto& node_config : jobs::restore_node_flags(found.record, *config, local)) {
      request.node_settings.push_back(node_config.settings());
    }
  } catch (const Error& error) {
    // The node re-reads the configuration as a local job would: one changed
    // while the job was queued, so that its recorded flags no longer apply
    // (or broken), fails the job (its node), which would otherwise wait
    // queued for a claim that never comes.
    if (!request.dispatched) throw;
    return jobs::fail_queued(repo, found.record.id, request.node, error);
  }
  return jobs::resume_job(repo, config->settings(), found.record.id, request);
}

void print_run_outcome(const jobs::RunOutcome& outcome, bool json) {
  print_job_outcome(outcome.record, outcome.hint, json, outcome.exit_code != ExitCode::ok);
}

// A dispatched job: cancelled through its scheduler. One still queued is
// recorded as cancelled here (the compare-and-swap loses to a node that
// claimed it meanwhile); one a node runs gets SIGTERM there and writes its
// own final record, which is waited for.
void stop_dispatched(const git::Repository& repo, jobs::JobStore& store, const jobs::JobRecord& record,
                     std::chrono::milliseconds bound) {
  const std::string& id = record.id;
  const auto engine = jobs::make_dispatch_engine(record.dispatch->engine);
  const std::string& scheduler_id = record.dispatch->scheduler_id;
  // The id must be this job's before anything is marked (cancel checks it
  // again): a record fetched from elsewhere may name anyone's job.
  const std::string key = jobs::repository_key(repo);
  if (!scheduler_id.empty()) jobs::require_this_job(engine->status(scheduler_id, id), scheduler_id, key, id);
  // Marked first: the node that gets the scheduler's SIGTERM ends it
  // cancelled, not interrupted.
  store.update(id, [](jobs::JobRecord& stored) {
    if (stored.dispatch) stored.dispatch->reason = jobs::stop_requested_reason;
  });
  // A job array's id cancels all its tasks.
  if (!scheduler_id.empty()) engine->cancel(scheduler_id, key, id);
  store.update(id, [](jobs::JobRecord& stored) {
    if (!stored.nodes.empty()) {
      // A job array's nodes no task claimed: none will now.
      bool ended = false;
      for (auto& node : stored.nodes) {
        if (node.state != jobs::JobState::queued) continue;
        node.state = jobs::JobState::cancelled;
        node.error = "cancelled before it started";
        node.finished_at = util::now_utc();
        ended = true;
      }
      jobs::settle_job(stored);
      if (ended && !jobs::is_active(stored.state)) stored.finished_at = util::now_utc();
      return;
    }
    if (stored.state != jobs::JobState::queued) return;
    stored.state = jobs::JobState::cancelled;
    stored.error = "cancelled before it started";
    stored.finished_at = util::now_utc();
  });
  const std::int64_t deadline = util::monotonic_ms() + bound.count();
  while (true) {
    const auto now = store.load(id);
    if (!now) throw failure("job " + id + " was discarded while it stopped");
    if (!jobs::is_active(jobs::effective_state(now->record))) return;
    if (util::monotonic_ms() >= deadline || util::cancel_requested()) {
      throw failure("job " + id + " has not stopped yet (the scheduler was asked to cancel it)",
                    "see where it is with `git mullet show " + id + "`, or try again: git mullet stop " + id);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace mullet::cli
