#include "net/credential_endpoint.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <deque>
#include <mutex>
#include <utility>

#include <spdlog/spdlog.h>
#include <asio.hpp>
#include <asio/ssl.hpp>

#include "net/http_body.hpp"
#include "net/relay.hpp"
#include "net/server.hpp"
#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::net {
namespace {

using asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;
using Clock = std::chrono::steady_clock;

// After answering, the endpoint stops sending and reads (and drops) what the
// client still sends for a moment before closing: closing a socket with
// unread input resets it, and the client could lose the answer.
constexpr auto linger_time = std::chrono::milliseconds(2000);
constexpr std::size_t buffer_size = std::size_t{16} * 1024;
constexpr std::size_t max_recorded_path = 256;
constexpr std::string_view who = "credential endpoint";

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool has_control_byte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

bool equal_in_constant_time(std::string_view presented, std::string_view expected) {
  // The length is no secret (every sentinel has the same); the bytes are.
  return presented.size() == expected.size() && CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
  }
}

// An error as Anthropic's API reports one, which OpenAI-style clients read
// too (error.message). `retry`: whether the client may try again; Claude Code
// and the Anthropic SDKs obey x-should-retry before looking at the status.
std::string error_answer(int status, std::string_view type, const std::string& message, bool retry) {
  const nlohmann::json body = {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
  const auto text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
         "\r\nx-should-retry: " + (retry ? "true" : "false") + "\r\nConnection: close\r\n\r\n" + text;
}

std::string lower(std::string_view text) {
  return util::to_lower(text);
}

std::string path_without_query(std::string_view path) {
  return std::string(path.substr(0, path.find('?')));
}

std::string dollars(double value) {
  return "$" + util::format_decimal(value, 2);
}

bool is_upstream_failure(ApiOutcome outcome) {
  return outcome == ApiOutcome::upstream_unreachable || outcome == ApiOutcome::upstream_certificate ||
         outcome == ApiOutcome::upstream_failed;
}

class Session;

}  // namespace

// ---------------------------------------------------------------------------
// Pure parts

std::string UpstreamUrl::to_string() const {
  return (tls ? "https://" : "http://") + http::host_header_value(destination, tls ? 443 : 80) + path_prefix;
}

Result<UpstreamUrl> parse_upstream_url(std::string_view url) {
  const std::string shown =
      url.find('@') == std::string_view::npos ? "'" + std::string(url) + "'" : "(a URL with user info)";
  const auto bad = [&](const std::string& why) -> Result<UpstreamUrl> {
    return fail(usage_error("the API base URL " + shown + " is not usable: " + why,
                            "use https://host[:port][/path], or http:// for a gateway on your own network"));
  };
  if (std::any_of(url.begin(), url.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte <= 0x20 || byte >= 0x7f;
      })) {
    return bad("it holds blanks, control characters or non-ASCII bytes");
  }
  UpstreamUrl upstream;
  std::string_view rest;
  const auto lowered = lower(url.substr(0, 8));
  if (lowered.starts_with("https://")) {
    rest = url.substr(8);
  } else if (lowered.starts_with("http://")) {
    upstream.tls = false;
    rest = url.substr(7);
  } else {
    return bad("it must start with https:// (or http:// for a local gateway)");
  }
  const auto authority_end = rest.find_first_of("/?#");
  const auto authority = rest.substr(0, authority_end);
  if (authority.find('@') != std::string_view::npos) return bad("credentials do not belong in the URL");
  if (authority.empty()) return bad("it names no host");
  auto destination = parse_destination(authority, upstream.tls ? 443 : 80);
  if (!destination) return bad(destination.error().what());
  upstream.destination = std::move(*destination);
  auto path = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (path.find_first_of("?#") != std::string_view::npos) return bad("a base URL has no query or fragment");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  for (const auto& segment : util::split(path.empty() ? std::string_view() : path.substr(1), '/')) {
    if (path.empty()) break;
    if (segment.empty() || segment == "." || segment == "..") return bad("its path has an empty, '.' or '..' segment");
  }
  upstream.path_prefix = std::string(path);
  return upstream;
}

