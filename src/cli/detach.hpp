// `run --detach`: the foreground process starts this same command line again
// (minus --detach) as a child in a session of its own, and the child tells it
// the job's id on a pipe once the job's record exists. Until then the child's
// stdout and stderr are pipes the foreground process reads, so anything that
// stops the job before it exists (bad usage, a refusal) reaches the user with
// the same message and exit code as without --detach.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace mullet::cli {

inline constexpr const char* detach_option = "--detach";
// The hidden option that makes a `run` the detached child: the descriptor it
// writes the job's id to.
inline constexpr const char* report_id_fd_option = "--report-id-fd";

// The foreground half. `task_on_stdin`: the task read from our stdin (-F -),
// handed to the child on its stdin since it cannot read our terminal. Prints
// the id (with `json`: {"id": ...}) and returns 0 once the job exists;
// otherwise relays the child's output and returns its exit code.
int run_detached(const std::optional<std::string>& task_on_stdin, bool json);

// The child's half, called before anything else it does: SIGHUP no longer
// cancels it (SIGINT and SIGTERM still do). Returns what RunRequest::on_created
// must do: write the id to `report_fd`, then point stdout and stderr at
// /dev/null so the foreground process sees the end of them and can go.
std::function<void(const std::string& id)> detached_child(int report_fd);

}  // namespace mullet::cli
