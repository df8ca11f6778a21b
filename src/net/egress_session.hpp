// One client connection of the egress proxy: its request head, the decision
// (net/egress_policy.hpp), the upstream connection, then the tunnel; or an
// error answer. A Session of net/server.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio.hpp>

#include "net/egress_log.hpp"
#include "net/egress_policy.hpp"
#include "net/egress_proxy.hpp"
#include "net/http_head.hpp"
#include "net/relay.hpp"

namespace mullet::net {

// What every session of one proxy shares; it outlives them.
struct EgressContext {
  const std::vector<std::string>& grants;
  const ProxyOptions& options;
  DecisionLog& log;
  std::function<void(std::uint64_t id)> forget;  // the server's, on its thread
};

// The text of an error answer of the proxy's own.
std::string proxy_answer(int status, std::string_view phrase, const std::string& body);

class EgressSession : public std::enable_shared_from_this<EgressSession> {
 public:
  using unix_stream = asio::local::stream_protocol;
  using tcp = asio::ip::tcp;

  EgressSession(const EgressContext& context, unix_stream::socket client, std::uint64_t id);

  void start();
  // Holds a slot without using it: no request yet, or already answered.
  bool evictable() const { return m_phase == Phase::head || m_phase == Phase::answered; }
  // Makes room for a new connection.
  void evict();
  // Closes everything; the handlers still pending find the phase ended.
  void end();

 private:
  enum class Phase { head, connecting, tunnel, answered, ended };

  void read_head();
  void on_head_bytes(const asio::error_code& error, std::size_t count);
  void decide();
  void connect(const std::vector<tcp::endpoint>& endpoints);
  void open_tunnel();
  void refuse(int status, std::string_view phrase, const std::string& reason, bool allowed);
  void refuse(const ProxyRefusal& refusal) { refuse(refusal.status, refusal.phrase, refusal.reason, refusal.allowed); }
  void answer(std::string response);
  void drain();
  std::string destination() const;
  std::uint64_t note(bool allowed, const std::string& reason);

  const EgressContext& m_context;
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

}  // namespace mullet::net