Result<http::Header> credential_header(const CredentialHeader& header, std::string_view credential) {
  if (header.name.empty() || !std::all_of(header.name.begin(), header.name.end(), is_token_char)) {
    return fail(
        usage_error("the credential header name '" + util::terminal_safe(header.name) + "' is not an HTTP header name",
                    "use x-api-key, or Authorization with a format such as \"Bearer {}\""));
  }
  const auto placeholder = header.format.find("{}");
  if (placeholder == std::string::npos || header.format.find("{}", placeholder + 2) != std::string::npos ||
      has_control_byte(header.format)) {
    return fail(usage_error("the credential header format '" + util::terminal_safe(header.format) +
                                "' must hold \"{}\" exactly once, and no control characters",
                            "for example \"Bearer {}\" or \"{}\""));
  }
  // Never quote the credential itself.
  if (credential.empty()) return fail(usage_error("the credential is empty"));
  if (has_control_byte(credential)) {
    return fail(usage_error("the credential holds a control character (a line break?)",
                            "give the key alone, without a trailing newline"));
  }
  if (credential.front() == ' ' || credential.front() == '\t' || credential.back() == ' ' ||
      credential.back() == '\t') {
    return fail(usage_error("the credential begins or ends with a blank"));
  }
  std::string value = header.format;
  value.replace(placeholder, 2, credential);
  return http::Header{header.name, std::move(value)};
}

std::string make_sentinel() {
  return "sk-mullet-" + util::random_hex(32);
}

bool carries_sentinel(const http::Headers& headers, std::string_view sentinel) {
  if (sentinel.empty()) return false;
  bool seen = false;
  bool all_match = true;
  for (const auto& [name, value] : headers) {
    const auto lowered = lower(name);
    std::string_view presented;
    if (lowered == "x-api-key") {
      presented = value;
    } else if (lowered == "authorization") {
      constexpr std::string_view scheme = "bearer ";
      if (value.size() <= scheme.size() || lower(std::string_view(value).substr(0, scheme.size())) != scheme) {
        seen = true;
        all_match = false;
        continue;
      }
      presented = std::string_view(value).substr(scheme.size());
      while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
    } else {
      continue;
    }
    seen = true;
    all_match = equal_in_constant_time(presented, sentinel) && all_match;
  }
  return seen && all_match;
}

std::vector<ApiRoute> default_api_routes() {
  return {{"POST", "/v1/messages", true},
          {"POST", "/v1/messages/count_tokens", false},
          {"POST", "/v1/chat/completions", true}};
}

std::string upstream_request_head(const http::RequestHead& request, const UpstreamUrl& upstream,
                                  const http::Header& credential, std::size_t body_size) {
  http::HeadRewrite rewrite;
  rewrite.target = upstream.path_prefix + request.path;
  rewrite.host = http::host_header_value(upstream.destination, upstream.tls ? 443 : 80);
  rewrite.drop = {"x-api-key",       "authorization", "proxy-authorization", "cookie",
                  "accept-encoding", "expect",        credential.name};
  rewrite.drop_framing = true;
  rewrite.add = {credential, {"Accept-Encoding", "identity"}};
  const bool has_body = !http::header_values(request.headers, "content-length").empty() ||
                        !http::header_values(request.headers, "transfer-encoding").empty() ||
                        request.method == "POST" || request.method == "PUT" || request.method == "PATCH";
  if (has_body) rewrite.add.push_back({"Content-Length", std::to_string(body_size)});
  return http::rewritten_head(request, rewrite);
}

std::string_view to_string(ApiOutcome outcome) {
  switch (outcome) {
    case ApiOutcome::forwarded: return "forwarded";
    case ApiOutcome::malformed: return "malformed";
    case ApiOutcome::no_sentinel: return "no_sentinel";
    case ApiOutcome::not_served: return "not_served";
    case ApiOutcome::budget: return "budget";
    case ApiOutcome::upstream_unreachable: return "upstream_unreachable";
    case ApiOutcome::upstream_certificate: return "upstream_certificate";
    case ApiOutcome::upstream_failed: return "upstream_failed";
    case ApiOutcome::client_gone: return "client_gone";
    case ApiOutcome::stopped: return "stopped";
    case ApiOutcome::busy: return "busy";
  }
  return "unknown";
}

