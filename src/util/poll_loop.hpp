// The one poll(2) loop: watches a child's pipes (and whatever else a caller
// registers) until every readable one is at its end, a handler asks to stop,
// or a deadline passes.
//
// Each round: one wait (bounded by the tick and the deadline); then, if the
// deadline has passed, the loop ends without reading; otherwise each ready
// descriptor's handler runs, in the order they were registered, and then the
// wake handler. A signal ends a wait like a tick does (EINTR is handled here
// and nowhere else), so the wake handler also runs after one.
//
// A handler answering Next::stop ends the loop at once. Everything is
// registered before run().
//
// The loop watches the caller's UniqueFd objects while they are open: a
// reader at end of file or a failed read or write resets the caller's
// descriptor, and a descriptor the caller resets is no longer watched.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "util/fd.hpp"

namespace mullet::util {

class PollLoop {
 public:
  enum class Next { keep_going, stop };
  enum class Ended {
    drained,   // no readable descriptor left open
    stopped,   // a handler answered Next::stop
    deadline,  // set_deadline's time passed
  };
  // What the wake handler is told.
  struct Wake {
    std::int64_t now_ms;  // util::monotonic_ms() (or the injected clock) after the wait
    int ready;            // descriptors that were ready; 0 after a tick or a signal
  };

  // `clock`: monotonic milliseconds, for the tick and the deadline (tests
  // inject one).
  explicit PollLoop(std::function<std::int64_t()> clock = {});
  PollLoop(const PollLoop&) = delete;
  PollLoop& operator=(const PollLoop&) = delete;
  ~PollLoop();

  // Each time `fd` is readable: one read of up to 64 KiB, handed to
  // `on_data`. At end of file or on a read error `fd` is reset. The loop runs
  // while at least one of these is open.
  void read(UniqueFd& fd, std::function<Next(std::string_view)> on_data);
  // Feeds `data` (which must outlive the loop) to `fd`, made non-blocking,
  // whenever it is writable; resets `fd` once all is written or the reader is
  // gone (at once when `data` is empty), so the reader sees its end. A writer
  // alone does not keep the loop running: a child that exits without reading
  // its input does not hold us.
  void write(UniqueFd& fd, std::string_view data);
  // A byte stream from `from` to `to` (made non-blocking), written as `to`
  // takes it, with at most 64 KiB held: while that much waits, `from` is not
  // read. At `from`'s end (or a failed read) `from` is reset, and once all
  // it gave is written, `to` too when `close_at_end`. A failed write drops
  // what was held and resets `from` (and `to` when `close_at_end`). Neither
  // end keeps the loop running: what the relay carries is someone's input.
  void relay(UniqueFd& from, UniqueFd& to, bool close_at_end);
  // `on_wake` runs after every wait, whatever ended it. With `tick_ms`, no
  // wait lasts longer, so it runs at least that often.
  void on_wake(std::function<Next(const Wake&)> handler, std::optional<std::int64_t> tick_ms = std::nullopt);
  // At this time (on the loop's clock) the loop ends with Ended::deadline,
  // before reading anything that arrived with it.
  void set_deadline(std::int64_t at_ms);

  // Throws mullet::Error when poll(2) itself fails (not on EINTR).
  Ended run();

 private:
  struct Watch {
    UniqueFd* fd;
    short events;
    bool keeps_running;
    std::function<Next()> on_ready;
    std::function<bool()> wanted;  // unset: always; false: not watched this round
  };

  int wait_ms(std::int64_t now) const;

  std::function<std::int64_t()> m_clock;
  std::vector<Watch> m_watches;
  std::function<Next(const Wake&)> m_on_wake;
  std::optional<std::int64_t> m_tick_ms;
  std::optional<std::int64_t> m_deadline_ms;
  std::unique_ptr<char[]> m_buffer;
};

}  // namespace mullet::util
