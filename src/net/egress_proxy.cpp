#include "net/egress_proxy.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <mutex>
#include <utility>

#include <spdlog/spdlog.h>
#include <asio.hpp>

#include "net/address.hpp"
#include "net/grant.hpp"
#include "net/http_head.hpp"
#include "net/relay.hpp"
#include "net/server.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::net {
namespace {

using asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

// After an error answer the proxy stops sending and reads (and drops) what the
// client still sends for a moment before closing: closing a socket with
// unread input resets it, and the client could lose the answer.
constexpr auto linger_time = std::chrono::milliseconds(1000);
constexpr std::size_t max_linger_bytes = std::size_t{64} * 1024;

// A request's host and port as net::parse_destination read them (the host is
// its canonical text, IPv6 without brackets), read again.
Result<net::Destination> request_target(const std::string& host, int port) {
  auto target = net::parse_host(host.find(':') != std::string::npos ? "[" + host + "]" : host);
  if (target) target->port = port;
  return target;
}

const char* article(const std::string& word) {
  return !word.empty() && std::string_view("aeiou").find(word.front()) != std::string_view::npos ? "an" : "a";
}

std::string plain_answer(int status, std::string_view phrase, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(phrase) +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

class Session;

}  // namespace

// ---------------------------------------------------------------------------
// Pure helpers

bool grant_allows(const std::vector<std::string>& grants, const std::string& host, int port) {
  const auto target = request_target(host, port);
  if (!target) return false;
  return std::any_of(grants.begin(), grants.end(), [&target](const std::string& text) {
    const auto grant = net::parse_grant(text);
    return grant && grant->allows(*target);
  });
}

bool grant_names_address(const std::vector<std::string>& grants, const asio::ip::address& address, int port) {
  return std::any_of(grants.begin(), grants.end(), [&](const std::string& text) {
    const auto grant = net::parse_grant(text);
    return grant && grant->kind == net::Grant::Kind::address && grant->destination.port == port &&
           *grant->destination.address == address;
  });
}

std::optional<ProxyRequest> parse_proxy_request(std::string_view head) {
  const auto parsed = http::parse_request_head(head, http::proxy_forms);
  if (!parsed) return std::nullopt;
  return ProxyRequest{parsed->method, parsed->destination.host, parsed->destination.port, parsed->origin_line(),
                      http::forwarded_head(*parsed)};
}

nlohmann::json to_json(const ProxyDecision& decision) {
  return {{"time", decision.time},         {"method", decision.method},        {"host", decision.host},
          {"port", decision.port},         {"allowed", decision.allowed},      {"reason", decision.reason},
          {"bytes_up", decision.bytes_up}, {"bytes_down", decision.bytes_down}};
}

// ---------------------------------------------------------------------------
// The proxy

class EgressProxy::Impl {
 public:
  Impl(std::vector<std::string> grants_in, std::string socket_path_in, ProxyOptions options_in)
      : grants(std::move(grants_in)),
        socket_path(std::move(socket_path_in)),
        options(options_in),
        m_server(
            "egress proxy", options.max_connections,
            [this](unix_stream::socket socket, std::uint64_t id) { return make_session(std::move(socket), id); },
            [this](unix_stream::socket socket) { refuse_at_capacity(std::move(socket)); }) {}

  void start();
  void stop();

  // Any thread.
  std::uint64_t record(ProxyDecision decision);
  void record_bytes(std::uint64_t sequence, std::uint64_t up, std::uint64_t down);
  std::vector<ProxyDecision> decisions() const;
  std::size_t active() const { return m_server.active(); }

  // The io thread only.
  void forget(std::uint64_t id) { m_server.forget(id); }

  const std::vector<std::string> grants;
  const std::string socket_path;
  const ProxyOptions options;

 private:
  std::shared_ptr<Session> make_session(unix_stream::socket socket, std::uint64_t id);
  void refuse_at_capacity(unix_stream::socket socket);

  mutable std::mutex m_log_mutex;
  std::deque<ProxyDecision> m_log;
  std::uint64_t m_log_first = 0;  // sequence number of m_log.front()