std::string hint_for(ApiOutcome outcome) {
  switch (outcome) {
    case ApiOutcome::upstream_unreachable:
      return "check the API base URL and that the API is up and reachable from this machine";
    case ApiOutcome::upstream_certificate:
      return "the API's TLS certificate did not verify against the system's trust store; for a gateway with a "
             "certificate of its own, give its CA as ca_file";
    case ApiOutcome::upstream_failed:
      return "the API answered with something that is not HTTP, or broke off; check the API base URL";
    case ApiOutcome::budget: return "raise limits.cost_usd to let the job spend more";
    default: return {};
  }
}

nlohmann::json to_json(const ApiRequestRecord& record) {
  nlohmann::json json = {
      {"time", record.time},         {"method", record.method},          {"path", record.path},
      {"model", record.model},       {"usage", to_json(record.usage)},   {"usage_found", record.usage_found},
      {"cost_usd", record.cost_usd}, {"priced_by", record.priced_by},    {"status", record.status},
      {"bytes_up", record.bytes_up}, {"bytes_down", record.bytes_down},  {"outcome", to_string(record.outcome)},
      {"reason", record.reason},     {"duration_ms", record.duration_ms}};
  if (record.cap) json["cap"] = to_json(*record.cap);
  return json;
}

nlohmann::json to_json(const ApiTotals& totals) {
  auto json = nlohmann::json{{"requests", totals.requests},     {"forwarded", totals.forwarded},
                             {"refused", totals.refused},       {"usage", to_json(totals.usage)},
                             {"cost_usd", totals.cost_usd},     {"bytes_up", totals.bytes_up},
                             {"bytes_down", totals.bytes_down}, {"max_tokens_lowered", totals.max_tokens_lowered}};
  if (totals.last_failure) {
    json["last_failure"] = {{"outcome", to_string(*totals.last_failure)}, {"reason", totals.last_failure_reason}};
  }
  return json;
}

// ---------------------------------------------------------------------------
// The endpoint

class CredentialEndpoint::Impl {
 public:
  Impl(std::string socket_path_in, CredentialEndpointOptions options_in)
      : socket_path(std::move(socket_path_in)),
        options(std::move(options_in)),
        credential(value_or_throw(credential_header(options.header, options.credential))),
        destination(options.upstream.destination.to_string()),
        m_server(
            "credential endpoint", options.max_connections,
            [this](unix_stream::socket socket, std::uint64_t id) { return make_session(std::move(socket), id); },
            [this](unix_stream::socket socket) { refuse_at_capacity(std::move(socket)); }) {
    if (options.sentinel.empty()) throw failure("the credential endpoint needs a sentinel");
    m_exhausted = options.budget_usd > 0 && options.spent_before_usd >= options.budget_usd;
  }

  void start();
  void stop();

  // Any thread.
  void finish(ApiRequestRecord record, bool metered_route, bool complete);
  // The message a request gets once the budget is spent; nullopt before.
  std::optional<std::string> budget_refusal() const;
  // What a new request may spend: the budget less what is spent (`unheld`),
  // and less what requests in flight may still cost (`usd`).
  struct Headroom {
    double usd = 0;
    double unheld_usd = 0;
    bool others_in_flight = false;
  };
  Headroom headroom() const;
  // A forwarded request may cost up to `usd` until its record is finished.
  void hold(double usd);
  // A request the budget cannot pay for: forward nothing more.
  void exhaust(const std::string& why);
  bool budget_exhausted() const { return m_exhausted.load(); }
  std::vector<ApiRequestRecord> records() const {
    const std::lock_guard lock(m_mutex);
    return {m_records.begin(), m_records.end()};
  }
  ApiTotals totals() const {
    const std::lock_guard lock(m_mutex);
    return m_totals;
  }
  std::size_t active() const { return m_server.active(); }

  // The io thread only.
  void forget(std::uint64_t id) { m_server.forget(id); }
  std::size_t buffered_request_bytes = 0;  // request bodies held by every session
  asio::ssl::context& tls() { return *m_tls; }

  const std::string socket_path;
  const CredentialEndpointOptions options;
  const http::Header credential;
  const std::string destination;  // "host:port", for the totals

 private:
  std::shared_ptr<Session> make_session(unix_stream::socket socket, std::uint64_t id);
  void refuse_at_capacity(unix_stream::socket socket);

