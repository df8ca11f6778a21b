#include "net/bridge.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>
#include <asio.hpp>

#include "net/relay.hpp"
#include "net/server.hpp"
#include "util/error.hpp"

namespace mullet::net {
namespace {

using asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

// Descriptors kept free for everything but relayed connections.
constexpr rlim_t reserved_descriptors = 64;

using relay::set_close_on_exec;

class Connection;

}  // namespace

class Bridge::Impl {
 public:
  Impl(int listen_port, std::string socket_path_in, BridgeOptions options_in);

  void run() { m_server.run(); }
  void stop() { m_server.stop(); }
  int port() const { return m_port; }
  std::size_t active() const { return m_server.active(); }
  // The io thread only.
  void forget(std::uint64_t id) { m_server.forget(id); }

  const std::string socket_path;
  const BridgeOptions options;

 private:
  std::shared_ptr<Connection> make_connection(tcp::socket socket, std::uint64_t id);

  int m_port = 0;
  // Declared late, destroyed early: its io context, the handlers still queued
  // and the connections they hold go before anything they refer to.
  Server<tcp, Connection> m_server;
  std::optional<asio::signal_set> m_signals;  // on m_server's io context, so destroyed before it
};

namespace {

// One TCP connection from inside the sandbox and its connection to the
// proxy's socket.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Bridge::Impl& bridge, tcp::socket client, std::uint64_t id)
      : m_bridge(bridge),
        m_client(std::move(client)),
        m_upstream(m_client.get_executor()),
        m_timer(m_client.get_executor()),
        m_tunnel(m_client, m_upstream),
        m_id(id) {}

  void start() {
    asio::error_code ignored;
    m_client.set_option(tcp::no_delay(true), ignored);
    m_timer.expires_after(m_bridge.options.connect_timeout);
    m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
      if (!error && !self->m_relaying) self->end();
    });
    m_upstream.async_connect(
        unix_stream::endpoint(m_bridge.socket_path), [self = shared_from_this()](const asio::error_code& error) {
          if (self->m_ended) return;
          if (error) {
            spdlog::warn("bridge: cannot reach the egress proxy: {}", error.message());
            return self->end();
          }
          set_close_on_exec(self->m_upstream.native_handle());
          self->m_timer.cancel();
          self->m_relaying = true;
          self->m_tunnel.start(self, {}, {}, std::chrono::milliseconds(0), [raw = self.get()] { raw->end(); });
        });
  }

  // The proxy decides which stalled connections to drop; past the bridge's
  // cap something is wrong inside, and the newest wait least.
  bool evictable() const { return false; }
  void evict() { end(); }

  void end() {
    if (m_ended) return;
    m_ended = true;
    m_tunnel.close();
    asio::error_code ignored;
    m_client.close(ignored);
    m_upstream.close(ignored);
    m_timer.cancel();
    m_bridge.forget(m_id);
  }

 private:
  Bridge::Impl& m_bridge;
  tcp::socket m_client;
  unix_stream::socket m_upstream;
  asio::steady_timer m_timer;  // the connect deadline
  relay::Tunnel<tcp::socket, unix_stream::socket> m_tunnel;
  const std::uint64_t m_id;
  bool m_relaying = false;
  bool m_ended = false;
};

}  // namespace

Bridge::Impl::Impl(int listen_port, std::string socket_path_in, BridgeOptions options_in)
    : socket_path(std::move(socket_path_in)),
      options(options_in),
      m_server(
          "bridge", options.max_connections,
          [this](tcp::socket socket, std::uint64_t id) { return make_connection(std::move(socket), id); },
          [](tcp::socket socket) {
            asio::error_code ignored;
            socket.close(ignored);
          }) {
  if (listen_port < 0 || listen_port > 65535) throw usage_error("bridge: no such port " + std::to_string(listen_port));
  const tcp::endpoint endpoint(asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(listen_port));
  asio::error_code error;
  m_server.acceptor().open(endpoint.protocol(), error);
  if (!error) set_close_on_exec(m_server.acceptor().native_handle());
  if (!error) m_server.acceptor().set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) m_server.acceptor().bind(endpoint, error);
  if (!error) m_server.acceptor().listen(asio::socket_base::max_listen_connections, error);
  if (!error) m_port = m_server.acceptor().local_endpoint(error).port();
  if (error) {
    throw failure("bridge: cannot listen on 127.0.0.1:" + std::to_string(listen_port) + ": " + error.message());
  }
  if (options.stop_on_signals) {
    m_signals.emplace(m_server.io(), SIGTERM, SIGINT, SIGHUP);
    m_signals->async_wait([this](const asio::error_code& wait_error, int) {
      if (!wait_error) m_server.stop();
    });
  }
}

std::shared_ptr<Connection> Bridge::Impl::make_connection(tcp::socket socket, std::uint64_t id) {
  return std::make_shared<Connection>(*this, std::move(socket), id);
}

Bridge::Bridge(int listen_port, std::string unix_socket_path, BridgeOptions options)
    : m_impl(std::make_unique<Impl>(listen_port, std::move(unix_socket_path), options)) {}

Bridge::~Bridge() = default;

int Bridge::port() const {
  return m_impl->port();
}
void Bridge::run() {
  m_impl->run();
}
void Bridge::stop() {
  m_impl->stop();
}
std::size_t Bridge::active_connections() const {
  return m_impl->active();
}

int run_bridge(int listen_port, const std::string& unix_socket_path, const std::function<void()>& on_listening) {
  ::signal(SIGPIPE, SIG_IGN);
  // Each relayed connection holds two descriptors.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    const rlim_t wanted = files.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20U : files.rlim_max;
    if (files.rlim_cur < wanted) {
      rlimit raised = files;
      raised.rlim_cur = wanted;
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
    }
  }
  BridgeOptions options;
  options.stop_on_signals = true;
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur > 0) {
    const rlim_t usable = files.rlim_cur > reserved_descriptors ? (files.rlim_cur - reserved_descriptors) / 2 : 1;
    options.max_connections = std::clamp<std::size_t>(usable, 1, options.max_connections);
  }
  try {
    Bridge bridge(listen_port, unix_socket_path, options);
    if (on_listening) on_listening();
    bridge.run();
    return 0;
  } catch (const std::exception& error) {
    spdlog::error("{}", error.what());
    return 1;
  }
}

}  // namespace mullet::net
