#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/watchdogs.hpp"

using mullet::sandbox::CallerWatchdog;
using mullet::sandbox::CancelWatchdog;
using mullet::sandbox::DiskProbes;
using mullet::sandbox::DiskWatchdog;
using mullet::sandbox::InactivityWatchdog;
using mullet::sandbox::MemoryWatchdog;
using mullet::sandbox::Observation;
using mullet::sandbox::StallWatchdog;
using mullet::sandbox::StopReason;
using mullet::sandbox::WallClockWatchdog;
using mullet::sandbox::Watchdog;
using mullet::sandbox::Watchdogs;

namespace {

constexpr std::int64_t started = 10000;
constexpr std::uint64_t mib = 1024ULL * 1024ULL;

// At `ms` after the start, with output last seen at the start.
Observation at(std::int64_t ms) {
  return {started + ms, started};
}

const std::optional<StopReason> keep_going = std::nullopt;

// A disk the test moves by hand, counting what the watchdog asks of it.
struct FakeDisk {
  std::uint64_t free = 100 * mib;
  std::uint64_t used = 0;
  std::int64_t count_takes_ms = 0;  // how long the exact count "lasts"
  std::int64_t now = started;
  int glances = 0;
  int counts = 0;

  DiskProbes probes() {
    DiskProbes probes;
    probes.free_bytes = [this] {
      ++glances;
      return free;
    };
    probes.used_bytes = [this] {
      ++counts;
      return used;
    };
    probes.clock = [this] { return now + count_takes_ms; };
    return probes;
  }
  // The watchdog's check at `ms` after the start, with the clock there too.
  std::optional<StopReason> check(DiskWatchdog& watchdog, std::int64_t ms) {
    now = started + ms;
    return watchdog.check(at(ms));
  }
};

// Answers what it is told to and remembers being asked.
class ScriptedWatchdog final : public Watchdog {
 public:
  ScriptedWatchdog(std::optional<StopReason> answer, std::vector<std::string>& asked, std::string name)
      : m_answer(std::move(answer)), m_asked(asked), m_name(std::move(name)) {}
  std::optional<StopReason> check(const Observation& /*seen*/) override {
    m_asked.push_back(m_name);
    return m_answer;
  }

 private:
  std::optional<StopReason> m_answer;
  std::vector<std::string>& m_asked;
  std::string m_name;
};

}  // namespace

TEST_CASE("watchdog: cancellation stops the sandbox once requested") {
  bool requested = false;
  CancelWatchdog watchdog([&] { return requested; });
  CHECK(watchdog.check(at(0)) == keep_going);
  requested = true;
  CHECK(watchdog.check(at(1)) == StopReason::cancelled);
}

TEST_CASE("watchdog: the caller's poll is asked every time, and its answer is the reason") {
  int asked = 0;
  std::optional<StopReason> answer;
  CallerWatchdog watchdog([&] {
    ++asked;
    return answer;
  });
  CHECK(watchdog.check(at(0)) == keep_going);
  CHECK(watchdog.check(at(0)) == keep_going);
  answer = StopReason::turns;
  CHECK(watchdog.check(at(0)) == StopReason::turns);
  CHECK(asked == 3);
}

TEST_CASE("watchdog: the wall clock stops the sandbox once more than its limit has passed") {
  WallClockWatchdog watchdog(started, 2);
  CHECK(watchdog.check(at(0)) == keep_going);
  CHECK(watchdog.check(at(2000)) == keep_going);
  CHECK(watchdog.check(at(2001)) == StopReason::timeout);
  // Output does not matter to it.
  CHECK(watchdog.check({started + 2001, started + 2001}) == StopReason::timeout);

  WallClockWatchdog unlimited(started, 0);
  CHECK(unlimited.check(at(1000LL * 1000 * 1000)) == keep_going);
}

TEST_CASE("watchdog: inactivity counts from the last output") {
  InactivityWatchdog watchdog(5);
  CHECK(watchdog.check({started + 5000, started}) == keep_going);
  CHECK(watchdog.check({started + 5001, started}) == StopReason::inactivity);
  CHECK(watchdog.check({started + 9000, started + 4000}) == keep_going);
  CHECK(watchdog.check({started + 9001, started + 4000}) == StopReason::inactivity);

  InactivityWatchdog unlimited(0);
  CHECK(unlimited.check({started + 1000LL * 1000 * 1000, started}) == keep_going);
}

