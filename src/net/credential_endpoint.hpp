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
//
// The parts: the pure rules (net/credential_rules.hpp: upstream URL,
// credential, sentinel, routes, head rewriting), the account
// (net/api_ledger.hpp: records, totals, budget), the client side
// (net/upstream_client.hpp: resolving, connecting, TLS), one session per
// connection (net/credential_session.hpp), and this, the server glue.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/api_ledger.hpp"
#include "net/api_usage.hpp"
#include "net/credential_rules.hpp"
#include "net/upload_cap.hpp"

namespace mullet::net {

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
  // Counts the request bytes sent upstream (head and body), shared with the
  // phase's egress proxy: a request that would pass its cap is refused
  // whole (413), and so is every request after. None: nothing is counted.
  std::shared_ptr<UploadCap> upload_cap;
};

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
  // ApiLedger::upstream_down().
  bool upstream_down() const;
  // The last max_records requests, oldest first.
  std::vector<ApiRequestRecord> records() const;
  nlohmann::json records_json() const;
  ApiTotals totals() const;

  class Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

}  // namespace mullet::net
