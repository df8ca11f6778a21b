#include "net/egress_session.hpp"

#include <utility>

#include <spdlog/spdlog.h>

#include "util/clock.hpp"

namespace mullet::net {
namespace {

// After an error answer the proxy stops sending and reads (and drops) what the
// client still sends for a moment before closing: closing a socket with
// unread input resets it, and the client could lose the answer.
constexpr auto linger_time = std::chrono::milliseconds(1000);
constexpr std::size_t max_linger_bytes = std::size_t{64} * 1024;

}  // namespace

std::string proxy_answer(int status, std::string_view phrase, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(phrase) +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

EgressSession::EgressSession(const EgressContext& context, unix_stream::socket client, std::uint64_t id)
    : m_context(context),
      m_client(std::move(client)),
      m_upstream(m_client.get_executor()),
      m_resolver(m_client.get_executor()),
      m_timer(m_client.get_executor()),
      m_tunnel(m_client, m_upstream),
      m_id(id) {}

void EgressSession::start() {
  m_timer.expires_after(m_context.options.head_timeout);
  m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
    if (error || self->m_phase != Phase::head) return;
    self->refuse(
        408, "Request Timeout",
        "request head not complete within " + std::to_string(self->m_context.options.head_timeout.count()) + " ms",
        false);
  });
  read_head();
}

void EgressSession::evict() {
  if (m_phase == Phase::head) note(false, "dropped: too many connections, and this one had sent no request");
  end();
}

void EgressSession::end() {
  if (m_phase == Phase::ended) return;
  m_phase = Phase::ended;
  m_tunnel.close();
  asio::error_code ignored;
  m_client.close(ignored);
  m_upstream.close(ignored);
  m_resolver.cancel();
  m_timer.cancel();
  if (m_decision) {
    m_context.log.record_bytes(*m_decision, m_tunnel.bytes_up(), m_tunnel.bytes_down(), m_tunnel.cut_up());
  }
  m_context.forget(m_id);
}

void EgressSession::read_head() {
  m_client.async_read_some(asio::buffer(m_head.data() + m_head_size, m_head.size() - m_head_size),
                           [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                             self->on_head_bytes(error, count);
                           });
}

void EgressSession::on_head_bytes(const asio::error_code& error, std::size_t count) {
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

void EgressSession::decide() {
  m_phase = Phase::connecting;
  m_timer.expires_after(m_context.options.connect_timeout);
  m_timer.async_wait([self = shared_from_this()](const asio::error_code& error) {
    if (error || self->m_phase != Phase::connecting) return;
    self->refuse(504, "Gateway Timeout",
                 "upstream unreachable: no connection within " +
                     std::to_string(self->m_context.options.connect_timeout.count()) + " ms",
                 true);
  });
  if (const auto refusal = refuse_destination(m_context.grants, m_request.host, m_request.port)) {
    return refuse(*refusal);
  }
  if (m_context.options.upload_cap && m_context.options.upload_cap->exhausted()) {
    return refuse(403, "Forbidden", "the job's upload limit (limits.egress_mb) is reached", true);
  }
  const auto target = request_target(m_request.host, m_request.port);
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
        self->connect(endpoints);
      });
}

// Connects to the addresses a name resolved to that the policy permits.
// These addresses are the ones connected to: nothing is resolved twice.
void EgressSession::connect(const std::vector<tcp::endpoint>& endpoints) {
  std::vector<asio::ip::address> addresses;
  for (const auto& endpoint : endpoints) addresses.push_back(endpoint.address());
  const auto choice = choose_addresses(m_context.grants, addresses, m_request.port);
  if (choice.refusal) return refuse(*choice.refusal);
  std::vector<tcp::endpoint> permitted;
  for (const auto& address : choice.permitted) {
    permitted.emplace_back(address, static_cast<unsigned short>(m_request.port));
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

void EgressSession::open_tunnel() {
  m_timer.cancel();
  asio::error_code ignored;
  m_upstream.set_option(tcp::no_delay(true), ignored);
  m_phase = Phase::tunnel;
  m_decision = note(true, "on the allow list");
  const bool tunnel_request = m_request.method == "CONNECT";
  std::string first_up = tunnel_request ? std::move(m_leftover) : m_request.upstream_head + m_leftover;
  std::string first_down = tunnel_request ? "HTTP/1.1 200 Connection established\r\n\r\n" : "";
  m_leftover.clear();
  if (const auto cap = m_context.options.upload_cap) {
    m_tunnel.limit_up([cap, shown = destination()](std::size_t wanted) {
      return static_cast<std::size_t>(cap->take(shown, wanted));
    });
  }
  m_tunnel.start(shared_from_this(), std::move(first_up), std::move(first_down), m_context.options.idle_timeout,
                 [this] { end(); });
}

void EgressSession::refuse(int status, std::string_view phrase, const std::string& reason, bool allowed) {
  note(allowed, reason);
  std::string body = "git-mullet egress proxy: ";
  if (!m_request.method.empty()) {
    body += m_request.method + " " + destination() + ": ";
  }
  body += reason + "\n";
  answer(proxy_answer(status, phrase, body));
}

void EgressSession::answer(std::string response) {
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

void EgressSession::drain() {
  m_client.async_read_some(asio::buffer(m_head),
                           [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                             if (self->m_phase != Phase::answered) return;
                             self->m_drained += count;
                             if (error || self->m_drained > max_linger_bytes) return self->end();
                             self->drain();
                           });
}

std::string EgressSession::destination() const {
  const bool v6 = m_request.host.find(':') != std::string::npos;
  return (v6 ? "[" + m_request.host + "]" : m_request.host) + ":" + std::to_string(m_request.port);
}

// Verdicts on requests go to the log at info; what a misbehaving client
// causes before it has made a request (garbage, stalls, evictions) only at
// debug, so that it cannot flood the log. All of it is in decisions().
std::uint64_t EgressSession::note(bool allowed, const std::string& reason) {
  if (allowed && reason == "on the allow list") {
    spdlog::debug("egress proxy: {} {} allowed", m_request.method, destination());
  } else if (allowed) {
    spdlog::info("egress proxy: {} {} allowed but failed: {}", m_request.method, destination(), reason);
  } else if (m_request.method.empty()) {
    spdlog::debug("egress proxy: refused a connection: {}", reason);
  } else {
    spdlog::info("egress proxy: {} {} refused: {}", m_request.method, destination(), reason);
  }
  return m_context.log.record(
      ProxyDecision{util::now_utc(), m_request.method, m_request.host, m_request.port, allowed, reason, 0, 0});
}

}  // namespace mullet::net