TEST_CASE("watchdog: memory is measured every memory_interval_ms and stops the sandbox above the limit") {
  using mullet::sandbox::memory_interval_ms;
  std::uint64_t bytes = 0;
  int measured = 0;
  MemoryWatchdog watchdog(started, 64, [&] {
    ++measured;
    return bytes;
  });
  bytes = 100 * mib;  // far over, but not yet due
  CHECK(watchdog.check(at(memory_interval_ms - 1)) == keep_going);
  CHECK(measured == 0);
  bytes = 64 * mib;  // exactly the limit is within it
  CHECK(watchdog.check(at(memory_interval_ms)) == keep_going);
  CHECK(measured == 1);
  bytes = 64 * mib + 1;
  CHECK(watchdog.check(at(2 * memory_interval_ms - 1)) == keep_going);  // not due since the last measurement
  CHECK(measured == 1);
  CHECK(watchdog.check(at(2 * memory_interval_ms)) == StopReason::memory);
  CHECK(measured == 2);

  MemoryWatchdog unlimited(started, 0, [&] {
    ++measured;
    return bytes;
  });
  CHECK(unlimited.check(at(60000)) == keep_going);
  CHECK(measured == 2);  // never measured
}

TEST_CASE("watchdog: a stall stops the sandbox when seen twice in a row, stall_interval_ms apart") {
  using mullet::sandbox::stall_interval_ms;
  const auto step = stall_interval_ms;
  std::vector<bool> answers;
  std::size_t asked = 0;
  StallWatchdog watchdog(started, [&] { return answers.at(asked++); });
  answers = {true, false, true, true};
  CHECK(watchdog.check(at(step - 1)) == keep_going);
  CHECK(asked == 0);
  CHECK(watchdog.check(at(step)) == keep_going);             // once
  CHECK(watchdog.check(at(step + step / 2)) == keep_going);  // not due: nothing asked
  CHECK(asked == 1);
  CHECK(watchdog.check(at(2 * step)) == keep_going);           // running again: starts over
  CHECK(watchdog.check(at(3 * step)) == keep_going);           // once
  CHECK(watchdog.check(at(4 * step)) == StopReason::stalled);  // twice in a row
  CHECK(asked == 4);
}

TEST_CASE("watchdog: the poll loop's tick is no longer than the shortest interval") {
  using namespace mullet::sandbox;
  // A longer tick would make the glances late whatever their interval says.
  CHECK(watch_tick_ms <= disk_glance_interval_ms);
  CHECK(watch_tick_ms <= memory_interval_ms);
}

TEST_CASE("watchdog: disk takes the free space at the start and glances at it every disk_glance_interval_ms") {
  using mullet::sandbox::disk_glance_interval_ms;
  const auto glance = disk_glance_interval_ms;
  FakeDisk disk;
  DiskWatchdog watchdog(started, 10 * mib, disk.probes());
  CHECK(disk.glances == 1);  // the baseline
  CHECK(disk.check(watchdog, glance - 1) == keep_going);
  CHECK(disk.glances == 1);
  CHECK(disk.check(watchdog, glance) == keep_going);
  CHECK(disk.glances == 2);
  CHECK(disk.counts == 1);  // a cheap tree: counted as often as glanced at
  CHECK(disk.check(watchdog, 2 * glance) == keep_going);
  CHECK(disk.counts == 2);
}

TEST_CASE("watchdog: disk stops the sandbox when the exact count is over the limit") {
  using mullet::sandbox::disk_glance_interval_ms;
  FakeDisk disk;
  DiskWatchdog watchdog(started, 10 * mib, disk.probes());
  disk.used = 10 * mib;
  CHECK(disk.check(watchdog, disk_glance_interval_ms) == keep_going);
  disk.used = 10 * mib + 1;
  CHECK(disk.check(watchdog, 2 * disk_glance_interval_ms) == StopReason::disk);
}

