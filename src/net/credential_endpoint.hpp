// The credential endpoint: a model API as a sandbox sees it, with the user's
// real key kept on the host.
//
// It listens on a unix socket that is bound into the sandbox, where the
// bridge (net/bridge.hpp) serves it as 127.0.0.1:<port>, like the egress
// proxy. The worker is told that this is its API (ANTHROPIC_BASE_URL and the
// like) and is given a sentinel in place of the key: a random value made per
// job (make_sentinel). Each request must carry that sentinel, exactly, as
// `x-api-key` or `Authorization: Bearer`; the endpoint removes every
// credential the client sent, writes the real one, and forwards the request
// to the one upstream it was made for, over TLS verified against the system's
// trust store (or a given CA file), then streams the answer back as it comes.
// It reads the usage of every answer (net/api_usage.hpp), prices it, and once
// the measured cost reaches the job's budget it forwards nothing more.
//
// Threat model. Code in the sandbox can read everything the worker can: its
// environment, its files, its memory. It finds the sentinel and nothing
// else: the real credential exists only in this process on the host, is
// written only into the upstream request head, and appears in no log, record
// or error message. With the sentinel, while the job runs, the sandbox can
// do exactly what the worker can: send requests to the routes this endpoint
// serves (by default the Messages API and OpenAI-style chat completions, not
// batches, files or admin routes), to the one upstream, until the budget is
// spent. It cannot reach another host through it, learn the key, or use the
// sentinel once the job has ended: stop() removes the socket, and another
// job's endpoint has another sentinel. What it sends upstream is its own
// business, bounded per request (max_request_body) and counted per
// destination (ApiTotals::bytes_up). Leaving in the middle of an answer does
// not hide its cost: the endpoint reads every answer to its end and meters
// it. Without the sentinel it learns nothing but that the endpoint is there.
//
// Under a budget, no single request may cost more than what remains of it
// (net/request_cap.hpp): a metered request whose estimated input alone would
// cost more is refused, and its max_tokens is lowered to what the rest
// affords at the model's output rate. What a request forwarded may cost at
// most (its cost cap) is held until its answer has been metered, so requests
// in flight together stay within the budget: one that the others' holds
// leave no room for gets 429 (retry later), and only one that the budget
// itself cannot pay for ends forwarding, with 402. With honest upstreams the
// job thus ends within its budget, give or take the input estimate; an
// upstream that reports more usage than it was allowed is still metered, and
// ends forwarding after that answer. A successful answer on a metered route
// whose usage cannot be read, under a budget, also ends forwarding: a budget
// that cannot be measured is not enforced by guessing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/api_usage.hpp"
#include "net/grant.hpp"
#include "net/http_head.hpp"
#include "net/request_cap.hpp"
#include "util/error.hpp"

namespace mullet::net {

// Where the endpoint forwards to: https://host[:port][/prefix], or http://
// for a gateway on the user's own network. The prefix goes before every
// forwarded path ("https://gw.example/anthropic" sends /v1/messages to
// /anthropic/v1/messages).
struct UpstreamUrl {
  bool tls = true;
  Destination destination;  // port 443 or 80 when the URL names none
  std::string path_prefix;  // "" or "/segment...", without a trailing '/'

