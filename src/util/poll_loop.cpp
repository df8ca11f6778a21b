#include "util/poll_loop.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>
#include <string>

#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::util {
namespace {

constexpr std::size_t read_size = 65536;

}  // namespace

PollLoop::PollLoop(std::function<std::int64_t()> clock)
    : m_clock(clock ? std::move(clock) : monotonic_ms), m_buffer(std::make_unique<char[]>(read_size)) {}

PollLoop::~PollLoop() = default;

void PollLoop::read(UniqueFd& fd, std::function<Next(std::string_view)> on_data) {
  char* buffer = m_buffer.get();
  m_watches.push_back({&fd,
                       POLLIN,
                       true,
                       [&fd, buffer, on_data = std::move(on_data)] {
                         const ssize_t got = ::read(fd.get(), buffer, read_size);
                         if (got > 0) return on_data(std::string_view(buffer, static_cast<std::size_t>(got)));
                         if (got == 0 || (errno != EINTR && errno != EAGAIN)) fd.reset();
                         return Next::keep_going;
                       },
                       {}});
}

void PollLoop::write(UniqueFd& fd, std::string_view data) {
  if (data.empty()) {
    fd.reset();
    return;
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  m_watches.push_back({&fd,
                       POLLOUT,
                       false,
                       [&fd, data, written = std::size_t{0}]() mutable {
                         const ssize_t put = ::write(fd.get(), data.data() + written, data.size() - written);
                         if (put > 0) written += static_cast<std::size_t>(put);
                         if ((put < 0 && errno != EAGAIN && errno != EINTR) || written >= data.size()) fd.reset();
                         return Next::keep_going;
                       },
                       {}});
}

namespace {

constexpr std::size_t relay_held_cap = 65536;

struct RelayState {
  std::string held;
  bool close_at_end;
};

}  // namespace

void PollLoop::relay(UniqueFd& from, UniqueFd& to, bool close_at_end) {
  ::fcntl(to.get(), F_SETFL, ::fcntl(to.get(), F_GETFL) | O_NONBLOCK);
  auto state = std::make_shared<RelayState>(RelayState{{}, close_at_end});
  char* buffer = m_buffer.get();
  const auto give_up = [state, &from, &to] {
    state->held.clear();
    from.reset();
    if (state->close_at_end) to.reset();
  };
  m_watches.push_back({&from, POLLIN, false,
                       [state, &from, &to, buffer] {
                         const std::size_t room = relay_held_cap - state->held.size();
                         const ssize_t got = ::read(from.get(), buffer, std::min(room, read_size));
                         if (got > 0) {
                           state->held.append(buffer, static_cast<std::size_t>(got));
                         } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
                           from.reset();
                           if (state->held.empty() && state->close_at_end) to.reset();
                         }
                         return Next::keep_going;
                       },
                       [state] { return state->held.size() < relay_held_cap; }});
  m_watches.push_back({&to, POLLOUT, false,
                       [state, &from, &to, give_up] {
                         const ssize_t put = ::write(to.get(), state->held.data(), state->held.size());
                         if (put > 0) {
                           state->held.erase(0, static_cast<std::size_t>(put));
                         } else if (errno != EAGAIN && errno != EINTR) {
                           give_up();
                           return Next::keep_going;
                         }
                         if (state->held.empty() && !from && state->close_at_end) to.reset();
                         return Next::keep_going;
                       },
                       [state] { return !state->held.empty(); }});
}

void PollLoop::on_wake(std::function<Next(const Wake&)> handler, std::optional<std::int64_t> tick_ms) {
  m_on_wake = std::move(handler);
  m_tick_ms = tick_ms;
}

void PollLoop::set_deadline(std::int64_t at_ms) {
  m_deadline_ms = at_ms;
}

int PollLoop::wait_ms(std::int64_t now) const {
  std::optional<std::int64_t> wait = m_tick_ms;
  if (m_deadline_ms) {
    const std::int64_t left = std::max<std::int64_t>(0, *m_deadline_ms - now);
    wait = wait ? std::min(*wait, left) : left;
  }
  if (!wait) return -1;
  return static_cast<int>(std::clamp<std::int64_t>(*wait, 0, std::numeric_limits<int>::max()));
}

PollLoop::Ended PollLoop::run() {
  std::vector<pollfd> fds;
  std::vector<std::size_t> watched;  // which watch each of fds is
  while (true) {
    std::erase_if(m_watches, [](const Watch& watch) { return !*watch.fd; });
    if (std::none_of(m_watches.begin(), m_watches.end(), [](const Watch& watch) { return watch.keeps_running; })) {
      return Ended::drained;
    }
    fds.clear();
    watched.clear();
    for (std::size_t i = 0; i < m_watches.size(); ++i) {
      if (m_watches[i].wanted && !m_watches[i].wanted()) continue;
      fds.push_back({m_watches[i].fd->get(), m_watches[i].events, 0});
      watched.push_back(i);
    }
    int ready = ::poll(fds.data(), fds.size(), wait_ms(m_clock()));
    if (ready < 0) {
      if (errno != EINTR) throw failure("poll failed: " + errno_text(errno));
      ready = 0;
    }
    const std::int64_t now = m_clock();
    if (m_deadline_ms && now >= *m_deadline_ms) return Ended::deadline;
    for (std::size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      // An earlier handler may have closed this one's descriptor.
      Watch& watch = m_watches[watched[i]];
      if (fds[i].revents == 0 || !*watch.fd) continue;
      if (watch.on_ready() == Next::stop) return Ended::stopped;
    }
    if (m_on_wake && m_on_wake(Wake{now, ready}) == Next::stop) return Ended::stopped;
  }
}

}  // namespace mullet::util
