// Runs a Plan under bubblewrap and watches it from outside: wall-clock and
// inactivity limits, a memory cap over the whole sandbox, cancellation.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/plan.hpp"
#include "sandbox/stop_reason.hpp"
#include "util/fd.hpp"
#include "util/poll_loop.hpp"
#include "util/process.hpp"

namespace mullet::sandbox {

struct RunIo {
  std::string stdin_data;                           // fed when plan.feeds_stdin, then closed
  std::function<void(std::string_view)> on_output;  // stdout, and stderr unless on_error_output is set
  std::function<void(std::string_view)> on_error_output;
  // Called every few hundred milliseconds while the sandbox runs; a reason
  // kills the sandbox and becomes RunResult::ended_by.
  std::function<std::optional<StopReason>()> poll;
  // Bytes the caller keeps on disk for this sandbox outside its writable
  // binds (the logs of its output): they count against limits.disk_mb too.
  std::function<std::uint64_t()> disk_bytes_outside;
  // Instead of stdin_data: what this descriptor gives is relayed to the
  // sandbox's stdin as it comes, which is closed at its end. The sandbox
  // never gets the descriptor itself.
  UniqueFd* stdin_source = nullptr;
  // With plan.controlling_terminal: the pty's slave, the sandbox's stdin,
  // stdout and stderr (the output pipes stay empty). The runner closes it
  // once bwrap holds it, so the master reads its end when the sandbox's last
  // process is gone.
  UniqueFd* terminal = nullptr;
  // Registers the caller's own descriptors (the relay to and from a pty's
  // master) in the runner's one poll loop before it runs.
  std::function<void(util::PollLoop&)> watch;
};

struct RunResult {
  util::ExitStatus status;
  // exit, signal, timeout, inactivity, memory, disk, cancelled, refused (the
  // wall check), stalled (nothing left inside could run), or what
  // RunIo::poll answered
  StopReason ended_by = StopReason::exit;
  std::int64_t duration_ms = 0;
  // The most memory the sandbox's cgroup held, as the kernel counted it
  // (memory.max_usage_in_bytes, memory.peak); unset without a cgroup.
  std::optional<std::uint64_t> memory_peak_bytes;
};

// The bwrap to use (PATH); a refusal when there is none. Refuses on any
// platform other than Linux.
std::string find_bwrap();

// Throws a refusal (exit 3) when the sandbox cannot be built or the wall check
// inside fails; nothing of the plan's command runs then.
RunResult run_sandboxed(const Plan& plan, const RunIo& io);

}  // namespace mullet::sandbox
