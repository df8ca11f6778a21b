// Slots held by flock while a job runs, so a job whose runner dies frees its
// slots with it: a cap on how many jobs run at once in one repository
// ([run] max_parallel), and, as root, the host uid each job's sandboxes run as
// ([sandbox] uid and uid_count), one job per uid on the whole machine.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "config/settings.hpp"
#include "util/fd.hpp"

namespace mullet::jobs {

class Slot {
 public:
  Slot() = default;
  explicit Slot(UniqueFd fd) : m_fd(std::move(fd)) {}
  bool held() const { return static_cast<bool>(m_fd); }

 private:
  UniqueFd m_fd;  // closing it releases the lock
};

// Waits until one of `count` slots under `directory` is free and takes it;
// `cancelled` is asked while waiting (an empty Slot comes back when it says
// yes). count <= 0: no cap.
Slot acquire_slot(const std::string& directory, std::int64_t count, const std::function<bool()>& cancelled,
                  const std::function<void()>& on_wait = {});

// The host uids sandboxes may run as when git-mullet runs as root.
struct UidRange {
  uid_t first = 0;
  std::uint32_t count = 0;
};

// [sandbox] uid and uid_count, checked: never 0, never the uid running
// git-mullet, never past 2^32-2 ((uid_t)-1 means "no uid"). Usage error
// otherwise.
UidRange sandbox_uid_range(const config::SandboxSettings& sandbox);

// Where uid slots live: machine-wide, so jobs of different repositories
// never share a uid.
inline constexpr const char* uid_slot_directory = "/run/git-mullet-uids";

// A uid of `range` no other running job holds, held until the Slot closes.
// A refusal when every uid of the range is taken.
struct ClaimedUid {
  uid_t uid = 0;
  Slot slot;
};
ClaimedUid claim_sandbox_uid(const UidRange& range, const std::string& directory = uid_slot_directory);

}  // namespace mullet::jobs
