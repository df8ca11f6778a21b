// The limits the runner watches a sandbox by, one small object each. A
// watchdog is told the time and when the sandbox last wrote anything, reads
// the measurements it was given (functions, so tests inject them and a costly
// one is taken only when due) and answers "keep going" or why the sandbox
// must stop. The runner asks every one, in a fixed order, after every
// wake-up of its poll loop (at least every watch_tick_ms); the first reason
// wins.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sandbox/stop_reason.hpp"

namespace mullet::sandbox {

// How often each measurement is due, in milliseconds. Short, because a
// worker writes or allocates hundreds of MiB in a quarter of a second: the
// glances are cheap (statvfs, the sandbox's /proc entries), and the exact
// disk count keeps itself to ~5% of a core however large the tree.
inline constexpr std::int64_t watch_tick_ms = 50;
inline constexpr std::int64_t memory_interval_ms = 100;
inline constexpr std::int64_t stall_interval_ms = 500;
inline constexpr std::int64_t disk_glance_interval_ms = 50;
inline constexpr std::int64_t disk_count_min_interval_ms = 50;
inline constexpr std::int64_t disk_count_max_interval_ms = 5000;

// What every watchdog is told, in monotonic milliseconds.
struct Observation {
  std::int64_t now_ms = 0;
  std::int64_t last_output_ms = 0;  // the start, until the sandbox writes
};

class Watchdog {
 public:
  Watchdog() = default;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  virtual ~Watchdog() = default;
  // nullopt: keep going; otherwise the reason (RunResult::ended_by).
  virtual std::optional<StopReason> check(const Observation& seen) = 0;
};

// "cancelled" once `requested` says so (SIGINT/SIGTERM).
class CancelWatchdog final : public Watchdog {
 public:
  explicit CancelWatchdog(std::function<bool()> requested) : m_requested(std::move(requested)) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::function<bool()> m_requested;
};

// What the caller's poll answers (RunIo::poll).
class CallerWatchdog final : public Watchdog {
 public:
  explicit CallerWatchdog(std::function<std::optional<StopReason>()> poll) : m_poll(std::move(poll)) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::function<std::optional<StopReason>()> m_poll;
};

// "timeout" once more than `limit_seconds` (0: none) passed since the start.
class WallClockWatchdog final : public Watchdog {
 public:
  WallClockWatchdog(std::int64_t started_ms, std::int64_t limit_seconds)
      : m_started_ms(started_ms), m_limit_seconds(limit_seconds) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::int64_t m_started_ms;
  std::int64_t m_limit_seconds;
};

// "inactivity" once the sandbox wrote nothing for more than `limit_seconds`
// (0: none).
class InactivityWatchdog final : public Watchdog {
 public:
  explicit InactivityWatchdog(std::int64_t limit_seconds) : m_limit_seconds(limit_seconds) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::int64_t m_limit_seconds;
};

// "memory" once `measure_bytes` (the resident size of the sandbox's process
// tree and what it holds in shared memory) exceeds `limit_mb` (0: none).
// Measured every 500 ms: reading /proc costs.
class MemoryWatchdog final : public Watchdog {
 public:
  MemoryWatchdog(std::int64_t started_ms, std::int64_t limit_mb, std::function<std::uint64_t()> measure_bytes)
      : m_last_check_ms(started_ms), m_limit_mb(limit_mb), m_measure_bytes(std::move(measure_bytes)) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::int64_t m_last_check_ms;
  std::int64_t m_limit_mb;
  std::function<std::uint64_t()> m_measure_bytes;
};

// "stalled" once `looks_stalled` (no process inside could ever run again)
// says so twice in a row, 500 ms apart: /proc is read one process at a time,
// not at once.
class StallWatchdog final : public Watchdog {
 public:
  StallWatchdog(std::int64_t started_ms, std::function<bool()> looks_stalled)
      : m_last_check_ms(started_ms), m_looks_stalled(std::move(looks_stalled)) {}
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::int64_t m_last_check_ms;
  std::function<bool()> m_looks_stalled;
  int m_stalled_checks = 0;
};

// What the disk watchdog measures.
struct DiskProbes {
  // Free bytes of the file system holding the writable binds: a cheap glance
  // that also sees files unlinked while still open.
  std::function<std::uint64_t()> free_bytes;
  // The exact count: bytes under the writable binds plus what the caller
  // keeps outside them (RunIo::disk_bytes_outside).
  std::function<std::uint64_t()> used_bytes;
  // Monotonic milliseconds, to time the exact count.
  std::function<std::int64_t()> clock;
  // Whether the file system the kernel holds at the limit (a disk image)
  // is full; unset where there is none.
  std::function<bool()> full;
};

// "disk" once the sandbox uses more than `limit_bytes` (0: none). The glance
// at free space runs every disk_glance_interval_ms and is taken as the
// baseline at
// construction. Other writers share the file system, so the glance alone
// stops a sandbox only at twice the limit; past the limit it brings the exact
// count forward, which otherwise runs as often as it stays cheap: at every
// glance for a small tree, less often for a large one (at most ~5% of one
// core, every 5 s at the least). Where the kernel holds the limit (a disk
// image), a full file system is the limit reached, whatever the counts.
class DiskWatchdog final : public Watchdog {
 public:
  DiskWatchdog(std::int64_t started_ms, std::uint64_t limit_bytes, DiskProbes probes);
  std::optional<StopReason> check(const Observation& seen) override;

 private:
  std::uint64_t m_limit_bytes;
  DiskProbes m_probes;
  std::uint64_t m_free_at_start;
  std::int64_t m_last_glance_ms;
  std::int64_t m_last_count_ms;
  std::int64_t m_count_interval_ms = disk_count_min_interval_ms;
};

using Watchdogs = std::vector<std::unique_ptr<Watchdog>>;

// The first reason any of them gives, asking every one (a watchdog may count
// checks in a row); nullopt when all say keep going.
std::optional<StopReason> first_stop_reason(Watchdogs& watchdogs, const Observation& seen);

}  // namespace mullet::sandbox