  bool m_started = false;
  bool m_created_socket = false;
  // Declared last, destroyed first: its io context, the handlers still queued
  // and the sessions they hold go before anything they refer to.
  Server<unix_stream, Session> m_server;
};

namespace {

// One client connection: its request head, the decision, the upstream
// connection, then the tunnel; or an error answer.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(EgressProxy::Impl& proxy, unix_stream::socket client, std::uint64_t id)
      : m_proxy(proxy),
        m_client(std::move(client)),
        m_upstream(m_client.get_executor()),
        m_resolver(m_client.get_executor()),
        m_timer(m_client.get_executor()),
        m_tunnel(m_client, m_upstream),
        m_id(id) {}

  void start() {
    m_timer.expires_after(m_proxy.options.head_timeout);
    m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
      if (error || self->m_phase != Phase::head) return;
      self->refuse(
          408, "Request Timeout",
          "request head not complete within " + std::to_string(self->m_proxy.options.head_timeout.count()) + " ms",
          false);
    });
    read_head();
  }

  // Holds a slot without using it: no request yet, or already answered.
  bool evictable() const { return m_phase == Phase::head || m_phase == Phase::answered; }

  // Makes room for a new connection.
  void evict() {
    if (m_phase == Phase::head) note(false, "dropped: too many connections, and this one had sent no request");
    end();
  }

  // Closes everything; the handlers still pending find the phase ended.
  void end() {
    if (m_phase == Phase::ended) return;
    m_phase = Phase::ended;
    m_tunnel.close();
    asio::error_code ignored;
    m_client.close(ignored);
    m_upstream.close(ignored);
    m_resolver.cancel();
    m_timer.cancel();
    if (m_decision) m_proxy.record_bytes(*m_decision, m_tunnel.bytes_up(), m_tunnel.bytes_down());
    m_proxy.forget(m_id);
  }

 private:
  enum class Phase { head, connecting, tunnel, answered, ended };

  void read_head() {
    m_client.async_read_some(asio::buffer(m_head.data() + m_head_size, m_head.size() - m_head_size),
                             [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                               self->on_head_bytes(error, count);
                             });
  }

  void on_head_bytes(const asio::error_code& error, std::size_t count) {
    if (m_phase != Phase::head) return;
    if (error) {
      if (m_head_size > 0) note(false, "the client closed before completing its request");
      return end();
    }
    const std::size_t scanned = m_head_size;
    m_head_size += count;
    const std::string_view received(m_head.data(), m_head_size);
    const auto scan = http::scan_request_head(received, scanned, http::proxy_forms);
    switch (scan.progress) {
      case http::HeadProgress::incomplete: return read_head();
      case http::HeadProgress::malformed: return refuse(400, "Bad Request", "malformed request", false);
      case http::HeadProgress::too_large:
        return refuse(431, "Request Header Fields Too Large",
                      "request head larger than " + std::to_string(http::max_head_bytes) + " bytes", false);
      case http::HeadProgress::complete: break;
    }
    const auto checked = received.substr(0, scan.size);
    auto request = parse_proxy_request(checked);
    if (!request) return refuse(400, "Bad Request", "malformed request", false);
    m_request = std::move(*request);
    m_leftover.assign(received.substr(checked.size()));
    decide();
  }

  void decide() {
    m_phase = Phase::connecting;
    m_timer.expires_after(m_proxy.options.connect_timeout);
    m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
      if (error || self->m_phase != Phase::connecting) return;
      self->refuse(504, "Gateway Timeout",
                   "upstream unreachable: no connection within " +
                       std::to_string(self->m_proxy.options.connect_timeout.count()) + " ms",
                   true);
    });
    if (!grant_allows(m_proxy.grants, m_request.host, m_request.port)) {
      return refuse(403, "Forbidden", "not on the allow list", false);
    }
    const auto target = request_target(m_request.host, m_request.port);
    if (!target) return refuse(400, "Bad Request", "malformed request", false);
    if (net::is_localhost_name(*target)) return refuse(403, "Forbidden", "localhost is a loopback name", false);
    if (target->address) {
      return connect({tcp::endpoint(*target->address, static_cast<unsigned short>(m_request.port))});
    }
    m_resolver.async_resolve(
        m_request.host, std::to_string(m_request.port), tcp::resolver::numeric_service,
        [self = shared_from_this()](const asio::error_code& error, const tcp::resolver::results_type& results) {
          if (self->m_phase != Phase::connecting) return;
          if (error) return self->refuse(502, "Bad Gateway", "cannot resolve: " + error.message(), true);
          std::vector<tcp::endpoint> endpoints;
          for (const auto& entry : results) endpoints.push_back(entry.endpoint());
          self->connect(std::move(endpoints));
        });
  }

  // Connects to the addresses a name resolved to, leaving out the restricted
  // ones unless a grant names that very address. These addresses are the
  // ones connected to: nothing is resolved twice.
  void connect(const std::vector<tcp::endpoint>& endpoints) {
    std::vector<tcp::endpoint> permitted;
    std::string refusal;
    for (const auto& endpoint : endpoints) {
      const auto kind = net::restricted_address_kind(endpoint.address());
      if (kind.empty() || grant_names_address(m_proxy.grants, endpoint.address(), m_request.port)) {
        permitted.push_back(endpoint);
      } else if (refusal.empty()) {
        refusal =
            std::string("resolves to ") + article(kind) + " " + kind + " address " + endpoint.address().to_string();
      }
    }
    if (permitted.empty()) {
      if (refusal.empty()) return refuse(502, "Bad Gateway", "cannot resolve: no address", true);
      return refuse(403, "Forbidden", refusal, false);
    }
    asio::async_connect(m_upstream, permitted,
                        [self = shared_from_this()](const asio::error_code& error, const tcp::endpoint&) {
                          if (self->m_phase != Phase::connecting) return;
                          if (error) {
                            return self->refuse(502, "Bad Gateway", "upstream unreachable: " + error.message(), true);
                          }
                          self->open_tunnel();
                        });
  }

  void open_tunnel() {
    m_timer.cancel();
    asio::error_code ignored;
    m_upstream.set_option(tcp::no_delay(true), ignored);
    m_phase = Phase::tunnel;
    m_decision = note(true, "on the allow list");
    const bool tunnel_request = m_request.method == "CONNECT";
    std::string first_up = tunnel_request ? std::move(m_leftover) : m_request.upstream_head + m_leftover;
    std::string first_down = tunnel_request ? "HTTP/1.1 200 Connection established\r\n\r\n" : "";
    m_leftover.clear();
    m_tunnel.start(shared_from_this(), std::move(first_up), std::move(first_down), m_proxy.options.idle_timeout,
                   [this] { end(); });
  }

  void refuse(int status, std::string_view phrase, const std::string& reason, bool allowed) {
    note(allowed, reason);
    std::string body = "git-mullet egress proxy: ";
    if (!m_request.method.empty()) {
      body += m_request.method + " " + destination() + ": ";
    }
    body += reason + "\n";
    answer(plain_answer(status, phrase, body));
  }

  void answer(std::string response) {
    m_phase = Phase::answered;
    asio::error_code ignored;
    m_client.cancel(ignored);  // a head read may be pending (the deadline passed); drain() reads from now on
    m_resolver.cancel();
    m_upstream.close(ignored);
    m_response = std::move(response);
    m_timer.expires_after(linger_time);
    m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
      if (!error) self->end();
    });
    asio::async_write(m_client, asio::buffer(m_response),
                      [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                        if (self->m_phase != Phase::answered) return;
                        if (error) return self->end();
                        asio::error_code shutdown_error;
                        self->m_client.shutdown(asio::socket_base::shutdown_send, shutdown_error);
                        self->drain();
                      });
  }

  void drain() {
    m_client.async_read_some(asio::buffer(m_head),
                             [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                               if (self->m_phase != Phase::answered) return;
                               self->m_drained += count;
                               if (error || self->m_drained > max_linger_bytes) return self->end();
                               self->drain();
                             });
  }

  std::string destination() const {
    const bool v6 = m_request.host.find(':') != std::string::npos;
    return (v6 ? "[" + m_request.host + "]" : m_request.host) + ":" + std::to_string(m_request.port);
  }

  // Verdicts on requests go to the log at info; what a misbehaving client
  // causes before it has made a request (garbage, stalls, evictions) only at
  // debug, so that it cannot flood the log. All of it is in decisions().
  std::uint64_t note(bool allowed, const std::string& reason) {
    if (allowed && reason == "on the allow list") {
      spdlog::debug("egress proxy: {} {} allowed", m_request.method, destination());
    } else if (allowed) {
      spdlog::info("egress proxy: {} {} allowed but failed: {}", m_request.method, destination(), reason);
    } else if (m_request.method.empty()) {
      spdlog::debug("egress proxy: refused a connection: {}", reason);
    } else {
      spdlog::info("egress proxy: {} {} refused: {}", m_request.method, destination(), reason);
    }
    return m_proxy.record(
        ProxyDecision{util::now_utc(), m_request.method, m_request.host, m_request.port, allowed, reason, 0, 0});
  }

  EgressProxy::Impl& m_proxy;
  unix_stream::socket m_client;
  tcp::socket m_upstream;
  tcp::resolver m_resolver;
  asio::steady_timer m_timer;  // the head deadline, then the connect deadline, then the linger
  relay::Tunnel<unix_stream::socket, tcp::socket> m_tunnel;
  const std::uint64_t m_id;
  Phase m_phase = Phase::head;
  std::array<char, http::max_head_bytes> m_head;  // not cleared: never read before written
  std::size_t m_head_size = 0;
  std::size_t m_drained = 0;
  ProxyRequest m_request;
  std::string m_leftover;  // what the client sent after its head
  std::string m_response;
  std::optional<std::uint64_t> m_decision;
};

}  // namespace

