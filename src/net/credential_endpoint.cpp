#include "net/credential_endpoint.hpp"

#include <utility>

#include <spdlog/spdlog.h>
#include <asio.hpp>

#include "net/credential_session.hpp"
#include "net/server.hpp"
#include "util/clock.hpp"

namespace mullet::net {
namespace {

constexpr std::string_view who = "credential endpoint";

}  // namespace

class CredentialEndpoint::Impl {
 public:
  using unix_stream = asio::local::stream_protocol;

  Impl(std::string socket_path, CredentialEndpointOptions options_in)
      : options(std::move(options_in)),
        m_state(options, [this](std::uint64_t id) { m_server.forget(id); }),
        m_server(
            "credential endpoint", "the credential endpoint", std::move(socket_path), options.max_connections,
            [this](unix_stream::socket socket, std::uint64_t id) {
              return std::make_shared<ApiSession>(m_state, std::move(socket), id);
            },
            [this](unix_stream::socket socket) { refuse_at_capacity(std::move(socket)); }) {
    if (options.sentinel.empty()) throw failure("the credential endpoint needs a sentinel");
  }

  void start() {
    if (m_server.started()) throw failure("the credential endpoint was already started");
    if (options.upstream.tls) m_state.tls_context.emplace(make_tls_client_context(options.ca_file));
    m_server.start();
  }
  void stop() { m_server.stop(); }

  // Any thread.
  const ApiLedger& ledger() const { return m_state.ledger; }
  std::size_t active() const { return m_server.active(); }
  const std::string& socket_path() const { return m_server.socket_path(); }

  const CredentialEndpointOptions options;

 private:
  void refuse_at_capacity(unix_stream::socket socket) {
    spdlog::debug("{}: refused a connection: too many connections", who);
    ApiRequestRecord record;
    record.time = util::now_utc();
    record.status = 503;
    record.outcome = ApiOutcome::busy;
    record.reason = "too many connections";
    m_state.finish(std::move(record), false, false);
    answer_and_close(socket, api_error_answer(503, "overloaded_error", "git-mullet: too many connections", true));
  }

  CredentialEndpointState m_state;
  // Declared last, destroyed first: its io context, the handlers still queued
  // and the sessions they hold go before anything they refer to.
  UnixSocketServer<ApiSession> m_server;
};

CredentialEndpoint::CredentialEndpoint(std::string socket_path, CredentialEndpointOptions options)
    : m_impl(std::make_unique<Impl>(std::move(socket_path), std::move(options))) {}

CredentialEndpoint::~CredentialEndpoint() {
  stop();
}

void CredentialEndpoint::start() {
  m_impl->start();
}
void CredentialEndpoint::stop() {
  m_impl->stop();
}
const std::string& CredentialEndpoint::socket_path() const {
  return m_impl->socket_path();
}
std::size_t CredentialEndpoint::active_connections() const {
  return m_impl->active();
}
bool CredentialEndpoint::budget_exhausted() const {
  return m_impl->ledger().budget_exhausted();
}
bool CredentialEndpoint::upstream_down() const {
  return m_impl->ledger().upstream_down();
}
std::vector<ApiRequestRecord> CredentialEndpoint::records() const {
  return m_impl->ledger().records();
}
nlohmann::json CredentialEndpoint::records_json() const {
  auto json = nlohmann::json::array();
  for (const auto& record : records()) json.push_back(to_json(record));
  return json;
}
ApiTotals CredentialEndpoint::totals() const {
  return m_impl->ledger().totals();
}

}  // namespace mullet::net