  mutable std::mutex m_mutex;
  std::deque<ApiRequestRecord> m_records;
  ApiTotals m_totals;
  std::string m_unmeasured;    // why the budget cannot be enforced, once it cannot
  std::string m_unaffordable;  // the request the budget could not pay for, once there was one
  double m_held_usd = 0;       // cost caps of the requests in flight
  std::size_t m_holds = 0;
  // The job's measured cost (m_mutex held).
  double spent() const { return options.spent_before_usd + m_totals.cost_usd; }
  std::atomic<bool> m_exhausted{false};

  bool m_started = false;
  bool m_created_socket = false;
  std::optional<asio::ssl::context> m_tls;
  // Declared last, destroyed first: its io context, the handlers still queued
  // and the sessions they hold go before anything they refer to.
  Server<unix_stream, Session> m_server;
};

namespace {

// One client connection, one request: its head, its body, the upstream
// exchange and the answer streamed back; or an answer of the endpoint's own.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(CredentialEndpoint::Impl& endpoint, unix_stream::socket client, std::uint64_t id)
      : m_endpoint(endpoint),
        m_options(endpoint.options),
        m_client(std::move(client)),
        m_plain(m_client.get_executor()),
        m_resolver(m_client.get_executor()),
        m_timer(m_client.get_executor()),
        m_id(id),
        m_started(Clock::now()) {
    if (m_options.upstream.tls) m_tls.emplace(m_client.get_executor(), endpoint.tls());
  }

  void start() {
    m_record.time = util::now_utc();
    arm_timer(m_options.head_timeout);
    read_head();
  }

  // Holds a slot without using it: no request yet, or already answered.
  bool evictable() const { return m_phase == Phase::head || m_phase == Phase::answered; }

  void evict() {
    if (m_phase == Phase::head) m_silent = true;
    end();
  }

