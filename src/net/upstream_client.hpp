// The credential endpoint's client side: one connection to its upstream,
// plain TCP or TLS (Asio's ssl layer on OpenSSL, the peer verified against
// the system's trust store or a given CA file, by name or by address).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "net/api_ledger.hpp"
#include "net/grant.hpp"

namespace mullet::net {

// A TLS client context that verifies peers against `ca_file` (PEM), or the
// system's trust store when it is empty; TLS 1.2 at least. Throws
// mullet::Error.
asio::ssl::context make_tls_client_context(const std::string& ca_file);

// Why the upstream could not be reached, as the request's record says it.
struct UpstreamFailure {
  ApiOutcome outcome = ApiOutcome::upstream_failed;
  std::string reason;
  bool retry = true;  // whether the client may try again
};

class UpstreamConnection {
 public:
  using tcp = asio::ip::tcp;
  // Called once open() has connected (nullopt) or failed.
  using Opened = std::function<void(const std::optional<UpstreamFailure>& failure)>;

  // `tls`: nullptr for an http upstream.
  UpstreamConnection(const asio::any_io_executor& executor, asio::ssl::context* tls);

  // Resolves `target` (unless it is an address), connects and, for TLS,
  // verifies the peer's certificate for that name or address. `shown` names
  // the upstream in reasons ("host:port"). `opened` holds what must live
  // until it runs.
  void open(const Destination& target, const std::string& shown, Opened opened);

  tcp::socket& socket() { return m_tls ? m_tls->next_layer() : m_plain; }
  void cancel_resolve() { m_resolver.cancel(); }
  // Cancels a pending resolve and closes the socket.
  void close() {
    asio::error_code ignored;
    m_resolver.cancel();
    socket().close(ignored);
  }

  template <typename Buffers, typename Handler>
  void write(const Buffers& buffers, Handler handler) {
    if (m_tls) {
      asio::async_write(*m_tls, buffers, std::move(handler));
    } else {
      asio::async_write(m_plain, buffers, std::move(handler));
    }
  }

  template <typename Handler>
  void read_some(asio::mutable_buffer buffer, Handler handler) {
    if (m_tls) {
      m_tls->async_read_some(buffer, std::move(handler));
    } else {
      m_plain.async_read_some(buffer, std::move(handler));
    }
  }

 private:
  void connect_to(const std::vector<tcp::endpoint>& endpoints, const Destination& target, const std::string& shown,
                  Opened opened);
  void handshake(const Destination& target, const std::string& shown, Opened opened);

  tcp::socket m_plain;                                  // http upstreams
  std::optional<asio::ssl::stream<tcp::socket>> m_tls;  // https upstreams
  tcp::resolver m_resolver;
};

}  // namespace mullet::net
