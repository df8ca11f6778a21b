#include "net/credential_session.hpp"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "net/credential_rules.hpp"
#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::net {
namespace {

// After answering, the endpoint stops sending and reads (and drops) what the
// client still sends for a moment before closing: closing a socket with
// unread input resets it, and the client could lose the answer.
constexpr auto linger_time = std::chrono::milliseconds(2000);
constexpr std::size_t max_recorded_path = 256;
constexpr std::string_view who = "credential endpoint";

}  // namespace

CredentialEndpointState::CredentialEndpointState(const CredentialEndpointOptions& options_in,
                                                 std::function<void(std::uint64_t)> forget_in)
    : options(options_in),
      credential(value_or_throw(credential_header(options.header, options.credential))),
      destination(options.upstream.destination.to_string()),
      ledger(destination, options.budget_usd, options.spent_before_usd, options.max_records),
      forget_session(std::move(forget_in)) {}

ApiSession::ApiSession(CredentialEndpointState& endpoint, unix_stream::socket client, std::uint64_t id)
    : m_endpoint(endpoint),
      m_options(endpoint.options),
      m_client(std::move(client)),
      m_upstream(m_client.get_executor(), endpoint.tls()),
      m_timer(m_client.get_executor()),
      m_id(id),
      m_started(Clock::now()) {}

void ApiSession::refuse_upload() {
  refuse(413, "request_too_large", ApiOutcome::egress,
         "this job's upload limit (limits.egress_mb, " +
             std::to_string(m_options.upload_cap->limit_bytes() / (std::uint64_t{1} << 20U)) +
             " MiB) is reached; no further requests are forwarded");
}

void ApiSession::note_failure() const {
  spdlog::warn("{}: {} {}: {}", who, m_request.method, m_record.path, m_record.reason);
}

void ApiSession::start() {
  m_record.time = util::now_utc();
  arm_timer(m_options.head_timeout);
  read_head();
}

void ApiSession::evict() {
  if (m_phase == Phase::head) m_silent = true;
  end();
}

// Closes everything; the handlers still pending find the phase ended.
void ApiSession::end() {
  if (m_phase == Phase::ended) return;
  // Only stop() (or an eviction, which is silent) ends a request that has
  // not been answered.
  const auto ended_in = m_phase;
  m_phase = Phase::ended;
  asio::error_code ignored;
  m_client.close(ignored);
  m_upstream.close();
  m_timer.cancel();
  give_body_back();
  if (ended_in == Phase::head && m_head_size == 0) m_silent = true;
  if (ended_in != Phase::answered) {
    m_record.outcome = ApiOutcome::stopped;
    m_record.reason = ended_in == Phase::head ? "the endpoint stopped before the request was complete"
                                              : "the endpoint stopped while the request was in flight";
  }
  write_record();
  m_endpoint.forget(m_id);
}

// -------------------------------------------------------------------------
// The request
void ApiSession::read_head() {
  m_client.async_read_some(asio::buffer(m_head.data() + m_head_size, m_head.size() - m_head_size),
                           [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                             self->on_head_bytes(error, count);
                           });
}

void ApiSession::on_head_bytes(const asio::error_code& error, std::size_t count) {
  if (m_phase != Phase::head) return;
  if (error) {
    if (m_head_size == 0) m_silent = true;  // connected and left: nothing to record
    m_record.outcome = ApiOutcome::client_gone;
    m_record.reason = "the client closed before completing its request";
    m_phase = Phase::answered;
    return end();
  }
  const std::size_t scanned = m_head_size;
  m_head_size += count;
  const std::string_view received(m_head.data(), m_head_size);
  const auto scan = http::scan_request_head(received, scanned, http::server_forms);
  switch (scan.progress) {
    case http::HeadProgress::incomplete: return read_head();
    case http::HeadProgress::malformed:
      return refuse(400, "invalid_request_error", ApiOutcome::malformed, "malformed request");
    case http::HeadProgress::too_large:
      return refuse(431, "invalid_request_error", ApiOutcome::malformed,
                    "request head larger than " + std::to_string(http::max_head_bytes) + " bytes");
    case http::HeadProgress::complete: break;
  }
  auto request = http::parse_request_head(received.substr(0, scan.size), http::server_forms);
  if (!request) return refuse(400, "invalid_request_error", ApiOutcome::malformed, "malformed request");
  m_request = std::move(*request);
  m_body_start.assign(received.substr(scan.size));
  m_record.method = m_request.method;
  m_record.path = path_without_query(m_request.path).substr(0, max_recorded_path);
  decide();
}

