// Waiting for processes in tests: on the event (a pidfd becoming readable
// when the process ends), never on a number of sleeps.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

#include "util/fd.hpp"

namespace mullet::test {

// A pidfd for `pid`; an empty one when no such process exists any more.
// (The system call: glibc 2.36's <sys/pidfd.h> lacks extern "C".)
inline UniqueFd open_pidfd(pid_t pid) {
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
}

// Whether the process behind `pidfd` has ended (died, zombie or reaped),
// without waiting.
inline bool has_ended(const UniqueFd& pidfd) {
  pollfd entry{pidfd.get(), POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1;
}

// Waits for the process behind `pidfd` to end. The bound only keeps a broken
// build from hanging the suite: reaching it is a failure, not a measurement.
inline bool ends(const UniqueFd& pidfd) {
  pollfd entry{pidfd.get(), POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&entry, 1, 60000);
  } while (ready < 0 && errno == EINTR);
  return ready == 1;
}

// Waits for `pid` to end; true at once when it is already gone.
inline bool ends(pid_t pid) {
  const UniqueFd pidfd = open_pidfd(pid);
  if (!pidfd) return errno == ESRCH;
  return ends(pidfd);
}

}  // namespace mullet::test
