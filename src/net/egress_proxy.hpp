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
//
// The parts: the pure policy (net/egress_policy.hpp), the decision log
// (net/egress_log.hpp), one session per connection (net/egress_session.hpp),
// and this, the server that ties them together (net/server.hpp's
// UnixSocketServer).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/egress_log.hpp"
#include "net/upload_cap.hpp"

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
  // Counts the bytes tunnels send upstream, per destination, and cuts the
  // tunnel that reaches its cap; shared with the phase's credential
  // endpoint. None: nothing is counted.
  std::shared_ptr<UploadCap> upload_cap;
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

}  // namespace mullet::net
