// The credential endpoint's account: what became of each request (its
// record), the running totals, and the budget they are measured against.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/api_usage.hpp"
#include "net/request_cap.hpp"

namespace mullet::net {

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
  egress,                // 413: it would take the job's uploads past limits.egress_mb
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

// Whether an outcome is a failure to reach the upstream (not the client's).
bool is_upstream_failure(ApiOutcome outcome);

// "$1.25".
std::string dollars(double value);

// The records and totals of one endpoint, and its budget (any thread).
class ApiLedger {
 public:
  // `destination`: the upstream as the totals name it ("host:port").
  // `budget_usd` 0: no budget. `spent_before_usd`: what the job spent before
  // this endpoint started, counted towards the budget.
  ApiLedger(std::string destination, double budget_usd, double spent_before_usd, std::size_t max_records);

  // A request has ended: its record is kept and counted. `metered_route`:
  // its route's answers carry usage; `complete`: the answer was read to its
  // end. Under a budget, a complete successful answer on a metered route
  // without usage ends forwarding (a budget that cannot be measured is not
  // enforced by guessing).
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
  // The upstream cannot be reached: the last upstream_down_after requests
  // in a row failed to connect to it (or to verify it). A worker that
  // retries for minutes is better stopped with the cause named.
  bool upstream_down() const { return m_failed_connects.load() >= upstream_down_after; }
  static constexpr int upstream_down_after = 3;
  // The last max_records records, oldest first.
  std::vector<ApiRequestRecord> records() const;
  ApiTotals totals() const;

 private:
  // The job's measured cost (m_mutex held).
  double spent() const { return m_spent_before_usd + m_totals.cost_usd; }

  const std::string m_destination;
  const double m_budget_usd;
  const double m_spent_before_usd;
  const std::size_t m_max_records;
  mutable std::mutex m_mutex;
  std::deque<ApiRequestRecord> m_records;
  ApiTotals m_totals;
  std::string m_unmeasured;    // why the budget cannot be enforced, once it cannot
  std::string m_unaffordable;  // the request the budget could not pay for, once there was one
  double m_held_usd = 0;       // cost caps of the requests in flight
  std::size_t m_holds = 0;
  std::atomic<bool> m_exhausted{false};
  std::atomic<int> m_failed_connects{0};  // in a row
};

}  // namespace mullet::net
