#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/clock.hpp"
#include "util/fd.hpp"
#include "util/poll_loop.hpp"

using mullet::make_pipe;
using mullet::Pipe;
using mullet::util::PollLoop;
using Next = PollLoop::Next;
using Ended = PollLoop::Ended;

namespace {

void put(const mullet::UniqueFd& fd, const std::string& text) {
  REQUIRE(::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

// A reader that appends what it gets to `sink`.
std::function<Next(std::string_view)> into(std::string& sink) {
  return [&sink](std::string_view chunk) {
    sink.append(chunk);
    return Next::keep_going;
  };
}

// The way out of a test whose loop would otherwise wait for ever: unless
// dismissed first, it makes `fd` readable after a long while, and says so.
// Only a broken loop ever needs it, and the test then fails on fired().
class Rescue {
 public:
  explicit Rescue(int fd)
      : m_thread([this, fd] {
          std::unique_lock lock(m_mutex);
          if (!m_done.wait_for(lock, std::chrono::seconds(20), [this] { return m_dismissed; })) {
            m_fired = true;
            [[maybe_unused]] auto ignored = ::write(fd, "!", 1);
          }
        }) {}
  Rescue(const Rescue&) = delete;
  Rescue& operator=(const Rescue&) = delete;
  ~Rescue() { dismiss(); }

  // Joins, so fired() is final afterwards.
  void dismiss() {
    {
      std::lock_guard lock(m_mutex);
      m_dismissed = true;
    }
    m_done.notify_all();
    if (m_thread.joinable()) m_thread.join();
  }
  bool fired() const { return m_fired; }

 private:
  std::mutex m_mutex;
  std::condition_variable m_done;
  bool m_dismissed = false;
  std::atomic<bool> m_fired{false};
  std::thread m_thread;
};

std::atomic<int> g_signals_seen{0};
void count_signal(int /*number*/) {
  ++g_signals_seen;
}

}  // namespace

TEST_CASE("poll loop: only a ready descriptor's handler runs, and the wake handler after it") {
  Pipe quiet = make_pipe();
  Pipe loud = make_pipe();
  put(loud.write_end, "hello");
  std::string from_quiet;
  std::string from_loud;
  std::vector<std::string> order;
  std::vector<int> ready_counts;
  PollLoop loop;
  loop.read(quiet.read_end, into(from_quiet));
  loop.read(loud.read_end, [&](std::string_view chunk) {
    from_loud.append(chunk);
    order.push_back("loud");
    return Next::keep_going;
  });
  loop.on_wake([&](const PollLoop::Wake& wake) {
    ready_counts.push_back(wake.ready);
    order.push_back("wake");
    return Next::stop;
  });
  CHECK(loop.run() == Ended::stopped);
  CHECK(from_quiet.empty());
  CHECK(from_loud == "hello");
  CHECK(order == std::vector<std::string>{"loud", "wake"});
  CHECK(ready_counts == std::vector<int>{1});
  CHECK(quiet.read_end);
  CHECK(loud.read_end);
}

TEST_CASE("poll loop: ready handlers run in the order they were registered") {
  Pipe first = make_pipe();
  Pipe second = make_pipe();
  Pipe third = make_pipe();
  put(third.write_end, "3");
  put(first.write_end, "1");
  put(second.write_end, "2");
  std::string order;
  PollLoop loop;
  loop.read(first.read_end, into(order));
  loop.read(second.read_end, into(order));
  loop.read(third.read_end, into(order));
  loop.on_wake([](const PollLoop::Wake& wake) {
    CHECK(wake.ready == 3);
    return Next::stop;
  });
  CHECK(loop.run() == Ended::stopped);
  CHECK(order == "123");
}

TEST_CASE("poll loop: at end of file the caller's descriptor is reset, and with none left the loop ends") {
  Pipe one = make_pipe();
  Pipe two = make_pipe();
  put(one.write_end, "first");
  one.write_end.reset();
  put(two.write_end, "second");
  two.write_end.reset();
  std::string got;
  int wakes = 0;
  PollLoop loop;
  loop.read(one.read_end, into(got));
  loop.read(two.read_end, into(got));
  loop.on_wake([&](const PollLoop::Wake&) {
    ++wakes;
    return Next::keep_going;
  });
  CHECK(loop.run() == Ended::drained);
  CHECK(got == "firstsecond");
  CHECK_FALSE(one.read_end);
  CHECK_FALSE(two.read_end);
  CHECK(wakes == 2);  // one round reads both, the next sees both ends
}

TEST_CASE("poll loop: a writer feeds a reader more than a pipe holds, then closes so the reader ends") {
  Pipe pipe = make_pipe();
  std::string data(1 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  std::string got;
  PollLoop loop;
  loop.read(pipe.read_end, into(got));
  loop.write(pipe.write_end, data);
  CHECK(loop.run() == Ended::drained);
  CHECK(got == data);
  CHECK_FALSE(pipe.write_end);
}

TEST_CASE("poll loop: a writer alone does not keep the loop running; empty data closes at once") {
  Pipe fed = make_pipe();
  Pipe empty = make_pipe();
  PollLoop loop;
  loop.write(fed.write_end, "never read");
  loop.write(empty.write_end, "");
  CHECK_FALSE(empty.write_end);
  CHECK(loop.run() == Ended::drained);
  CHECK(fed.write_end);  // left to the caller: it was never written
}

TEST_CASE("poll loop: a writer whose reader is gone stops writing") {
  const auto saved = ::signal(SIGPIPE, SIG_IGN);
  Pipe orphan = make_pipe();
  orphan.read_end.reset();
  Pipe keeper = make_pipe();
  std::string unread;
  PollLoop loop;
  loop.read(keeper.read_end, into(unread));
  loop.write(orphan.write_end, "to no one");
  loop.on_wake([&](const PollLoop::Wake& wake) {
    CHECK(wake.ready == 1);
    return Next::stop;
  });
  CHECK(loop.run() == Ended::stopped);
  CHECK_FALSE(orphan.write_end);
  ::signal(SIGPIPE, saved);
}

TEST_CASE("poll loop: a read handler that answers stop ends the loop at once") {
  Pipe first = make_pipe();
  Pipe second = make_pipe();
  put(first.write_end, "a");
  put(second.write_end, "b");
  std::string from_second;
  bool woke = false;
  PollLoop loop;
  loop.read(first.read_end, [](std::string_view) { return Next::stop; });
  loop.read(second.read_end, into(from_second));
  loop.on_wake([&](const PollLoop::Wake&) {
    woke = true;
    return Next::keep_going;
  });
  CHECK(loop.run() == Ended::stopped);
  CHECK(from_second.empty());
  CHECK_FALSE(woke);
}

TEST_CASE("poll loop: the tick wakes the loop when nothing is ready") {
  Pipe idle = make_pipe();
  Rescue rescue(idle.write_end.get());
  std::vector<int> ready_counts;
  std::string unread;
  PollLoop loop;
  loop.read(idle.read_end, into(unread));
  loop.on_wake(
      [&](const PollLoop::Wake& wake) {
        ready_counts.push_back(wake.ready);
        return ready_counts.size() == 3 || wake.ready > 0 ? Next::stop : Next::keep_going;
      },
      1);
  CHECK(loop.run() == Ended::stopped);
  rescue.dismiss();
  CHECK_FALSE(rescue.fired());
  CHECK(ready_counts == std::vector<int>{0, 0, 0});
}

TEST_CASE("poll loop: a passed deadline ends the loop before what came with it is read") {
  Pipe pipe = make_pipe();
  put(pipe.write_end, "late");
  std::string got;
  bool woke = false;
  PollLoop loop([] { return std::int64_t{100}; });
  loop.read(pipe.read_end, into(got));
  loop.on_wake([&](const PollLoop::Wake&) {
    woke = true;
    return Next::keep_going;
  });
  loop.set_deadline(100);
  CHECK(loop.run() == Ended::deadline);
  CHECK(got.empty());
  CHECK_FALSE(woke);
}

TEST_CASE("poll loop: the deadline bounds the wait, also under a longer tick") {
  Pipe idle = make_pipe();
  Rescue rescue(idle.write_end.get());
  // Before the first wait: 20 ms left. After it: past the deadline.
  std::vector<std::int64_t> times = {0, 20};
  std::size_t next_time = 0;
  PollLoop loop([&] { return times[std::min(next_time++, times.size() - 1)]; });
  int wakes = 0;
  std::string unread;
  loop.read(idle.read_end, into(unread));
  loop.on_wake(
      [&](const PollLoop::Wake&) {
        ++wakes;
        return Next::keep_going;
      },
      1000000);
  loop.set_deadline(20);
  CHECK(loop.run() == Ended::deadline);
  rescue.dismiss();
  CHECK_FALSE(rescue.fired());
  CHECK(wakes == 0);
}

TEST_CASE("poll loop: a signal during the wait wakes it (EINTR), and the loop goes on") {
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction saved {};
  REQUIRE(::sigaction(SIGUSR1, &action, &saved) == 0);
  g_signals_seen = 0;

  Pipe idle = make_pipe();
  Rescue rescue(idle.write_end.get());
  std::string got;
  std::vector<int> ready_counts;
  std::atomic<bool> woke{false};
  const pthread_t waiter = ::pthread_self();
  // The signal must land while the loop is inside poll(): until the loop
  // reports a wake-up, keep sending one.
  std::thread sender([&] {
    for (int tries = 0; tries < 10000 && !woke; ++tries) {
      ::pthread_kill(waiter, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  PollLoop loop;
  loop.read(idle.read_end, into(got));
  loop.on_wake([&](const PollLoop::Wake& wake) {
    ready_counts.push_back(wake.ready);
    // Keep going once: a loop that ended at the first signal would pass too.
    if (ready_counts.size() < 2) return Next::keep_going;
    woke = true;
    return Next::stop;
  });
  Ended ended = Ended::drained;
  CHECK_NOTHROW(ended = loop.run());
  woke = true;
  sender.join();
  rescue.dismiss();
  ::sigaction(SIGUSR1, &saved, nullptr);

  CHECK(ended == Ended::stopped);
  CHECK_FALSE(rescue.fired());
  CHECK(got.empty());
  CHECK(ready_counts == std::vector<int>{0, 0});
  CHECK(g_signals_seen >= 2);
}

TEST_CASE("relay: carries a stream to its end, then closes the far end when asked") {
  // input -> [relay] -> through -> reader; the reader keeps the loop running.
  Pipe input = make_pipe();
  Pipe through = make_pipe();
  // More than the relay holds at once and more than a pipe's buffer, so
  // reading `input` must wait for `through` to drain.
  std::string sent(300000, 'x');
  for (std::size_t i = 0; i < sent.size(); i += 997) sent[i] = static_cast<char>('a' + (i % 26));
  std::string got;
  std::thread writer([&] {
    std::size_t done = 0;
    while (done < sent.size()) {
      const ssize_t put = ::write(input.write_end.get(), sent.data() + done, sent.size() - done);
      if (put <= 0) break;
      done += static_cast<std::size_t>(put);
    }
    input.write_end.reset();
  });
  PollLoop loop;
  loop.relay(input.read_end, through.write_end, /*close_at_end=*/true);
  loop.read(through.read_end, into(got));
  CHECK(loop.run() == Ended::drained);
  writer.join();
  CHECK(got == sent);
  CHECK_FALSE(input.read_end);
  CHECK_FALSE(through.write_end);
}

TEST_CASE("relay: without close_at_end the far end stays open, and the relay alone does not hold the loop") {
  Pipe input = make_pipe();
  Pipe through = make_pipe();
  put(input.write_end, "abc");
  input.write_end.reset();
  PollLoop loop;
  loop.relay(input.read_end, through.write_end, /*close_at_end=*/false);
  // Nothing else is watched: the loop ends at once, the relay's ends open.
  CHECK(loop.run() == Ended::drained);
  CHECK(through.write_end);
}

TEST_CASE("relay: a far end whose reader is gone stops the relay") {
  Pipe input = make_pipe();
  Pipe through = make_pipe();
  Pipe keep = make_pipe();  // keeps the loop running until the relay gave up
  through.read_end.reset();
  put(input.write_end, "data");
  // As git-mullet does (cli/app.cpp): a write to a pipe without a reader
  // fails with EPIPE instead of killing the process.
  struct sigaction ignore {};
  struct sigaction saved {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &saved);
  PollLoop loop;
  loop.relay(input.read_end, through.write_end, /*close_at_end=*/true);
  loop.read(keep.read_end, [](std::string_view) { return Next::stop; });
  loop.on_wake([&](const PollLoop::Wake&) { return input.read_end ? Next::keep_going : Next::stop; }, 50);
  Rescue rescue(keep.write_end.get());
  CHECK(loop.run() == Ended::stopped);
  ::sigaction(SIGPIPE, &saved, nullptr);
  rescue.dismiss();
  CHECK_FALSE(rescue.fired());
  CHECK_FALSE(input.read_end);
  CHECK_FALSE(through.write_end);
}
