#include "sandbox/watchdogs.hpp"

#include <algorithm>

namespace mullet::sandbox {
namespace {

constexpr int stalled_checks_to_stop = 2;
// The exact count may take 1/20 of the time between counts.
constexpr std::int64_t disk_count_cost_factor = 20;

}  // namespace

std::optional<StopReason> CancelWatchdog::check(const Observation& /*seen*/) {
  if (m_requested()) return StopReason::cancelled;
  return std::nullopt;
}

std::optional<StopReason> CallerWatchdog::check(const Observation& /*seen*/) {
  return m_poll();
}

std::optional<StopReason> WallClockWatchdog::check(const Observation& seen) {
  if (m_limit_seconds > 0 && seen.now_ms - m_started_ms > m_limit_seconds * 1000) return StopReason::timeout;
  return std::nullopt;
}

std::optional<StopReason> InactivityWatchdog::check(const Observation& seen) {
  if (m_limit_seconds > 0 && seen.now_ms - seen.last_output_ms > m_limit_seconds * 1000) return StopReason::inactivity;
  return std::nullopt;
}

std::optional<StopReason> MemoryWatchdog::check(const Observation& seen) {
  if (m_limit_mb <= 0 || seen.now_ms - m_last_check_ms < memory_interval_ms) return std::nullopt;
  m_last_check_ms = seen.now_ms;
  if (m_measure_bytes() > static_cast<std::uint64_t>(m_limit_mb) * 1024ULL * 1024ULL) return StopReason::memory;
  return std::nullopt;
}

std::optional<StopReason> StallWatchdog::check(const Observation& seen) {
  if (seen.now_ms - m_last_check_ms < stall_interval_ms) return std::nullopt;
  m_last_check_ms = seen.now_ms;
  m_stalled_checks = m_looks_stalled() ? m_stalled_checks + 1 : 0;
  if (m_stalled_checks >= stalled_checks_to_stop) return StopReason::stalled;
  return std::nullopt;
}

DiskWatchdog::DiskWatchdog(std::int64_t started_ms, std::uint64_t limit_bytes, DiskProbes probes)
    : m_limit_bytes(limit_bytes),
      m_probes(std::move(probes)),
      m_free_at_start(m_probes.free_bytes()),
      m_last_glance_ms(started_ms),
      m_last_count_ms(started_ms) {}

std::optional<StopReason> DiskWatchdog::check(const Observation& seen) {
  if (m_limit_bytes == 0 || seen.now_ms - m_last_glance_ms < disk_glance_interval_ms) return std::nullopt;
  m_last_glance_ms = seen.now_ms;
  const std::uint64_t free_now = m_probes.free_bytes();
  const std::uint64_t consumed = m_free_at_start > free_now ? m_free_at_start - free_now : 0;
  bool over = consumed > 2 * m_limit_bytes || (m_probes.full && m_probes.full());
  if (consumed > m_limit_bytes || seen.now_ms - m_last_count_ms >= m_count_interval_ms) {
    m_last_count_ms = seen.now_ms;
    if (m_probes.used_bytes() > m_limit_bytes) over = true;
    m_count_interval_ms = std::clamp<std::int64_t>(disk_count_cost_factor * (m_probes.clock() - seen.now_ms),
                                                   disk_count_min_interval_ms, disk_count_max_interval_ms);
  }
  if (over) return StopReason::disk;
  return std::nullopt;
}

std::optional<StopReason> first_stop_reason(Watchdogs& watchdogs, const Observation& seen) {
  std::optional<StopReason> first;
  for (const auto& watchdog : watchdogs) {
    const std::optional<StopReason> reason = watchdog->check(seen);
    if (reason && !first) first = reason;
  }
  return first;
}

}  // namespace mullet::sandbox