  // Closes everything; the handlers still pending find the phase ended.
  void end() {
    if (m_phase == Phase::ended) return;
    // Only stop() (or an eviction, which is silent) ends a request that has
    // not been answered.
    const auto ended_in = m_phase;
    m_phase = Phase::ended;
    asio::error_code ignored;
    m_client.close(ignored);
    upstream_socket().close(ignored);
    m_resolver.cancel();
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

 private:
  enum class Phase { head, body, connecting, exchanging, streaming, answered, ended };

  // -------------------------------------------------------------------------
  // The request

  void read_head() {
    m_client.async_read_some(asio::buffer(m_head.data() + m_head_size, m_head.size() - m_head_size),
                             [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                               self->on_head_bytes(error, count);
                             });
  }

  void on_head_bytes(const asio::error_code& error, std::size_t count) {
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
  void decide() {
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
    const auto expectations = http::header_values(m_request.headers, "expect");
    bool continue_expected = false;
    for (const auto expectation : expectations) {
      if (lower(expectation) != "100-continue") {
        return refuse(417, "invalid_request_error", ApiOutcome::malformed, "unsupported expectation");
      }
      continue_expected = m_request.version == "HTTP/1.1";
    }
    const auto codings = http::header_values(m_request.headers, "transfer-encoding");
    const auto lengths = http::header_values(m_request.headers, "content-length");
    if (!codings.empty()) {
      if (!lengths.empty() || codings.size() != 1 || lower(codings.front()) != "chunked" ||
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

  void refuse_too_large() {
    refuse(413, "request_too_large", ApiOutcome::malformed,
           "request body larger than " + std::to_string(m_options.max_request_body) + " bytes");
  }

  // What arrived with the head, then from the socket, until the body is whole.
  void take_body_bytes() {
    std::string pending = std::move(m_body_start);
    m_body_start.clear();
    if (!pending.empty() && !add_body_bytes(pending)) return;
    if (body_complete()) return connect();
    read_body();
  }

  void read_body() {
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
  bool add_body_bytes(std::string_view bytes) {
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

  void give_body_back() {
    m_endpoint.buffered_request_bytes -= m_reserved;
    m_reserved = 0;
    release(m_body);
  }

  bool body_complete() const { return m_chunked_request ? m_chunked_in.done() : m_body.size() == m_body_expected; }

  void client_left() {
    m_record.outcome = ApiOutcome::client_gone;
    m_record.reason = "the client closed before sending its whole request";
    m_phase = Phase::answered;
    end();
  }

  // -------------------------------------------------------------------------
  // Upstream

  void connect() {
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
    const auto& target = m_options.upstream.destination;
    if (target.address) {
      return connect_to({tcp::endpoint(*target.address, static_cast<unsigned short>(target.port))});
    }
    m_resolver.async_resolve(
        target.host, std::to_string(target.port), tcp::resolver::numeric_service,
        [self = shared_from_this()](const asio::error_code& error, const tcp::resolver::results_type& results) {
          if (self->m_phase != Phase::connecting) return;
          if (error) {
            return self->fail_upstream(
                ApiOutcome::upstream_unreachable,
                "cannot resolve " + self->m_options.upstream.destination.host + ": " + error.message(), true);
          }
          std::vector<tcp::endpoint> endpoints;
          for (const auto& entry : results) endpoints.push_back(entry.endpoint());
          self->connect_to(endpoints);
        });
  }

  // Under a budget, a metered request may cost at most what remains of it
  // (net/request_cap.hpp): refused, or forwarded with its max_tokens lowered
  // and its cost cap held. False when it was refused.
  bool cap_to_budget() {
    if (!m_metered || m_options.budget_usd <= 0) return true;
    const auto dialect =
        m_record.path.ends_with("/chat/completions") ? ApiDialect::chat_completions : ApiDialect::messages;
    const auto headroom = m_endpoint.headroom();
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
        m_endpoint.exhaust(cap.reason);
        refuse(402, "billing_error", ApiOutcome::budget, m_endpoint.budget_refusal().value_or(cap.reason));
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
    m_endpoint.hold(cap.most_usd);
    return true;
  }

  void connect_to(const std::vector<tcp::endpoint>& endpoints) {
    asio::async_connect(
        upstream_socket(), endpoints, [self = shared_from_this()](const asio::error_code& error, const tcp::endpoint&) {
          if (self->m_phase != Phase::connecting) return;
          if (error) {
            return self->fail_upstream(ApiOutcome::upstream_unreachable,
                                       "cannot connect to " + self->m_endpoint.destination + ": " + error.message(),
                                       true);
          }
          relay::set_close_on_exec(self->upstream_socket().native_handle());
          asio::error_code ignored;
          self->upstream_socket().set_option(tcp::no_delay(true), ignored);
          if (self->m_tls) return self->handshake();
          self->send_request();
        });
  }

  void handshake() {
    SSL* ssl = m_tls->native_handle();
    const auto& target = m_options.upstream.destination;
    if (target.address) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), target.host.c_str());
    } else {
      // SSL_set_tlsext_host_name, without the macro's C cast.
      SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(target.host.c_str()));
      SSL_set1_host(ssl, target.host.c_str());
    }
    m_tls->set_verify_mode(asio::ssl::verify_peer);
    m_tls->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](const asio::error_code& error) {
      if (self->m_phase != Phase::connecting) return;
      if (error) {
        const long verified = SSL_get_verify_result(self->m_tls->native_handle());
        if (verified != X509_V_OK) {
          return self->fail_upstream(ApiOutcome::upstream_certificate,
                                     "the certificate of " + self->m_endpoint.destination +
                                         " did not verify: " + X509_verify_cert_error_string(verified),
                                     false);
        }
        return self->fail_upstream(ApiOutcome::upstream_failed,
                                   "TLS with " + self->m_endpoint.destination + " failed: " + error.message(), true);
      }
      self->send_request();
    });
  }

  void send_request() {
    m_phase = Phase::exchanging;
    m_last_activity = Clock::now();
    arm_timer(m_options.idle_timeout);
    const std::array<asio::const_buffer, 2> request = {asio::buffer(m_upstream_head), asio::buffer(m_body)};
    upstream_write(request, [self = shared_from_this()](const asio::error_code& error, std::size_t written) {
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

  void read_response_head() {
    upstream_read(
        asio::buffer(m_response_head.data() + m_response_head_size, m_response_head.size() - m_response_head_size),
        [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
          self->on_response_head_bytes(error, count);
        });
  }

  void on_response_head_bytes(const asio::error_code& error, std::size_t count) {
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
  void begin_answer(http::ResponseHead response, const std::string& body_start) {
    m_phase = Phase::streaming;
    m_response = std::move(response);
    m_record.status = m_response.status;
    m_record.outcome = ApiOutcome::forwarded;
    const auto content_types = http::header_values(m_response.headers, "content-type");
    const bool event_stream =
        !content_types.empty() && lower(util::trim(content_types.front())).starts_with("text/event-stream");
    m_meter.emplace(event_stream);
    m_client_chunked = m_response.framing == http::BodyFraming::chunked && m_request.version == "HTTP/1.1";
    m_body_remaining = m_response.content_length;

    std::vector<std::string> connection_options;
    for (const auto value : http::header_values(m_response.headers, "connection")) {
      for (const auto& option : util::split(value, ',')) connection_options.push_back(lower(util::trim(option)));
    }
    static const std::vector<std::string> dropped = {
        "connection", "keep-alive",        "proxy-connection", "proxy-authenticate", "te",
        "trailer",    "transfer-encoding", "upgrade",          "content-length",     "set-cookie"};
    std::string head = "HTTP/1.1 " + std::to_string(m_response.status) + " " + m_response.reason + "\r\n";
    for (const auto& [name, value] : m_response.headers) {
      const auto lowered = lower(name);
      if (std::find(dropped.begin(), dropped.end(), lowered) != dropped.end() ||
          std::find(connection_options.begin(), connection_options.end(), lowered) != connection_options.end()) {
        continue;
      }
      head += name + ": " + value + "\r\n";
    }
    if (m_response.framing == http::BodyFraming::length) {
      head += "Content-Length: " + std::to_string(m_response.content_length) + "\r\n";
    } else if (m_client_chunked) {
      head += "Transfer-Encoding: chunked\r\n";
    }
    head += "Connection: close\r\n\r\n";
    m_out = std::move(head);
    take_answer_bytes(body_start);
  }

  // Meters and frames a piece of the upstream's body, then writes what there
  // is to the client and reads on.
  void take_answer_bytes(std::string_view bytes) {
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

  void after_write() {
    m_out.clear();
    if (m_answer_done) return finish_answer();
    upstream_read(
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

  void finish_answer() {
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
  void cut_answer(const std::string& reason) {
    if (m_meter) m_meter->finish();
    m_record.outcome = ApiOutcome::upstream_failed;
    m_record.reason = reason;
    note_failure();
    m_phase = Phase::answered;
    end();
  }

  // -------------------------------------------------------------------------
  // Answers of our own, and the end

  void fail_upstream(ApiOutcome outcome, const std::string& reason, bool retry) {
    close_upstream();
    m_record.outcome = outcome;
    m_record.reason = reason;
    note_failure();
    answer(error_answer(502, "api_error", "git-mullet's API endpoint: " + reason, retry), 502);
  }

  void refuse(int status, std::string_view type, ApiOutcome outcome, const std::string& reason, bool retry = false) {
    m_record.outcome = outcome;
    m_record.reason = reason;
    if (m_request.method.empty()) {
      spdlog::debug("{}: refused a connection: {}", who, reason);
    } else {
      spdlog::info("{}: {} {} refused: {}", who, m_request.method, m_record.path, reason);
    }
    answer(error_answer(status, type, "git-mullet: " + reason, retry), status);
  }

  void note_failure() const { spdlog::warn("{}: {} {}: {}", who, m_request.method, m_record.path, m_record.reason); }

  void answer(std::string response, int status) {
    m_phase = Phase::answered;
    m_record.status = status;
    write_record();
    asio::error_code ignored;
    m_client.cancel(ignored);  // a head or body read may be pending; linger() reads from now on
    m_resolver.cancel();
    m_out = std::move(response);
    arm_timer(linger_time);
    asio::async_write(m_client, asio::buffer(m_out),
                      [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                        if (self->m_phase != Phase::answered) return;
                        if (error) return self->end();
                        self->linger();
                      });
  }

  void linger() {
    m_phase = Phase::answered;
    arm_timer(linger_time);
    asio::error_code ignored;
    m_client.shutdown(asio::socket_base::shutdown_send, ignored);
    drain();
  }

  void drain() {
    m_client.async_read_some(asio::buffer(m_client_buffer),
                             [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                               if (self->m_phase != Phase::answered) return;
                               self->m_drained += count;
                               if (error || self->m_drained > self->m_options.max_request_body) return self->end();
                               self->drain();
                             });
  }

  void arm_timer(std::chrono::milliseconds duration) {
    const auto phase = m_phase;
    m_timer.expires_after(duration);
    m_timer.async_wait([self = shared_from_this(), phase, duration](const asio::error_code& error) {
      if (error || self->m_phase != phase) return;
      self->on_timer(duration);
    });
  }

  void on_timer(std::chrono::milliseconds duration) {
    const auto waited = std::to_string(duration.count()) + " ms";
    switch (m_phase) {
      case Phase::head:
        return refuse(408, "invalid_request_error", ApiOutcome::malformed,
                      "request head not complete within " + waited);
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

  void close_upstream() {
    asio::error_code ignored;
    m_resolver.cancel();
    upstream_socket().close(ignored);
  }

  static void release(std::string& text) {
    text.clear();
    text.shrink_to_fit();
  }

  // Once, when the outcome is known.
  void write_record() {
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

  tcp::socket& upstream_socket() { return m_tls ? m_tls->next_layer() : m_plain; }

  template <typename Buffers, typename Handler>
  void upstream_write(const Buffers& buffers, Handler handler) {
    if (m_tls) {
      asio::async_write(*m_tls, buffers, std::move(handler));
    } else {
      asio::async_write(m_plain, buffers, std::move(handler));
    }
  }

  template <typename Handler>
  void upstream_read(asio::mutable_buffer buffer, Handler handler) {
    if (m_tls) {
      m_tls->async_read_some(buffer, std::move(handler));
    } else {
      m_plain.async_read_some(buffer, std::move(handler));
    }
  }

  CredentialEndpoint::Impl& m_endpoint;
  const CredentialEndpointOptions& m_options;
  unix_stream::socket m_client;
  tcp::socket m_plain;                                  // http upstreams
  std::optional<asio::ssl::stream<tcp::socket>> m_tls;  // https upstreams
  tcp::resolver m_resolver;
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

}  // namespace

void CredentialEndpoint::Impl::start() {
  if (m_started) throw failure("the credential endpoint was already started");
  if (options.upstream.tls) {
    m_tls.emplace(asio::ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(m_tls->native_handle(), TLS1_2_VERSION);
    asio::error_code error;
    if (options.ca_file.empty()) {
      m_tls->set_default_verify_paths(error);
      if (error) throw failure("cannot load the system's trust store: " + error.message());
    } else {
      m_tls->load_verify_file(options.ca_file, error);
      if (error) {
        throw usage_error("cannot read CA certificates from " + options.ca_file + ": " + error.message(),
                          "ca_file must name a PEM file of CA certificates");
      }
    }
  }
  listen_on_unix_socket(m_server.acceptor(), socket_path, "the credential endpoint's socket");
  m_created_socket = true;
  m_started = true;
  m_server.run_in_background();
}

void CredentialEndpoint::Impl::stop() {
  if (!m_started) return;
  m_server.stop();
  if (m_created_socket) ::unlink(socket_path.c_str());
  m_created_socket = false;
}

std::shared_ptr<Session> CredentialEndpoint::Impl::make_session(unix_stream::socket socket, std::uint64_t id) {
  return std::make_shared<Session>(*this, std::move(socket), id);
}

void CredentialEndpoint::Impl::refuse_at_capacity(unix_stream::socket socket) {
  spdlog::debug("{}: refused a connection: too many connections", who);
  ApiRequestRecord record;
  record.time = util::now_utc();
  record.status = 503;
  record.outcome = ApiOutcome::busy;
  record.reason = "too many connections";
  finish(std::move(record), false, false);
  // A new socket's buffer is empty: this small answer is written at once or
  // not at all, never waited for.
  const auto response = error_answer(503, "overloaded_error", "git-mullet: too many connections", true);
  [[maybe_unused]] const auto sent =
      ::send(socket.native_handle(), response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  asio::error_code ignored;
  socket.close(ignored);
}

CredentialEndpoint::Impl::Headroom CredentialEndpoint::Impl::headroom() const {
  const std::lock_guard lock(m_mutex);
  const double unheld = options.budget_usd - spent();
  return {unheld - m_held_usd, unheld, m_holds > 0};
}

void CredentialEndpoint::Impl::hold(double usd) {
  const std::lock_guard lock(m_mutex);
  m_held_usd += usd;
  ++m_holds;
}

void CredentialEndpoint::Impl::exhaust(const std::string& why) {
  const std::lock_guard lock(m_mutex);
  if (m_unaffordable.empty()) m_unaffordable = why;
  if (!m_exhausted.load()) {
    spdlog::info("{}: the budget of {} cannot pay for a request: {}", who, dollars(options.budget_usd), why);
  }
  m_exhausted = true;
}

std::optional<std::string> CredentialEndpoint::Impl::budget_refusal() const {
  if (!m_exhausted.load()) return std::nullopt;
  const std::lock_guard lock(m_mutex);
  if (!m_unaffordable.empty() && m_unmeasured.empty()) {
    return "this job's API budget of " + dollars(options.budget_usd) + " cannot pay for a further request (" +
           m_unaffordable + "; " + dollars(spent()) + " measured), so no further requests are forwarded";
  }
  if (!m_unmeasured.empty()) {
    return "this job's API budget of " + dollars(options.budget_usd) + " cannot be enforced (" + m_unmeasured +
           "), so no further requests are forwarded";
  }
  return "this job's API budget of " + dollars(options.budget_usd) + " is spent (" + dollars(spent()) +
         " measured); no further requests are forwarded";
}

void CredentialEndpoint::Impl::finish(ApiRequestRecord record, bool metered_route, bool complete) {
  const std::lock_guard lock(m_mutex);
  ++m_totals.requests;
  if (record.outcome == ApiOutcome::forwarded) {
    ++m_totals.forwarded;
  } else if (!is_upstream_failure(record.outcome)) {
    ++m_totals.refused;
  }
  if (is_upstream_failure(record.outcome)) {
    m_totals.last_failure = record.outcome;
    m_totals.last_failure_reason = record.reason;
  }
  m_totals.usage += record.usage;
  m_totals.cost_usd += record.cost_usd;
  if (record.cap && record.cap->verdict == RequestCap::Verdict::forward) {
    // Its hold ends: from now on what it cost is counted instead.
    m_held_usd = --m_holds == 0 ? 0 : std::max(0.0, m_held_usd - record.cap->most_usd);
    const auto& asked = record.cap->max_tokens_requested;
    const auto& forwarded = record.cap->max_tokens_forwarded;
    if (asked && forwarded && *forwarded < *asked) ++m_totals.max_tokens_lowered;
  }
  if (record.bytes_up > 0) m_totals.bytes_up[destination] += record.bytes_up;
  m_totals.bytes_down += record.bytes_down;
  if (options.budget_usd > 0) {
    if (spent() >= options.budget_usd && !m_exhausted.load()) {
      spdlog::info("{}: the budget of {} is spent ({} measured)", who, dollars(options.budget_usd), dollars(spent()));
      m_exhausted = true;
    }
    const bool succeeded = record.status >= 200 && record.status < 300;
    if (metered_route && record.outcome == ApiOutcome::forwarded && succeeded && complete && !record.usage_found &&
        m_unmeasured.empty()) {
      m_unmeasured = "an answer to " + record.method + " " + record.path + " reported no usage";
      spdlog::warn("{}: {}: the budget cannot be enforced", who, m_unmeasured);
      m_exhausted = true;
    }
  }
  m_records.push_back(std::move(record));
  while (m_records.size() > std::max<std::size_t>(1, options.max_records)) m_records.pop_front();
}

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
  return m_impl->socket_path;
}
std::size_t CredentialEndpoint::active_connections() const {
  return m_impl->active();
}
bool CredentialEndpoint::budget_exhausted() const {
  return m_impl->budget_exhausted();
}
std::vector<ApiRequestRecord> CredentialEndpoint::records() const {
  return m_impl->records();
}
nlohmann::json CredentialEndpoint::records_json() const {
  auto json = nlohmann::json::array();
  for (const auto& record : records()) json.push_back(to_json(record));
  return json;
}
ApiTotals CredentialEndpoint::totals() const {
  return m_impl->totals();
}

}  // namespace mullet::net