TEST_CASE("watchdog: a full disk image stops the sandbox at the next glance, under the limit") {
  using mullet::sandbox::disk_glance_interval_ms;
  FakeDisk disk;
  bool full = false;
  DiskProbes probes = disk.probes();
  probes.full = [&full] { return full; };
  DiskWatchdog watchdog(started, 10 * mib, std::move(probes));
  disk.used = 9 * mib;
  CHECK(disk.check(watchdog, disk_glance_interval_ms) == keep_going);
  full = true;
  CHECK(disk.check(watchdog, disk_glance_interval_ms + 1) == keep_going);  // not yet due
  CHECK(disk.check(watchdog, 2 * disk_glance_interval_ms) == StopReason::disk);
}

TEST_CASE("watchdog: a slow exact count runs less often, every disk_count_max_interval_ms at the least") {
  using namespace mullet::sandbox;
  const auto glance = disk_glance_interval_ms;
  FakeDisk disk;
  DiskWatchdog watchdog(started, 10 * mib, disk.probes());
  disk.count_takes_ms = 100;  // 20 times that: every 2 s
  CHECK(disk.check(watchdog, glance) == keep_going);
  CHECK(disk.counts == 1);
  disk.used = 20 * mib;  // over, but not counted until due
  CHECK(disk.check(watchdog, glance + 2000 - glance) == keep_going);
  CHECK(disk.counts == 1);
  CHECK(disk.check(watchdog, glance + 2000) == StopReason::disk);
  CHECK(disk.counts == 2);

  FakeDisk huge;
  DiskWatchdog capped(started, 10 * mib, huge.probes());
  huge.count_takes_ms = 60000;
  CHECK(huge.check(capped, glance) == keep_going);
  CHECK(huge.check(capped, glance + disk_count_max_interval_ms - glance) == keep_going);
  CHECK(huge.counts == 1);
  CHECK(huge.check(capped, glance + disk_count_max_interval_ms) == keep_going);
  CHECK(huge.counts == 2);
}

TEST_CASE("watchdog: free space gone past the limit brings the count forward; past twice the limit it stops alone") {
  using mullet::sandbox::disk_glance_interval_ms;
  const auto glance = disk_glance_interval_ms;
  FakeDisk disk;
  DiskWatchdog watchdog(started, 10 * mib, disk.probes());
  disk.count_takes_ms = 250;  // counts every 5 s
  CHECK(disk.check(watchdog, glance) == keep_going);
  CHECK(disk.counts == 1);
  // Another writer on the same file system: the count clears the sandbox.
  disk.free -= 15 * mib;
  CHECK(disk.check(watchdog, 2 * glance) == keep_going);
  CHECK(disk.counts == 2);
  // Past twice the limit the glance is enough, whatever the count says
  // (files unlinked while open are in no count).
  disk.free -= 6 * mib;
  CHECK(disk.check(watchdog, 3 * glance) == StopReason::disk);
  CHECK(disk.counts == 3);
}

TEST_CASE("watchdog: no disk limit, no probing but the baseline") {
  FakeDisk disk;
  DiskWatchdog watchdog(started, 0, disk.probes());
  disk.free = 0;
  disk.used = 1000 * mib;
  CHECK(disk.check(watchdog, 60000) == keep_going);
  CHECK(disk.glances == 1);
  CHECK(disk.counts == 0);
}

TEST_CASE("watchdogs are all asked, in order, and the first reason wins") {
  std::vector<std::string> asked;
  Watchdogs watchdogs;
  watchdogs.push_back(std::make_unique<ScriptedWatchdog>(std::nullopt, asked, "a"));
  watchdogs.push_back(std::make_unique<ScriptedWatchdog>(StopReason::memory, asked, "b"));
  watchdogs.push_back(std::make_unique<ScriptedWatchdog>(StopReason::disk, asked, "c"));
  CHECK(mullet::sandbox::first_stop_reason(watchdogs, at(0)) == StopReason::memory);
  CHECK(asked == std::vector<std::string>{"a", "b", "c"});

  Watchdogs quiet;
  quiet.push_back(std::make_unique<ScriptedWatchdog>(std::nullopt, asked, "d"));
  CHECK(mullet::sandbox::first_stop_reason(quiet, at(0)) == keep_going);
}
