// `git mullet wait JOB`: follows a job (typically a detached one) to its end,
// printing its output as it appears, then what `run` prints at the end.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.hpp"
#include "executors/claude_stream.hpp"
#include "executors/executor.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/record.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

// How often a running job's record and output files are looked at.
constexpr std::chrono::milliseconds poll_interval{250};

struct WaitOptions {
  std::string job;
  bool quiet = false;
  bool json = false;
  double timeout = -1;  // seconds; negative: no limit
};

// What a file the runner appends to has gained since the last look. The file
// may not exist yet (the job is still making its clone); when it is replaced
// or truncated, it is read again from its start.
class FileTail {
 public:
  explicit FileTail(std::string path) : m_path(std::move(path)) {}

  // At most max_bytes at a time: a file may be far larger than memory.
  std::string read_new(std::size_t max_bytes) {
    struct stat named {};
    if (::stat(m_path.c_str(), &named) != 0) return {};
    struct stat open_file {};
    if (m_fd && (::fstat(m_fd.get(), &open_file) != 0 || open_file.st_ino != named.st_ino ||
                 open_file.st_dev != named.st_dev || open_file.st_size < ::lseek(m_fd.get(), 0, SEEK_CUR))) {
      m_fd.reset();
    }
    if (!m_fd) m_fd.reset(::open(m_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!m_fd) return {};
    std::string text;
    char buffer[65536];
    while (text.size() < max_bytes) {
      const ssize_t got = ::read(m_fd.get(), buffer, std::min(sizeof buffer, max_bytes - text.size()));
      if (got > 0) {
        text.append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        break;
      }
    }
    return text;
  }

 private:
  std::string m_path;
  UniqueFd m_fd;
};

// The job's output as it appears, on stderr (where `run` echoes it): the
// worker's event stream rendered readably when it has one (Claude Code),
// and its plain output.
class OutputFollower {
 public:
  OutputFollower(const jobs::JobPaths& paths, std::string executor_name)
      : m_events(paths.events_log), m_plain(paths.worker_log), m_executor_name(std::move(executor_name)) {}

  void pump() {
    constexpr std::size_t piece = 1U << 20U;
    for (std::string events = m_events.read_new(piece); !events.empty(); events = m_events.read_new(piece)) {
      print_events(m_splitter.feed(events));
    }
    for (std::string plain = m_plain.read_new(piece); !plain.empty(); plain = m_plain.read_new(piece)) {
      write(m_plain_shown.feed(plain));
    }
  }
  // After the job ended: an event line cut short is shown all the same.
  void finish() {
    pump();
    print_events(m_splitter.finish());
    write(m_plain_shown.finish());
  }
  // A finished job whose scratch files are gone (or were never made here: a
  // fetched record): its output as the record keeps it.
  void print_recorded(const std::optional<std::string>& events, const std::optional<std::string>& plain) {
    if (events) {
      print_events(m_splitter.feed(*events));
      print_events(m_splitter.finish());
    }
    if (plain) write(util::terminal_safe(*plain));
  }

 private:
  void print_events(const std::vector<nlohmann::json>& events) {
    for (const auto& event : events) write(util::terminal_safe(executors::render_event(m_executor_name, event)));
  }
  static void write(const std::string& text) {
    if (!text.empty()) std::cerr.write(text.data(), static_cast<std::streamsize>(text.size())).flush();
  }

  FileTail m_events;
  FileTail m_plain;
  std::string m_executor_name;
  executors::claude::EventSplitter m_splitter;
  // The worker's output must not drive the user's terminal.
  util::TerminalSafeStream m_plain_shown;
};

// A job of several nodes: a line as each node ends, as `run` tells it (their
// output stays in `log JOB/N`: several workers' streams interleaved would be
// unreadable).
class NodeEnds {
 public:
  // The nodes that ended before the wait began are told too: the user has
  // not heard of them yet.
  void announce(const jobs::JobRecord& record) {
    if (m_told.size() < record.nodes.size()) m_told.resize(record.nodes.size(), false);
    for (std::size_t n = 0; n < record.nodes.size(); ++n) {
      const jobs::NodeRecord& node = record.nodes[n];
      if (m_told[n] || jobs::is_active(node.state)) continue;
      m_told[n] = true;
      std::cerr << util::terminal_safe("git mullet: job " + record.id + " node " + std::to_string(node.number) + "/" +
                                       std::to_string(record.nodes.size()) + ": " +
                                       jobs::node_ending(node.state, node.changes, node.error) + "\n")
                << std::flush;
    }
  }