// Everything that can be refused before the body is read.
void ApiSession::decide() {
  if (m_request.method == "HEAD" && m_request.path == "/") {
    // Claude Code warms its connection up with a HEAD of the base URL,
    // without a key, and ignores the answer: not worth a refusal.
    m_silent = true;
    return answer("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 200);
  }
  if (!carries_sentinel(m_request.headers, m_options.sentinel)) {
    return refuse(401, "authentication_error", ApiOutcome::no_sentinel,
                  "this endpoint serves only requests that carry this job's key (the sentinel)");
  }
  const auto path = path_without_query(m_request.path);
  const auto route = std::find_if(m_options.routes.begin(), m_options.routes.end(),
                                  [&](const ApiRoute& r) { return r.method == m_request.method && r.path == path; });
  if (route == m_options.routes.end()) {
    return refuse(404, "not_found_error", ApiOutcome::not_served,
                  "git-mullet's API endpoint does not forward " + m_request.method + " " + m_record.path);
  }
  m_metered = route->metered;
  if (const auto refusal = m_endpoint.budget_refusal()) {
    return refuse(402, "billing_error", ApiOutcome::budget, *refusal);
  }
  if (m_options.upload_cap && m_options.upload_cap->exhausted()) return refuse_upload();
  const auto expectations = http::header_values(m_request.headers, "expect");
  bool continue_expected = false;
  for (const auto expectation : expectations) {
    if (util::to_lower(expectation) != "100-continue") {
      return refuse(417, "invalid_request_error", ApiOutcome::malformed, "unsupported expectation");
    }
    continue_expected = m_request.version == "HTTP/1.1";
  }
  const auto codings = http::header_values(m_request.headers, "transfer-encoding");
  const auto lengths = http::header_values(m_request.headers, "content-length");
  if (!codings.empty()) {
    if (!lengths.empty() || codings.size() != 1 || util::to_lower(codings.front()) != "chunked" ||
        m_request.version != "HTTP/1.1") {
      return refuse(400, "invalid_request_error", ApiOutcome::malformed,
                    "request body framing not understood (only chunked, alone, is)");
    }
    m_chunked_request = true;
  } else if (!lengths.empty()) {
    std::optional<std::uint64_t> length;
    for (const auto text : lengths) {
      std::uint64_t value = 0;
      const auto trimmed = util::trim(text);
      const auto [parsed_end, parse_error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
      if (trimmed.empty() || parse_error != std::errc() || parsed_end != trimmed.data() + trimmed.size() ||
          (length && *length != value) || trimmed.front() == '+' || trimmed.front() == '-') {
        return refuse(400, "invalid_request_error", ApiOutcome::malformed, "malformed Content-Length");
      }
      length = value;
    }
    m_body_expected = *length;
  }
  if (!m_chunked_request && m_body_expected > m_options.max_request_body) return refuse_too_large();
  m_phase = Phase::body;
  m_last_activity = Clock::now();
  arm_timer(m_options.idle_timeout);
  if (continue_expected) {
    m_out = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(m_client, asio::buffer(m_out),
                      [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                        if (self->m_phase != Phase::body) return;
                        if (error) return self->client_left();
                        self->m_out.clear();
                        self->take_body_bytes();
                      });
    return;
  }
  take_body_bytes();
}

void ApiSession::refuse_too_large() {
  refuse(413, "request_too_large", ApiOutcome::malformed,
         "request body larger than " + std::to_string(m_options.max_request_body) + " bytes");
}

// What arrived with the head, then from the socket, until the body is whole.
void ApiSession::take_body_bytes() {
  std::string pending = std::move(m_body_start);
  m_body_start.clear();
  if (!pending.empty() && !add_body_bytes(pending)) return;
  if (body_complete()) return connect();
  read_body();
}

void ApiSession::read_body() {
  m_client.async_read_some(asio::buffer(m_client_buffer),
                           [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                             if (self->m_phase != Phase::body) return;
                             if (error) return self->client_left();
                             self->m_last_activity = Clock::now();
                             if (!self->add_body_bytes({self->m_client_buffer.data(), count})) return;
                             if (self->body_complete()) return self->connect();
                             self->read_body();
                           });
}

// False when the request was refused.
bool ApiSession::add_body_bytes(std::string_view bytes) {
  if (m_chunked_request) {
    m_chunked_in.feed(bytes, m_body);
    if (m_chunked_in.failed()) {
      refuse(400, "invalid_request_error", ApiOutcome::malformed, "malformed chunked request body");
      return false;
    }
  } else {
    m_body.append(bytes.substr(0, m_body_expected - m_body.size()));
  }
  if (m_body.size() > m_options.max_request_body) {
    refuse_too_large();
    return false;
  }
  // Bodies wait whole in memory; together they are bounded too.
  auto& buffered = m_endpoint.buffered_request_bytes;
  const auto growth = m_body.size() - m_reserved;
  if (buffered + growth > m_options.max_buffered_request_bytes) {
    refuse(503, "overloaded_error", ApiOutcome::busy,
           "more request bytes arriving at once than the endpoint holds; try again", true);
    return false;
  }
  buffered += growth;
  m_reserved = m_body.size();
  return true;
}

void ApiSession::give_body_back() {
  m_endpoint.buffered_request_bytes -= m_reserved;
  m_reserved = 0;
  release(m_body);
}

void ApiSession::client_left() {
  m_record.outcome = ApiOutcome::client_gone;
  m_record.reason = "the client closed before sending its whole request";
  m_phase = Phase::answered;
  end();
}

// -------------------------------------------------------------------------
// Upstream
void ApiSession::connect() {
  // Another request may have spent the rest while this body arrived.
  if (const auto refusal = m_endpoint.budget_refusal()) {
    return refuse(402, "billing_error", ApiOutcome::budget, *refusal);
  }
  if (!cap_to_budget()) return;
  UsageMeter request_model(false);
  request_model.feed(m_body);
  m_request_model = request_model.model();
  m_upstream_head = upstream_request_head(m_request, m_options.upstream, m_endpoint.credential, m_body.size());
  m_phase = Phase::connecting;
  arm_timer(m_options.connect_timeout);
  m_upstream.open(m_options.upstream.destination, m_endpoint.destination,
                  [self = shared_from_this()](const std::optional<UpstreamFailure>& failure) {
                    if (self->m_phase != Phase::connecting) return;
                    if (failure) return self->fail_upstream(failure->outcome, failure->reason, failure->retry);
                    self->send_request();
                  });
}

bool ApiSession::cap_to_budget() {
  if (!m_metered || m_options.budget_usd <= 0) return true;
  const auto dialect =
      m_record.path.ends_with("/chat/completions") ? ApiDialect::chat_completions : ApiDialect::messages;
  auto& ledger = m_endpoint.ledger;
  const auto headroom = ledger.headroom();
  auto cap = cap_request(m_body, dialect, headroom.usd, m_options.prices);
  if (cap.verdict == RequestCap::Verdict::unaffordable && headroom.others_in_flight &&
      cap_request(m_body, dialect, headroom.unheld_usd, m_options.prices).verdict == RequestCap::Verdict::forward) {
    // Room may come back when the requests in flight end.
    m_record.cap = std::move(cap);
    refuse(429, "rate_limit_error", ApiOutcome::budget,
           "requests in flight may spend what remains of this job's API budget: " + m_record.cap->reason +
               "; try again when they have ended",
           true);
    return false;
  }
  auto body = std::move(cap.body);
  cap.body.reset();
  m_record.cap = cap;
  switch (cap.verdict) {
    case RequestCap::Verdict::malformed:
      refuse(400, "invalid_request_error", ApiOutcome::malformed, cap.reason);
      return false;
    case RequestCap::Verdict::unaffordable:
      ledger.exhaust(cap.reason);
      refuse(402, "billing_error", ApiOutcome::budget, ledger.budget_refusal().value_or(cap.reason));
      return false;
    case RequestCap::Verdict::forward: break;
  }
  if (body) {
    auto& buffered = m_endpoint.buffered_request_bytes;
    buffered -= m_reserved;
    m_body = std::move(*body);
    m_reserved = m_body.size();
    buffered += m_reserved;
    spdlog::debug("{}: {} {}: max_tokens lowered from {} to {}", who, m_request.method, m_record.path,
                  cap.max_tokens_requested.value_or(0), cap.max_tokens_forwarded.value_or(0));
  }
  ledger.hold(cap.most_usd);
  return true;
}

void ApiSession::send_request() {
  // Counted before a byte goes: what would pass the cap does not leave at all.
  if (m_options.upload_cap &&
      !m_options.upload_cap->take_all(m_endpoint.destination, m_upstream_head.size() + m_body.size())) {
    close_upstream();
    return refuse_upload();
  }
  m_phase = Phase::exchanging;
  m_last_activity = Clock::now();
  arm_timer(m_options.idle_timeout);
  const std::array<asio::const_buffer, 2> request = {asio::buffer(m_upstream_head), asio::buffer(m_body)};
  m_upstream.write(request, [self = shared_from_this()](const asio::error_code& error, std::size_t written) {
    if (self->m_phase != Phase::exchanging) return;
    self->m_record.bytes_up += written;
    if (error) {
      return self->fail_upstream(
          ApiOutcome::upstream_failed,
          "sending the request to " + self->m_endpoint.destination + " failed: " + error.message(), true);
    }
    self->m_last_activity = Clock::now();
    self->release(self->m_upstream_head);
    self->give_body_back();
    self->read_response_head();
  });
}

void ApiSession::read_response_head() {
  m_upstream.read_some(
      asio::buffer(m_response_head.data() + m_response_head_size, m_response_head.size() - m_response_head_size),
      [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
        self->on_response_head_bytes(error, count);
      });
}

void ApiSession::on_response_head_bytes(const asio::error_code& error, std::size_t count) {
  if (m_phase != Phase::exchanging) return;
  m_record.bytes_down += count;
  if (error) {
    return fail_upstream(ApiOutcome::upstream_failed,
                         m_endpoint.destination + " closed without answering: " + error.message(), true);
  }
  m_last_activity = Clock::now();
  std::size_t scanned = m_response_head_size;
  m_response_head_size += count;
  while (true) {
    const std::string_view received(m_response_head.data(), m_response_head_size);
    const auto scan = http::scan_response_head(received, scanned);
    if (scan.progress == http::HeadProgress::incomplete) return read_response_head();
    if (scan.progress != http::HeadProgress::complete) {
      return fail_upstream(ApiOutcome::upstream_failed, m_endpoint.destination + " sent a response head too large",
                           true);
    }
    auto response = http::parse_response_head(received.substr(0, scan.size), m_request.method);
    if (!response || response->status == 101) {
      return fail_upstream(ApiOutcome::upstream_failed, m_endpoint.destination + " sent a malformed response", true);
    }
    const std::string rest(received.substr(scan.size));
    if (response->status < 200) {
      // An interim answer (103 Early Hints): the real one follows.
      std::copy(rest.begin(), rest.end(), m_response_head.begin());
      m_response_head_size = rest.size();
      scanned = 0;
      if (rest.empty()) return read_response_head();
      continue;
    }
    return begin_answer(std::move(*response), rest);
  }
}

// The client gets the upstream's status and headers, with framing of our
// own: the body as it arrives, chunked again when it came chunked (so that
// a cut is visible), and the connection closed after it.
void ApiSession::begin_answer(http::ResponseHead response, const std::string& body_start) {
  m_phase = Phase::streaming;
  m_response = std::move(response);
  m_record.status = m_response.status;
  m_record.outcome = ApiOutcome::forwarded;
  const auto content_types = http::header_values(m_response.headers, "content-type");
  const bool event_stream =
      !content_types.empty() && util::to_lower(util::trim(content_types.front())).starts_with("text/event-stream");
  m_meter.emplace(event_stream);
  m_client_chunked = m_response.framing == http::BodyFraming::chunked && m_request.version == "HTTP/1.1";
  m_body_remaining = m_response.content_length;

  m_out = client_response_head(m_response, m_client_chunked);
  take_answer_bytes(body_start);
}

// Meters and frames a piece of the upstream's body, then writes what there
// is to the client and reads on.
void ApiSession::take_answer_bytes(std::string_view bytes) {
  std::string data;
  switch (m_response.framing) {
    case http::BodyFraming::none: m_answer_done = true; break;
    case http::BodyFraming::length: {
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(m_body_remaining, bytes.size()));
      data.assign(bytes.substr(0, take));
      m_body_remaining -= take;
      m_answer_done = m_body_remaining == 0;
      break;
    }
    case http::BodyFraming::chunked:
      m_chunked_out.feed(bytes, data);
      if (m_chunked_out.failed()) m_answer_broken = true;
      m_answer_done = m_chunked_out.done();
      break;
    case http::BodyFraming::until_close: data.assign(bytes); break;
  }
  if (!data.empty()) m_meter->feed(data);
  if (m_client_alive) {
    m_out += m_client_chunked ? http::chunk(data) : data;
    if (m_answer_done && m_client_chunked) m_out += http::last_chunk;
  }
  if (m_answer_broken) {
    return cut_answer(m_endpoint.destination + " sent a malformed chunked body");
  }
  if (!m_client_alive || m_out.empty()) return after_write();
  asio::async_write(m_client, asio::buffer(m_out),
                    [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                      if (self->m_phase != Phase::streaming) return;
                      if (error) {
                        // Read the rest anyway: what it costs is counted.
                        self->m_client_alive = false;
                        self->m_client_left_early = true;
                      } else {
                        self->m_last_activity = Clock::now();
                      }
                      self->m_out.clear();
                      self->after_write();
                    });
}

void ApiSession::after_write() {
  m_out.clear();
  if (m_answer_done) return finish_answer();
  m_upstream.read_some(
      asio::buffer(m_upstream_buffer), [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
        if (self->m_phase != Phase::streaming) return;
        self->m_record.bytes_down += count;
        if (error) {
          const bool closed = error == asio::error::eof || error == asio::ssl::error::stream_truncated;
          if (closed && self->m_response.framing == http::BodyFraming::until_close) {
            self->m_answer_done = true;
            return self->finish_answer();
          }
          return self->cut_answer(self->m_endpoint.destination + " broke off the answer: " + error.message());
        }
        self->m_last_activity = Clock::now();
        self->take_answer_bytes({self->m_upstream_buffer.data(), count});
      });
}

void ApiSession::finish_answer() {
  m_meter->finish();
  m_body_complete = true;
  close_upstream();
  if (m_client_left_early) {
    m_record.reason = "forwarded; the client closed before the answer ended (read to its end, to meter it)";
  } else {
    m_record.reason = "forwarded";
  }
  // Counted now, not when the client has gone: its next request may come
  // at once, and must see what this one cost.
  write_record();
  linger();
}

// The answer cannot be completed: the client sees the connection close
// without the end of the body.
void ApiSession::cut_answer(const std::string& reason) {
  if (m_meter) m_meter->finish();
  m_record.outcome = ApiOutcome::upstream_failed;
  m_record.reason = reason;
  note_failure();
  m_phase = Phase::answered;
  end();
}

// -------------------------------------------------------------------------
// Answers of our own, and the end
void ApiSession::fail_upstream(ApiOutcome outcome, const std::string& reason, bool retry) {
  close_upstream();
  m_record.outcome = outcome;
  m_record.reason = reason;
  note_failure();
  answer(api_error_answer(502, "api_error", "git-mullet's API endpoint: " + reason, retry), 502);
}

void ApiSession::refuse(int status, std::string_view type, ApiOutcome outcome, const std::string& reason, bool retry) {
  m_record.outcome = outcome;
  m_record.reason = reason;
  if (m_request.method.empty()) {
    spdlog::debug("{}: refused a connection: {}", who, reason);
  } else {
    spdlog::info("{}: {} {} refused: {}", who, m_request.method, m_record.path, reason);
  }
  answer(api_error_answer(status, type, "git-mullet: " + reason, retry), status);
}

void ApiSession::answer(std::string response, int status) {
  m_phase = Phase::answered;
  m_record.status = status;
  write_record();
  asio::error_code ignored;
  m_client.cancel(ignored);  // a head or body read may be pending; linger() reads from now on
  m_upstream.cancel_resolve();
  m_out = std::move(response);
  arm_timer(linger_time);
  asio::async_write(m_client, asio::buffer(m_out),
                    [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                      if (self->m_phase != Phase::answered) return;
                      if (error) return self->end();
                      self->linger();
                    });
}

void ApiSession::linger() {
  m_phase = Phase::answered;
  arm_timer(linger_time);
  asio::error_code ignored;
  m_client.shutdown(asio::socket_base::shutdown_send, ignored);
  drain();
}

void ApiSession::drain() {
  m_client.async_read_some(asio::buffer(m_client_buffer),
                           [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                             if (self->m_phase != Phase::answered) return;
                             self->m_drained += count;
                             if (error || self->m_drained > self->m_options.max_request_body) return self->end();
                             self->drain();
                           });
}

void ApiSession::arm_timer(std::chrono::milliseconds duration) {
  const auto phase = m_phase;
  m_timer.expires_after(duration);
  m_timer.async_wait([self = shared_from_this(), phase, duration](const asio::error_code& error) {
    if (error || self->m_phase != phase) return;
    self->on_timer(duration);
  });
}

void ApiSession::on_timer(std::chrono::milliseconds duration) {
  const auto waited = std::to_string(duration.count()) + " ms";
  switch (m_phase) {
    case Phase::head:
      return refuse(408, "invalid_request_error", ApiOutcome::malformed, "request head not complete within " + waited);
    case Phase::connecting:
      return fail_upstream(ApiOutcome::upstream_unreachable,
                           "no connection to " + m_endpoint.destination + " within " + waited, true);
    case Phase::body:
    case Phase::exchanging:
    case Phase::streaming: {
      if (Clock::now() - m_last_activity < m_options.idle_timeout) {
        m_timer.expires_at(m_last_activity + m_options.idle_timeout);
        const auto phase = m_phase;
        m_timer.async_wait([self = shared_from_this(), phase, duration](const asio::error_code& error) {
          if (error || self->m_phase != phase) return;
          self->on_timer(duration);
        });
        return;
      }
      const auto idle = std::to_string(m_options.idle_timeout.count()) + " ms";
      if (m_phase == Phase::body) {
        return refuse(408, "invalid_request_error", ApiOutcome::malformed, "request body stalled for " + idle);
      }
      if (m_phase == Phase::exchanging) {
        return fail_upstream(ApiOutcome::upstream_failed, m_endpoint.destination + " sent nothing for " + idle, true);
      }
      return cut_answer(m_endpoint.destination + " sent nothing for " + idle);
    }
    case Phase::answered:
    case Phase::ended: return end();
  }
}

void ApiSession::close_upstream() {
  m_upstream.close();
}

void ApiSession::release(std::string& text) {
  text.clear();
  text.shrink_to_fit();
}

// Once, when the outcome is known.
void ApiSession::write_record() {
  if (m_silent || m_recorded) return;
  m_recorded = true;
  m_record.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - m_started).count();
  if (m_meter) {
    m_record.usage_found = m_meter->found();
    m_record.usage = m_meter->usage();
    m_record.model = m_meter->model();
  }
  if (m_record.model.empty()) m_record.model = m_request_model.substr(0, UsageMeter::max_model_bytes);
  if (m_record.usage_found) {
    const auto priced = m_options.prices.price(m_record.model, m_record.usage);
    m_record.cost_usd = priced.cost_usd;
    m_record.priced_by = priced.rule;
  }
  m_endpoint.finish(std::move(m_record), m_metered, m_body_complete);
}

}  // namespace mullet::net
