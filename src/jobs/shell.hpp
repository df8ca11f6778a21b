// `git mullet shell JOB`: a person's shell in a sandbox over the job's last
// snapshot, with the walls of the worker's phase and no network. The tree is
// a fresh checkout of that snapshot in a directory of the shell's own (never
// the job's work tree, which may hold what a worker left unsnapshotted), and
// is removed afterwards; with `record`, it is first snapshotted as a new
// attempt of the job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "git/repository.hpp"
#include "jobs/record.hpp"
#include "sandbox/runner.hpp"

namespace mullet::jobs {

struct ShellRequest {
  std::string job;                   // id or unique prefix
  std::vector<std::string> command;  // empty: default_shell_command()
  bool record = false;
  // The sandbox gets io.terminal (a pty's slave) as its controlling
  // terminal; otherwise io.stdin_source is relayed to its stdin.
  bool terminal = false;
};

struct ShellOutcome {
  std::string id;
  sandbox::RunResult run;
  // With `record`: the attempt the shell's tree became, unless the tree was
  // the snapshot's it started from.
  std::optional<AttemptRecord> recorded;
  bool unchanged = false;  // `record` found nothing to record
};

// bash when the sandbox's root has it, else sh.
std::vector<std::string> default_shell_command();

// Refuses a running job (usage error). The sandbox's I/O is the caller's
// (`io`); its stop reasons are the runner's, without a wall-clock or an
// inactivity limit: a person is at it.
ShellOutcome open_shell(const git::Repository& repo, const config::Settings& settings, const ShellRequest& request,
                        const sandbox::RunIo& io);

}  // namespace mullet::jobs