  std::string to_string() const;  // the URL, normalised
};

// The one reader of an upstream base URL. Refused, as usage errors: schemes
// but http and https, user info, a query or fragment, a host or port that
// net/grant.hpp does not read (one grammar for every destination), control
// bytes or blanks. The URL is never echoed when it holds a '@' (it may hold a
// password).
Result<UpstreamUrl> parse_upstream_url(std::string_view url);

// Which header carries the credential upstream, and how its value is made
// from the credential: `format` holds "{}" once ("Bearer {}" for
// Authorization, "{}" for x-api-key).
struct CredentialHeader {
  std::string name = "x-api-key";
  std::string format = "{}";
};

// The header line's name and value for `credential`. A name that is not an
// HTTP token, a format without exactly one "{}", an empty credential or one
// with a control byte (which could end the header early) are usage errors
// that never quote the credential.
Result<http::Header> credential_header(const CredentialHeader& header, std::string_view credential);

// A fresh per-job sentinel: "sk-mullet-" and 32 random hex digits (128 bits
// from getrandom). Looks like a key to tools that insist on one.
std::string make_sentinel();

// Whether a request carries `sentinel` and no other credential: at least one
// of its x-api-key and Authorization headers, and every one of them, is the
// sentinel (Authorization as "Bearer <sentinel>", the scheme in any case).
// Compared in constant time.
bool carries_sentinel(const http::Headers& headers, std::string_view sentinel);

// A request the endpoint forwards: the method and the path (without the
// query) exactly.
struct ApiRoute {
  std::string method;
  std::string path;
  bool metered = true;  // its answers cost money and carry usage
};
// POST /v1/messages, POST /v1/chat/completions (metered), POST
// /v1/messages/count_tokens (free). Apart from the routes, a HEAD of "/" (the
// base URL, which Claude Code sends without a key to warm its connection up)
// gets an empty 200 from the endpoint itself, unrecorded.
std::vector<ApiRoute> default_api_routes();

// The head sent upstream for `request` (origin form, read by
// http::parse_request_head with server_forms): the upstream's prefix before
// the path, Host the upstream's, every header a client could carry a
// credential in removed (x-api-key, authorization, proxy-authorization,
// cookie, and the credential header's own name), `credential` written,
// "Accept-Encoding: identity" (the usage must be readable), no Expect (the
// endpoint answers that itself), the body framed by Content-Length
// `body_size` (when the request has a body or is a POST), "Connection:
// close". Pure.
std::string upstream_request_head(const http::RequestHead& request, const UpstreamUrl& upstream,
                                  const http::Header& credential, std::size_t body_size);

struct CredentialEndpointOptions {
  UpstreamUrl upstream;
  CredentialHeader header;
  std::string credential;  // the real value; never logged
  std::string sentinel;    // make_sentinel()
  std::string ca_file;     // PEM; empty: the system's trust store
  double budget_usd = 0;   // 0: no budget
  // What the job spent before this endpoint started (its earlier phases),
  // counted towards the budget: one endpoint per phase, one budget per job.
  double spent_before_usd = 0;
  PriceTable prices = PriceTable::defaults();
  std::vector<ApiRoute> routes = default_api_routes();
  // From accepting a connection to its complete request head.
  std::chrono::milliseconds head_timeout{10'000};
  // Resolving the upstream, connecting and the TLS handshake.
  std::chrono::milliseconds connect_timeout{10'000};
  // No byte either way for this long ends a request (a model may think for
  // minutes before its first byte).
  std::chrono::milliseconds idle_timeout{600'000};
  std::size_t max_request_body = std::size_t{32} * 1024 * 1024;
  // Request bodies wait whole in memory until they go upstream; this bounds
  // them all together (503, retryable, beyond).
  std::size_t max_buffered_request_bytes = std::size_t{96} * 1024 * 1024;
  std::size_t max_connections = 64;
  std::size_t max_records = 10'000;  // the log keeps the last this many
};

// What became of a request.
enum class ApiOutcome {
  forwarded,             // it went upstream and the answer came back (any status)
  malformed,             // not a request this endpoint reads: 400, 408, 413, 417, 431
  no_sentinel,           // 401: no sentinel, another one, or another credential too
  not_served,            // 404: not one of the routes
  budget,                // 402: the budget was spent
  upstream_unreachable,  // 502: name not resolved, connection refused, timed out
  upstream_certificate,  // 502: the upstream's certificate did not verify
  upstream_failed,       // 502, or an answer cut short: TLS or HTTP failure upstream
  client_gone,           // the client closed before sending its whole request
  stopped,               // stop() ended it in flight (what it cost so far is counted)
  busy,                  // 503: too many connections, or request bytes, at once
};
std::string_view to_string(ApiOutcome outcome);
// What a user can do about a failed outcome, to print beside it; empty when
// there is nothing to say.
std::string hint_for(ApiOutcome outcome);

struct ApiRequestRecord {
  std::string time;    // RFC 3339 UTC, when its connection was accepted
  std::string method;  // empty when no head was read
  std::string path;    // without the query
  std::string model;   // from the answer, else from the request
  TokenUsage usage;
  bool usage_found = false;
  double cost_usd = 0;
  std::string priced_by;         // PriceTable's rule; empty when nothing was priced
  int status = 0;                // the status the client was sent (0: none)
  std::uint64_t bytes_up = 0;    // request head and body sent upstream
  std::uint64_t bytes_down = 0;  // answer bytes received from upstream
  ApiOutcome outcome = ApiOutcome::forwarded;
  std::string reason;  // why, in a few words
  std::int64_t duration_ms = 0;
  // Under a budget, a metered request's cap (its body dropped): estimated
  // input, max_tokens asked and forwarded, the most it may cost.
  std::optional<RequestCap> cap;
};
nlohmann::json to_json(const ApiRequestRecord& record);

struct ApiTotals {
  std::uint64_t requests = 0;            // requests ended (every record)
  std::uint64_t forwarded = 0;           // answered by the upstream
  std::uint64_t refused = 0;             // answered by the endpoint itself, not for an upstream failure
  std::uint64_t max_tokens_lowered = 0;  // requests forwarded with a lower max_tokens than asked
  TokenUsage usage;
  double cost_usd = 0;  // measured here (spent_before_usd not included)
  // By destination ("api.anthropic.com:443"): what the sandbox sent out
  // through the endpoint.
  std::map<std::string, std::uint64_t> bytes_up;
  std::uint64_t bytes_down = 0;
  // The last failure to reach the upstream (outcome and reason), for the
  // job's report.
  std::optional<ApiOutcome> last_failure;
  std::string last_failure_reason;
};
nlohmann::json to_json(const ApiTotals& totals);

class CredentialEndpoint {
 public:
  // Checks the options (the credential header, the CA file is read at
  // start()); throws mullet::Error. Nothing is served until start().
  CredentialEndpoint(std::string socket_path, CredentialEndpointOptions options);
  CredentialEndpoint(const CredentialEndpoint&) = delete;
  CredentialEndpoint& operator=(const CredentialEndpoint&) = delete;
  ~CredentialEndpoint();  // stop()

  // Loads the trust store, creates the socket (mode 0666, see
  // net::listen_on_unix_socket) and serves on a background thread. Throws
  // mullet::Error. Once per object.
  void start();
  // Closes the socket and every connection (requests in flight end, their
  // records written), joins the thread and removes the socket file: the
  // sentinel is dead. Idempotent.
  void stop();

  const std::string& socket_path() const;
  // Any thread, at any time:
  std::size_t active_connections() const;
  // The measured cost has reached the budget (or could not be measured
  // under one); requests are refused from now on. The job polls it to stop
  // its worker.
  bool budget_exhausted() const;
  // The last max_records requests, oldest first.
  std::vector<ApiRequestRecord> records() const;
  nlohmann::json records_json() const;
  ApiTotals totals() const;

  class Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

}  // namespace mullet::net