 private:
  std::vector<bool> m_told;
};

int wait_for_job(const WaitOptions& options) {
  const git::Repository repo = open_repository();
  const jobs::JobStore store(repo);
  const jobs::StoredJob first = store.find(options.job);
  const std::string id = first.record.id;
  const jobs::JobPaths paths = jobs::job_paths(repo, id);
  // Like `run --json`, --json prints the record and nothing of the output.
  const bool follow = !options.quiet && !options.json;
  OutputFollower output(paths, first.record.executor.name);
  if (follow && jobs::effective_state(first.record) != jobs::JobState::running && !util::exists(paths.worker_log) &&
      !util::exists(paths.events_log)) {
    output.print_recorded(store.read_file(first, "events.jsonl"), store.read_file(first, "worker.log"));
  }

  const auto started = std::chrono::steady_clock::now();
  const auto deadline = options.timeout < 0 ? std::chrono::steady_clock::time_point::max()
                                            : started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(options.timeout));
  jobs::JobRecord record = first.record;
  jobs::JobState state = jobs::JobState::running;
  NodeEnds node_ends;
  while (true) {
    state = jobs::effective_state(record);
    if (state == jobs::JobState::interrupted && jobs::is_active(record.state)) {
      // The runner writes its last record before it exits (a dispatched
      // job's before its scheduler calls it ended): it may have done both
      // since we read the record. Only a second read tells.
      if (const auto again = store.load(id)) {
        record = again->record;
        state = jobs::effective_state(record);
      }
    }
    if (follow) {
      output.pump();
      node_ends.announce(record);
    }
    if (!jobs::is_active(state)) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      throw failure("job " + id + " is still running (waited " + util::format_decimal(options.timeout, 3) + " s)",
                    "it goes on in the background; wait again with `git mullet wait " + id + "`");
    }
    if (util::cancel_requested()) {
      throw failure(
          "stopped waiting; job " + id + " is still running",
          "wait again with `git mullet wait " + id + "`, or stop it with `git mullet discard --force " + id + "`");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(poll_interval, deadline - now));
    const auto current = store.load(id);
    if (!current) throw failure("job " + id + " was discarded while waiting for it");
    record = current->record;
  }
  if (follow) output.finish();

  jobs::JobRecord shown = record;
  shown.state = state;
  // The record does not keep run's hint: the error has to speak for itself.
  std::string hint;
  if (state == jobs::JobState::interrupted && record.error.empty()) {
    shown.error =
        "the git-mullet process running it (pid " + std::to_string(record.runner.pid) + ") ended before the job did";
    hint = "what it did so far: git mullet log " + id;
  }
  const int exit_code = jobs::exit_code_for(state);
  print_job_outcome(shown, hint, options.json, exit_code != 0);
  return exit_code;
}

}  // namespace

void add_wait_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<WaitOptions>();
  CLI::App* sub =
      app.add_subcommand("wait", "Follow a job to its end: its output as it appears, then its outcome and exit code");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("-q,--quiet", options->quiet, "Print only the outcome, not the job's output");
  sub->add_flag("--json", options->json, "Print the finished job's record as one JSON object (and no output)");
  sub->add_option("--timeout", options->timeout, "Give up after SECONDS (exit 1; the job goes on running)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(
          [](const std::string& given) {
            double seconds = 0;
            if (!CLI::detail::lexical_cast(given, seconds)) return "'" + given + "' is not a number of SECONDS";
            return seconds >= 0 ? std::string() : "SECONDS may not be negative (" + given + ")";
          },
          ""));
  sub->callback([options, &chosen] { chosen = [options] { return wait_for_job(*options); }; });
}

}  // namespace mullet::cli
