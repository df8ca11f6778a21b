#include "net/egress_proxy.hpp"

#include <utility>

#include <spdlog/spdlog.h>
#include <asio.hpp>

#include "net/egress_session.hpp"
#include "net/server.hpp"
#include "util/clock.hpp"

namespace mullet::net {

class EgressProxy::Impl {
 public:
  using unix_stream = asio::local::stream_protocol;

  Impl(std::vector<std::string> grants_in, std::string socket_path, ProxyOptions options_in)
      : m_grants(std::move(grants_in)),
        m_options(std::move(options_in)),
        m_log(m_options.max_decisions),
        m_context{m_grants, m_options, m_log, [this](std::uint64_t id) { m_server.forget(id); }},
        m_server(
            "egress proxy", "the egress proxy", std::move(socket_path), m_options.max_connections,
            [this](unix_stream::socket socket, std::uint64_t id) {
              return std::make_shared<EgressSession>(m_context, std::move(socket), id);
            },
            [this](unix_stream::socket socket) { refuse_at_capacity(std::move(socket)); }) {}

  // The socket itself is no secret (it reaches only the grants); the
  // directory holding it guards it.
  void start() { m_server.start(); }
  void stop() { m_server.stop(); }
  std::size_t active() const { return m_server.active(); }
  std::vector<ProxyDecision> decisions() const { return m_log.decisions(); }

 private:
  void refuse_at_capacity(unix_stream::socket socket) {
    const std::string reason = "too many connections";
    spdlog::debug("egress proxy: refused a connection: {}", reason);
    m_log.record(ProxyDecision{util::now_utc(), "", "", 0, false, reason, 0, 0});
    answer_and_close(socket, proxy_answer(503, "Service Unavailable", "git-mullet egress proxy: " + reason + "\n"));
  }

  const std::vector<std::string> m_grants;
  const ProxyOptions m_options;
  DecisionLog m_log;
  const EgressContext m_context;
  // Declared last, destroyed first: its io context, the handlers still queued
  // and the sessions they hold go before anything they refer to.
  UnixSocketServer<EgressSession> m_server;
};

EgressProxy::EgressProxy(std::vector<std::string> grants, std::string socket_path, ProxyOptions options)
    : m_impl(std::make_unique<Impl>(std::move(grants), std::move(socket_path), std::move(options))) {}

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