void EgressProxy::Impl::start() {
  if (m_started) throw failure("the egress proxy was already started");
  // The socket itself is no secret (it reaches only the grants); the
  // directory holding it guards it.
  listen_on_unix_socket(m_server.acceptor(), socket_path, "the egress proxy's socket");
  m_created_socket = true;
  m_started = true;
  m_server.run_in_background();
}

void EgressProxy::Impl::stop() {
  if (!m_started) return;
  m_server.stop();
  if (m_created_socket) ::unlink(socket_path.c_str());
  m_created_socket = false;
}

std::shared_ptr<Session> EgressProxy::Impl::make_session(unix_stream::socket socket, std::uint64_t id) {
  return std::make_shared<Session>(*this, std::move(socket), id);
}

void EgressProxy::Impl::refuse_at_capacity(unix_stream::socket socket) {
  const std::string reason = "too many connections";
  spdlog::debug("egress proxy: refused a connection: {}", reason);
  record(ProxyDecision{util::now_utc(), "", "", 0, false, reason, 0, 0});
  // A new socket's buffer is empty: this small answer is written at once or
  // not at all, never waited for.
  const auto response = plain_answer(503, "Service Unavailable", "git-mullet egress proxy: " + reason + "\n");
  [[maybe_unused]] const auto sent =
      ::send(socket.native_handle(), response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  asio::error_code ignored;
  socket.close(ignored);
}

std::uint64_t EgressProxy::Impl::record(ProxyDecision decision) {
  const std::lock_guard lock(m_log_mutex);
  m_log.push_back(std::move(decision));
  while (m_log.size() > std::max<std::size_t>(1, options.max_decisions)) {
    m_log.pop_front();
    ++m_log_first;
  }
  return m_log_first + m_log.size() - 1;
}

void EgressProxy::Impl::record_bytes(std::uint64_t sequence, std::uint64_t up, std::uint64_t down) {
  const std::lock_guard lock(m_log_mutex);
  if (sequence < m_log_first || sequence - m_log_first >= m_log.size()) return;
  auto& decision = m_log[sequence - m_log_first];
  decision.bytes_up = up;
  decision.bytes_down = down;
}

std::vector<ProxyDecision> EgressProxy::Impl::decisions() const {
  const std::lock_guard lock(m_log_mutex);
  return {m_log.begin(), m_log.end()};
}

EgressProxy::EgressProxy(std::vector<std::string> grants, std::string socket_path, ProxyOptions options)
    : m_impl(std::make_unique<Impl>(std::move(grants), std::move(socket_path), options)) {}

EgressProxy::~EgressProxy() {
  stop();
}

void EgressProxy::start() {
  m_impl->start();
}
void EgressProxy::stop() {
  m_impl->stop();
}
std::size_t EgressProxy::active_connections() const {
  return m_impl->active();
}
std::vector<ProxyDecision> EgressProxy::decisions() const {
  return m_impl->decisions();
}

nlohmann::json EgressProxy::decisions_json() const {
  auto json = nlohmann::json::array();
  for (const auto& decision : decisions()) json.push_back(to_json(decision));
  return json;
}

}  // namespace mullet::net
