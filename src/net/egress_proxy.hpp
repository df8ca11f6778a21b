// The egress proxy: the only way out of a sandbox that was granted network.
//
// A sandbox has no interface but loopback. The proxy runs outside it, listens
// on a unix socket that is bound into the sandbox (where net/bridge.hpp
// turns it back into 127.0.0.1:<port>), and speaks just enough HTTP/1.1 proxy
// to learn each destination: CONNECT host:port, and absolute-URI requests for
// plain http. Only the phase's grants get through (net/grant.hpp reads both
// the grants and the request's authority). It resolves names itself and
// refuses addresses of the host or its networks (net/address.hpp), so a grant
// of a name can never reach them; only a grant naming that exact address can
// (tests use "127.0.0.1:<port>"), and only the user's config can name one.
//
// Bounded by construction: one fixed buffer per request head and per relay
// direction, a deadline for the head and for the upstream connection, a cap on
// connections (at the cap, the oldest connection that has not sent a request
// yet makes room, so clients that open connections and stall cannot lock the
// others out), and a log that keeps the last decisions only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/address.hpp>
#include <nlohmann/json.hpp>

namespace mullet::net {

struct ProxyOptions {
  // From accepting a connection to its complete request head.
  std::chrono::milliseconds head_timeout{10'000};
  // Resolving the destination and connecting to it.
  std::chrono::milliseconds connect_timeout{10'000};
  // A tunnel with no byte either way for this long is closed; zero: never.
  std::chrono::milliseconds idle_timeout{600'000};
  std::size_t max_connections = 256;
  std::size_t max_decisions = 10'000;  // the log keeps the last this many
};

struct ProxyDecision {
  std::string time;    // RFC 3339 UTC
  std::string method;  // CONNECT, GET, ...; empty when no request was read
  std::string host;    // lower case, IPv6 without brackets
  int port = 0;
  bool allowed = false;  // the policy's verdict (the connection may still fail)
  std::string reason;    // "on the allow list", "not on the allow list", ...
  // Relayed through the tunnel; filled in when the connection ends.
  std::uint64_t bytes_up = 0;    // client to destination
  std::uint64_t bytes_down = 0;  // destination to client
};

nlohmann::json to_json(const ProxyDecision& decision);

// What the proxy needs of a request (net/http_head.hpp parses it).
struct ProxyRequest {
  std::string method;
  std::string host;  // lower case, IPv6 without brackets
  int port = 0;
  // Absolute-URI requests only (empty for CONNECT): the request line in
  // origin form ("GET /x?y HTTP/1.1"), and the whole head as it goes upstream:
  // that line, hop-by-hop headers dropped, Host replaced by the target's,
  // "Connection: close" (one client connection serves one request).
  std::string origin_line;
  std::string upstream_head;
};

class EgressProxy {
 public:
  // `grants`: as net::parse_grant reads them ("*" is anywhere but the
  // restricted addresses of net/address.hpp). Nothing happens until start().
  EgressProxy(std::vector<std::string> grants, std::string socket_path, ProxyOptions options = {});
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;
  ~EgressProxy();  // stop()

  // Creates the socket (mode 0666, so the sandbox's uid can connect) and
  // serves on a background thread. Throws mullet::Error when the path exists
  // or cannot be bound. Once per object.
  void start();
  // Closes the listening socket and every connection, joins the thread and
  // removes the socket file. Idempotent.
  void stop();

  // Connections currently open (any thread).
  std::size_t active_connections() const;
  // The last ProxyOptions::max_decisions decisions, oldest first (any thread).
  std::vector<ProxyDecision> decisions() const;
  nlohmann::json decisions_json() const;

  class Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

// Pure: whether a grant (net/grant.hpp) names host:port; "*" matches
// everything. Says nothing about what the host resolves to.
bool grant_allows(const std::vector<std::string>& grants, const std::string& host, int port);
// Pure: whether a grant is exactly this address and port ("*" never is).
bool grant_names_address(const std::vector<std::string>& grants, const asio::ip::address& address, int port);

// Pure: a complete request head (ending in an empty line) sent to a proxy:
// CONNECT host:port, or METHOD http://host[:port]/path, as
// http::parse_request_head reads them with http::proxy_forms. Nothing else
// (origin form, https:// targets, bare LF, obs-fold, control bytes, more than
// http::max_head_bytes): nullopt.
std::optional<ProxyRequest> parse_proxy_request(std::string_view head);

}  // namespace mullet::net
