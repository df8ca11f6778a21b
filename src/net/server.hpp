// The one accept/admit/stop skeleton of our servers (the egress proxy and the
// credential endpoint on unix sockets, as UnixSocketServer, which also owns
// its socket file; the bridge on TCP): it accepts connections, admits each as a
// session up to a cap, makes room at the cap by evicting the oldest session
// that says it is evictable (or refuses the newcomer when none is), and stops
// by closing the acceptor and every session.
//
// A Session is shared-owned by its pending handlers and provides:
//   void start();            // begins its work (the io thread)
//   bool evictable() const;  // holds a slot without using it
//   void evict();            // makes room; must end() the session
//   void end();              // closes everything and calls forget(id), once
// The server keeps weak references only, oldest first.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <asio.hpp>

#include "net/relay.hpp"
#include "util/error.hpp"

namespace mullet::net {

// Creates the unix socket `path` for a closed `acceptor`: opens and binds it
// (a path that exists is refused), makes it connectable by every uid (mode
// 0666: a sandbox may run as another uid; the private directory holding the
// socket is what guards it) and listens. Throws mullet::Error naming `what`
// ("the egress proxy's socket"), leaving nothing behind. The owner unlinks
// the path once it has stopped.
void listen_on_unix_socket(asio::local::stream_protocol::acceptor& acceptor, const std::string& path,
                           std::string_view what);

// Writes `response` to a socket the server could not admit and closes it. A
// new socket's buffer is empty: a small answer is written at once or not at
// all, never waited for.
void answer_and_close(asio::local::stream_protocol::socket& socket, std::string_view response);

// When accept() fails (out of descriptors), the connection stays queued and
// the acceptor stays ready; waiting a little keeps that from spinning.
inline constexpr auto accept_retry_delay = std::chrono::milliseconds(100);

template <typename Protocol, typename Session>
class Server {
 public:
  using Socket = typename Protocol::socket;
  using Acceptor = typename Protocol::acceptor;
  // Makes the session for an admitted socket; `id` goes back to forget().
  using MakeSession = std::function<std::shared_ptr<Session>(Socket socket, std::uint64_t id)>;
  // Takes a socket that finds the server full and nothing evictable.
  using Refuse = std::function<void(Socket socket)>;

  // `who` names the server in the log. Nothing is accepted before run() or
  // run_in_background(); the owner opens, binds and listens acceptor() first.
  Server(const char* who, std::size_t max_connections, MakeSession make_session, Refuse refuse)
      : m_who(who),
        m_capacity(std::max<std::size_t>(1, max_connections)),
        m_make_session(std::move(make_session)),
        m_refuse(std::move(refuse)) {}
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() { stop(); }

  asio::io_context& io() { return m_io; }
  Acceptor& acceptor() { return m_acceptor; }

  // Serves on the calling thread until stop().
  void run() {
    accept();
    run_io();
  }
  // Serves on a thread of its own until stop(), which joins it.
  void run_in_background() {
    accept();
    m_thread = std::thread([this] { run_io(); });
  }

  // Any thread but the server's own, also before run(): closes the acceptor
  // and every session, and ends run() or joins the background thread.
  // Idempotent.
  void stop() {
    if (!m_stop_requested.exchange(true)) {
      asio::post(m_io, [this] { stop_now(); });
    }
    if (m_thread.joinable()) m_thread.join();
  }

  // The server's thread only: a session that has ended.
  void forget(std::uint64_t id) {
    m_sessions.erase(id);
    m_active = m_sessions.size();
  }

  // Sessions currently admitted (any thread).
  std::size_t active() const { return m_active.load(); }

 private:
  void run_io() {
    // A handler that throws is logged and the loop goes on, so one bad
    // connection never ends the server.
    const auto work = asio::make_work_guard(m_io);
    while (true) {
      try {
        m_io.run();
        return;
      } catch (const std::exception& error) {
        spdlog::error("{}: {}", m_who, error.what());
      }
    }
  }

  void accept() {
    m_acceptor.async_accept([this](const asio::error_code& error, Socket socket) {
      if (!m_acceptor.is_open()) return;
      if (error) {
        spdlog::warn("{}: cannot accept a connection: {}", m_who, error.message());
        m_accept_retry.expires_after(accept_retry_delay);
        m_accept_retry.async_wait([this](const asio::error_code& wait_error) {
          if (!wait_error) accept();
        });
        return;
      }
      admit(std::move(socket));
      accept();
    });
  }

