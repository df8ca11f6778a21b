// Moving bytes both ways between two stream sockets, for the egress proxy
// (unix client, TCP destination) and the bridge (TCP client, unix proxy).
// Internal to src/net.
//
// Each direction owns one fixed buffer and has at most one read or one write
// pending, so a tunnel's memory does not depend on what flows through it, and
// a side that stops reading stops the other side being read (TCP's own back
// pressure), instead of queueing.
//
// Upward bytes can be metered (limit_up): each piece read from the client
// goes upstream only as far as the allowance says, and a piece cut short ends
// the tunnel once what was allowed is written.
//
// Ends: when the client stops sending (EOF), the upstream gets a half-close
// and the answer keeps coming; when the upstream ends, or on any error, both
// sockets are closed. Waiting for a client that never closes after the
// upstream did would hold the connection forever.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <fcntl.h>

#include <spdlog/spdlog.h>
#include <asio.hpp>

namespace mullet::net::relay {

inline constexpr std::size_t buffer_size = std::size_t{16} * 1024;
inline void set_close_on_exec(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

template <typename Client, typename Upstream>
class Tunnel {
 public:
  using Clock = std::chrono::steady_clock;

  Tunnel(Client& client, Upstream& upstream)
      : m_client(client), m_upstream(upstream), m_idle_timer(client.get_executor()) {}

  // Before start(): asks `allow` how many of the bytes read from the client
  // (and of first_up) may go upstream; fewer than asked ends the tunnel after
  // those.
  void limit_up(std::function<std::size_t(std::size_t wanted)> allow) { m_allow_up = std::move(allow); }

  // `keep_alive` owns the sockets and this tunnel; every pending handler holds
  // it. `first_up` goes upstream before anything read from the client (what
  // followed a request head; counted in bytes_up), `first_down` to the client
  // before anything from upstream (the proxy's own answer; not counted).
  // `on_end` runs once, when the tunnel has ended or was closed.
  void start(std::shared_ptr<void> keep_alive, std::string first_up, std::string first_down,
             std::chrono::milliseconds idle_timeout, std::function<void()> on_end) {
    m_on_end = std::move(on_end);
    m_idle_timeout = idle_timeout;
    m_last_activity = Clock::now();
    m_first_up = std::move(first_up);
    m_first_down = std::move(first_down);
    if (m_first_down.empty()) {
      pump(keep_alive, m_upstream, m_client, m_down, false);
    } else {
      asio::async_write(m_client, asio::buffer(m_first_down),
                        [this, keep_alive](const asio::error_code& error, std::size_t) {
                          if (error) return finish();
                          release(m_first_down);
                          pump(keep_alive, m_upstream, m_client, m_down, false);
                        });
    }
    const std::size_t first_allowed = allowed_up(m_first_up.size());
    const bool first_cut = first_allowed < m_first_up.size();
    m_first_up.resize(first_allowed);
    if (m_first_up.empty() && first_cut) {
      finish();
    } else if (m_first_up.empty()) {
      pump(keep_alive, m_client, m_upstream, m_up, true);
    } else {
      asio::async_write(m_upstream, asio::buffer(m_first_up),
                        [this, keep_alive, first_cut](const asio::error_code& error, std::size_t count) {
                          if (error) return finish();
                          m_up.bytes += count;
                          release(m_first_up);
                          if (first_cut) return finish();
                          pump(keep_alive, m_client, m_upstream, m_up, true);
                        });
    }
    if (m_ended) return;
    if (m_idle_timeout.count() > 0) arm_idle_timer(std::move(keep_alive));
  }

  // Closes both sockets now; pending operations end with errors. Runs
  // on_end when it has not run yet.
  void close() { finish(); }

  bool ended() const { return m_ended; }
  // limit_up's allowance cut the upward bytes short.
  bool cut_up() const { return m_cut_up; }
  std::uint64_t bytes_up() const { return m_up.bytes; }
  std::uint64_t bytes_down() const { return m_down.bytes; }

 private:
  struct Direction {
    std::array<char, buffer_size> buffer;  // not cleared: never read before written
    std::uint64_t bytes = 0;
  };

  static void release(std::string& text) {
    text.clear();
    text.shrink_to_fit();
  }

  template <typename From, typename To>
  void pump(std::shared_ptr<void> keep_alive, From& from, To& to, Direction& direction, bool upward) {
    if (m_ended) return;
    from.async_read_some(asio::buffer(direction.buffer), [this, keep_alive, &from, &to, &direction, upward](
                                                             const asio::error_code& error, std::size_t count) {
      if (m_ended) return;
      if (error) {
        if (upward && error == asio::error::eof) {
          // The client has said all it will; the answer may still come.
          asio::error_code ignored;
          m_upstream.shutdown(asio::socket_base::shutdown_send, ignored);
          return;
        }
        return finish();
      }
      m_last_activity = Clock::now();
      const std::size_t allowed = upward ? allowed_up(count) : count;
      const bool cut = allowed < count;
      if (allowed == 0) return finish();
      asio::async_write(to, asio::buffer(direction.buffer.data(), allowed),
                        [this, keep_alive, &from, &to, &direction, upward, cut](const asio::error_code& write_error,
                                                                                std::size_t written) {
                          if (m_ended) return;
                          if (write_error) return finish();
                          direction.bytes += written;
                          m_last_activity = Clock::now();
                          if (cut) return finish();
                          pump(keep_alive, from, to, direction, upward);
                        });
    });
  }

  std::size_t allowed_up(std::size_t wanted) {
    if (!m_allow_up || wanted == 0) return wanted;
    const std::size_t allowed = m_allow_up(wanted);
    if (allowed < wanted) m_cut_up = true;
    return allowed;
  }

  void arm_idle_timer(std::shared_ptr<void> keep_alive) {
    m_idle_timer.expires_at(m_last_activity + m_idle_timeout);
    m_idle_timer.async_wait([this, keep_alive](const asio::error_code& error) {
      if (error || m_ended) return;
      if (Clock::now() - m_last_activity >= m_idle_timeout) return finish();
      arm_idle_timer(keep_alive);
    });
  }

  void finish() {
    if (m_ended) return;
    m_ended = true;
    asio::error_code ignored;
    m_client.close(ignored);
    m_upstream.close(ignored);
    m_idle_timer.cancel();
    if (auto on_end = std::exchange(m_on_end, nullptr)) on_end();
  }

  Client& m_client;
  Upstream& m_upstream;
  asio::steady_timer m_idle_timer;
  std::chrono::milliseconds m_idle_timeout{0};
  Clock::time_point m_last_activity{};
  std::string m_first_up;
  std::string m_first_down;
  Direction m_up;
  Direction m_down;
  bool m_ended = false;
  bool m_cut_up = false;
  std::function<void()> m_on_end;
  std::function<std::size_t(std::size_t)> m_allow_up;
};

}  // namespace mullet::net::relay
