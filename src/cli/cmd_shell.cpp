// `git mullet shell JOB [--record] [-- COMMAND ARGS...]`: a shell in a
// sandbox over the job's last snapshot (jobs/shell.hpp). On a terminal the
// sandbox gets a pty of ours, never the user's terminal (whose descriptor
// would let it push keystrokes into the user's shell with TIOCSTI): the
// user's terminal is put in raw mode and bytes are relayed both ways in the
// runner's poll loop, the window size following. Without a terminal, stdin
// is relayed to the sandbox through a pipe, its output to ours. What the
// sandbox prints reaches the user's terminal as it is: it is the shell the
// user asked for, as ssh or docker run give it.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "jobs/shell.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/poll_loop.hpp"
#include "util/terminal.hpp"

namespace mullet::cli {
namespace {

struct ShellOptions {
  std::string job;
  bool record = false;
  std::vector<std::string> command;
};

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t put = ::write(fd, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return;  // the reader is gone: what the sandbox says is dropped
    bytes.remove_prefix(static_cast<std::size_t>(put));
  }
}

// How the user is connected to the sandbox: a pty of ours on a terminal,
// pipes otherwise.
class ShellConnection {
 public:
  explicit ShellConnection(bool terminal) : m_input(::dup(STDIN_FILENO)) {
    if (!terminal) {
      m_io.stdin_source = &m_input;
      m_io.on_output = [](std::string_view chunk) { write_all(STDOUT_FILENO, chunk); };
      m_io.on_error_output = [](std::string_view chunk) { write_all(STDERR_FILENO, chunk); };
      return;
    }
    m_pty = util::open_pseudo_terminal();
    util::copy_window_size(STDIN_FILENO, m_pty->master.get());
    util::install_window_change_handler();
    m_io.terminal = &m_pty->slave;
    m_io.watch = [this](util::PollLoop& loop) {
      // The sandbox runs: from now on every key is its.
      m_raw.emplace(STDIN_FILENO);
      loop.read(m_pty->master, [](std::string_view chunk) {
        write_all(STDOUT_FILENO, chunk);
        return util::PollLoop::Next::keep_going;
      });
      loop.relay(m_input, m_pty->master, /*close_at_end=*/false);
    };
    m_io.poll = [this]() -> std::optional<sandbox::StopReason> {
      if (util::take_window_change() && m_pty->master) util::copy_window_size(STDIN_FILENO, m_pty->master.get());
      return std::nullopt;
    };
  }
  ShellConnection(const ShellConnection&) = delete;
  ShellConnection& operator=(const ShellConnection&) = delete;
  ~ShellConnection() { restore(); }
  const sandbox::RunIo& io() const { return m_io; }
  // The user's terminal as it was, before anything more is printed: its
  // modes, and what the session's output may have switched on.
  void restore() {
    if (!m_raw) return;
    m_raw.reset();
    write_all(STDOUT_FILENO, util::terminal_display_reset);
  }

 private:
  UniqueFd m_input;  // our stdin, duplicated: the relay closes it, never fd 0
  std::optional<util::PseudoTerminal> m_pty;
  std::optional<util::RawMode> m_raw;
  sandbox::RunIo m_io;
};

int shell(const ShellOptions& options) {
  const git::Repository repo = open_repository();
  const auto job = jobs::JobStore(repo).find(options.job);
  // The configuration a new job from the same base would get: its walls.
  const config::Config config = load_config(&repo, git::oid_from_string(job.record.base));
  jobs::ShellRequest request;
  request.job = job.record.id;
  request.command = options.command;
  request.record = options.record;
  request.terminal = ::isatty(STDIN_FILENO) == 1;
  ShellConnection connection(request.terminal);
  const auto outcome = jobs::open_shell(repo, config.settings(), request, connection.io());
  connection.restore();
  const auto& run = outcome.run;
  const bool ok = run.ended_by == sandbox::StopReason::exit && run.status.success();
  if (run.ended_by != sandbox::StopReason::exit && run.ended_by != sandbox::StopReason::signal) {
    std::cerr << "git mullet: the shell was stopped: " << sandbox::describe_stop(run.ended_by) << "\n";
  } else if (!ok) {
    std::cerr << "git mullet: the shell " << run.status.describe() << "\n";
  }
  if (!options.record) {
    std::cerr << "git mullet: the shell's tree was removed; job " << outcome.id << " is unchanged\n";
  } else if (outcome.unchanged) {
    std::cerr << "git mullet: the shell changed nothing; job " << outcome.id << " is unchanged\n";
  } else if (outcome.recorded) {
    const std::string& result = outcome.recorded->result;
    std::cerr << "git mullet: recorded as attempt " << outcome.recorded->number << " of job " << outcome.id << " ("
              << (result.empty() ? "no changes against its base" : short_sha(result)) << ")\n"
              << "hint: see it with: git mullet diff " << outcome.id << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace

void add_shell_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ShellOptions>();
  CLI::App* sub = app.add_subcommand(
      "shell", "Open a shell in a sandbox over a job's last snapshot (no network); --record keeps what it changed");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--record", options->record, "Snapshot the shell's tree afterwards as a new attempt of the job");
  sub->add_option("COMMAND", options->command, "What to run instead of bash (or sh), after --");
  sub->callback([options, &chosen] { chosen = [options] { return shell(*options); }; });
}

}  // namespace mullet::cli