  void admit(Socket socket) {
    relay::set_close_on_exec(socket.native_handle());
    if (m_sessions.size() >= m_capacity) {
      std::shared_ptr<Session> oldest_evictable;
      for (auto it = m_sessions.begin(); it != m_sessions.end();) {
        auto session = it->second.lock();
        if (!session) {
          it = m_sessions.erase(it);
          continue;
        }
        if (session->evictable()) {
          oldest_evictable = std::move(session);
          break;
        }
        ++it;
      }
      if (oldest_evictable) {
        oldest_evictable->evict();
      } else if (m_sessions.size() >= m_capacity) {
        return m_refuse(std::move(socket));
      }
    }
    const auto id = m_next_id++;
    auto session = m_make_session(std::move(socket), id);
    m_sessions.emplace(id, session);
    m_active = m_sessions.size();
    session->start();
  }

  void stop_now() {
    asio::error_code ignored;
    m_acceptor.close(ignored);
    m_accept_retry.cancel();
    std::vector<std::shared_ptr<Session>> open;
    for (const auto& [id, weak] : m_sessions) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
    for (const auto& session : open) session->end();
    m_sessions.clear();
    m_active = 0;
    m_io.stop();
  }

  const char* const m_who;
  const std::size_t m_capacity;
  const MakeSession m_make_session;
  const Refuse m_refuse;
  std::map<std::uint64_t, std::weak_ptr<Session>> m_sessions;  // by id, so oldest first
  std::uint64_t m_next_id = 0;
  std::atomic<std::size_t> m_active{0};
  std::atomic<bool> m_stop_requested{false};
  std::thread m_thread;
  // Declared last, destroyed first: the handlers still queued (and the
  // sessions they hold) go before anything they refer to.
  asio::io_context m_io;
  Acceptor m_acceptor{m_io};
  asio::steady_timer m_accept_retry{m_io};
};

// A Server on a unix socket that owns its socket file: start() creates it
// (listen_on_unix_socket) and serves on a background thread, stop() stops
// serving and removes it. The egress proxy and the credential endpoint are
// each one of these with their own sessions.
template <typename Session>
class UnixSocketServer {
 public:
  using Protocol = asio::local::stream_protocol;
  using Base = Server<Protocol, Session>;

  // `who` names the server in the log ("egress proxy"), `name` in errors
  // ("the egress proxy", its socket "the egress proxy's socket").
  UnixSocketServer(const char* who, std::string name, std::string socket_path, std::size_t max_connections,
                   typename Base::MakeSession make_session, typename Base::Refuse refuse)
      : m_name(std::move(name)),
        m_socket_path(std::move(socket_path)),
        m_server(who, max_connections, std::move(make_session), std::move(refuse)) {}
  UnixSocketServer(const UnixSocketServer&) = delete;
  UnixSocketServer& operator=(const UnixSocketServer&) = delete;
  ~UnixSocketServer() { stop(); }

  // Creates the socket and serves on a background thread. Throws
  // mullet::Error when the path exists or cannot be bound. Once per object.
  void start() {
    if (m_started) throw failure(m_name + " was already started");
    listen_on_unix_socket(m_server.acceptor(), m_socket_path, m_name + "'s socket");
    m_created_socket = true;
    m_started = true;
    m_server.run_in_background();
  }

  // Closes the listening socket and every session, joins the thread and
  // removes the socket file. Idempotent.
  void stop() {
    if (!m_started) return;
    m_server.stop();
    if (m_created_socket) ::unlink(m_socket_path.c_str());
    m_created_socket = false;
  }

  bool started() const { return m_started; }
  const std::string& socket_path() const { return m_socket_path; }
  // Sessions currently admitted (any thread).
  std::size_t active() const { return m_server.active(); }
  // The server's thread only: a session that has ended.
  void forget(std::uint64_t id) { m_server.forget(id); }

 private:
  const std::string m_name;
  const std::string m_socket_path;
  bool m_started = false;
  bool m_created_socket = false;
  Base m_server;
};

}  // namespace mullet::net
