// One connection to the credential endpoint, one request: its head, its
// body, the upstream exchange and the answer streamed back; or an answer of
// the endpoint's own. A Session of net/server.hpp.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "net/api_ledger.hpp"
#include "net/api_usage.hpp"
#include "net/credential_endpoint.hpp"
#include "net/http_body.hpp"
#include "net/http_head.hpp"
#include "net/upstream_client.hpp"

namespace mullet::net {

// What every session of one endpoint shares; it outlives them. The io
// thread only, but for the ledger.
struct CredentialEndpointState {
  CredentialEndpointState(const CredentialEndpointOptions& options_in, std::function<void(std::uint64_t)> forget_in);

  // The message a request gets once the budget is spent; nullopt before.
  std::optional<std::string> budget_refusal() const { return ledger.budget_refusal(); }
  void finish(ApiRequestRecord record, bool metered_route, bool complete) {
    ledger.finish(std::move(record), metered_route, complete);
  }
  // A session that has ended.
  void forget(std::uint64_t id) { forget_session(id); }
  // nullptr for an http upstream (and before the endpoint has started).
  asio::ssl::context* tls() { return tls_context ? &*tls_context : nullptr; }

  const CredentialEndpointOptions& options;
  const http::Header credential;
  const std::string destination;  // "host:port", for the totals and reasons
  ApiLedger ledger;
  std::optional<asio::ssl::context> tls_context;  // https upstreams, from start()
  std::size_t buffered_request_bytes = 0;         // request bodies held by every session
  const std::function<void(std::uint64_t)> forget_session;
};

// One client connection, one request: its head, its body, the upstream
// exchange and the answer streamed back; or an answer of the endpoint's own.
class ApiSession : public std::enable_shared_from_this<ApiSession> {
 public:
  using unix_stream = asio::local::stream_protocol;
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t buffer_size = std::size_t{16} * 1024;

  ApiSession(CredentialEndpointState& endpoint, unix_stream::socket client, std::uint64_t id);

  void start();

  // Holds a slot without using it: no request yet, or already answered.
  bool evictable() const { return m_phase == Phase::head || m_phase == Phase::answered; }

  void evict();

  // Closes everything; the handlers still pending find the phase ended.
  void end();

 private:
  enum class Phase { head, body, connecting, exchanging, streaming, answered, ended };

  // -------------------------------------------------------------------------
  // The request

  void read_head();

  void on_head_bytes(const asio::error_code& error, std::size_t count);

  // Everything that can be refused before the body is read.
  void decide();

  void refuse_too_large();

  // 413: the request would pass the job's upload cap, or it is reached.
  void refuse_upload();

  // What arrived with the head, then from the socket, until the body is whole.
  void take_body_bytes();

  void read_body();

  // False when the request was refused.
  bool add_body_bytes(std::string_view bytes);

  void give_body_back();

  bool body_complete() const { return m_chunked_request ? m_chunked_in.done() : m_body.size() == m_body_expected; }

  void client_left();

  // -------------------------------------------------------------------------
  // Upstream

  void connect();
  // Under a budget, a metered request may cost at most what remains of it
  // (net/request_cap.hpp): refused, or forwarded with its max_tokens lowered
  // and its cost cap held. False when it was refused.
  bool cap_to_budget();

  void send_request();

  void read_response_head();

  void on_response_head_bytes(const asio::error_code& error, std::size_t count);

  // The client gets the upstream's status and headers, with framing of our
  // own: the body as it arrives, chunked again when it came chunked (so that
  // a cut is visible), and the connection closed after it.
  void begin_answer(http::ResponseHead response, const std::string& body_start);

  // Meters and frames a piece of the upstream's body, then writes what there
  // is to the client and reads on.
  void take_answer_bytes(std::string_view bytes);

  void after_write();

  void finish_answer();

  // The answer cannot be completed: the client sees the connection close
  // without the end of the body.
  void cut_answer(const std::string& reason);

  // -------------------------------------------------------------------------
  // Answers of our own, and the end

  void fail_upstream(ApiOutcome outcome, const std::string& reason, bool retry);

  void refuse(int status, std::string_view type, ApiOutcome outcome, const std::string& reason, bool retry = false);

  void note_failure() const;

  void answer(std::string response, int status);

  void linger();

  void drain();

  void arm_timer(std::chrono::milliseconds duration);

  void on_timer(std::chrono::milliseconds duration);

  void close_upstream();

  static void release(std::string& text);

  // Once, when the outcome is known.
  void write_record();

  CredentialEndpointState& m_endpoint;
  const CredentialEndpointOptions& m_options;
  unix_stream::socket m_client;
  UpstreamConnection m_upstream;
  asio::steady_timer m_timer;  // head deadline, connect deadline, idle checks, linger
  const std::uint64_t m_id;
  const Clock::time_point m_started;
  Clock::time_point m_last_activity{};
  Phase m_phase = Phase::head;
  bool m_silent = false;  // nothing worth a record happened
  bool m_recorded = false;

  std::array<char, http::max_head_bytes> m_head;  // not cleared: never read before written
  std::size_t m_head_size = 0;
  http::RequestHead m_request;
  std::string m_body_start;  // what came with the head
  bool m_chunked_request = false;
  http::ChunkedDecoder m_chunked_in;
  std::uint64_t m_body_expected = 0;
  std::string m_body;
  std::size_t m_reserved = 0;  // of the endpoint's buffered_request_bytes
  std::string m_request_model;
  bool m_metered = false;
  std::string m_upstream_head;  // holds the credential: released once sent

  std::array<char, http::max_head_bytes> m_response_head;
  std::size_t m_response_head_size = 0;
  http::ResponseHead m_response;
  http::ChunkedDecoder m_chunked_out;
  std::uint64_t m_body_remaining = 0;
  bool m_client_chunked = false;
  bool m_answer_done = false;
  bool m_answer_broken = false;
  bool m_body_complete = false;
  bool m_client_alive = true;
  bool m_client_left_early = false;
  std::optional<UsageMeter> m_meter;

  std::array<char, buffer_size> m_client_buffer;
  std::array<char, buffer_size> m_upstream_buffer;
  std::string m_out;  // to the client
  std::size_t m_drained = 0;
  ApiRequestRecord m_record;
};

}  // namespace mullet::net
