#include "jobs/slots.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

// Takes the first free of the slot files <first>.lock .. <first+count-1>.lock
// under `directory`; nullopt when all are held.
std::optional<std::pair<std::uint64_t, Slot>> try_take_slot(const std::string& directory, std::uint64_t first,
                                                            std::uint64_t count) {
  const auto slash = directory.rfind('/');
  util::make_private_dirs(directory.substr(0, slash), directory.substr(slash + 1));
  for (std::uint64_t number = first; number < first + count; ++number) {
    const std::string path = directory + "/" + std::to_string(number) + ".lock";
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw failure("cannot open the job slot " + path + ": " + util::errno_text(errno));
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return std::make_pair(number, Slot(std::move(fd)));
  }
  return std::nullopt;
}

}  // namespace

Slot acquire_slot(const std::string& directory, std::int64_t count, const std::function<bool()>& cancelled,
                  const std::function<void()>& on_wait) {
  if (count <= 0) return {};
  bool told = false;
  while (true) {
    if (auto taken = try_take_slot(directory, 0, static_cast<std::uint64_t>(count))) return std::move(taken->second);
    if (!told && on_wait) on_wait();
    told = true;
    if (cancelled && cancelled()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

UidRange sandbox_uid_range(const config::SandboxSettings& sandbox) {
  const std::int64_t first = sandbox.uid;
  const std::int64_t count = sandbox.uid_count;
  // (uid_t)-1 is "no change" to setuid() and chown().
  constexpr std::int64_t last_valid = 4294967294;
  const std::string range = "[sandbox] uid = " + std::to_string(first) + ", uid_count = " + std::to_string(count);
  if (first <= 0 || count <= 0 || first > last_valid || count > last_valid - first + 1) {
    throw usage_error(range + " is not a range of host uids between 1 and " + std::to_string(last_valid),
                      "set [sandbox] uid to the first uid of an unused range and uid_count to its size");
  }
  const auto invoking = static_cast<std::int64_t>(::getuid());
  if (invoking >= first && invoking < first + count) {
    throw usage_error(range + " includes uid " + std::to_string(invoking) + ", which runs git-mullet",
                      "pick a range of uids no user or service has");
  }
  return {static_cast<uid_t>(first), static_cast<std::uint32_t>(count)};
}

ClaimedUid claim_sandbox_uid(const UidRange& range, const std::string& directory) {
  auto taken = try_take_slot(directory, range.first, range.count);
  if (!taken) {
    throw failure("all " + std::to_string(range.count) + " sandbox uids (from " + std::to_string(range.first) +
                      ") are held by running jobs",
                  "wait for a job to end, or raise [sandbox] uid_count");
  }
  return {static_cast<uid_t>(taken->first), std::move(taken->second)};
}

}  // namespace mullet::jobs
