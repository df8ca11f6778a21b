#include "net/api_ledger.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "util/strings.hpp"

namespace mullet::net {
namespace {

constexpr std::string_view who = "credential endpoint";

}  // namespace

std::string dollars(double value) {
  return "$" + util::format_decimal(value, 2);
}

bool is_upstream_failure(ApiOutcome outcome) {
  return outcome == ApiOutcome::upstream_unreachable || outcome == ApiOutcome::upstream_certificate ||
         outcome == ApiOutcome::upstream_failed;
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
    case ApiOutcome::egress: return "egress";
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
    case ApiOutcome::egress: return "raise limits.egress_mb to let the job send more";
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

ApiLedger::ApiLedger(std::string destination, double budget_usd, double spent_before_usd, std::size_t max_records)
    : m_destination(std::move(destination)),
      m_budget_usd(budget_usd),
      m_spent_before_usd(spent_before_usd),
      m_max_records(max_records) {
  m_exhausted = budget_usd > 0 && spent_before_usd >= budget_usd;
}

std::vector<ApiRequestRecord> ApiLedger::records() const {
  const std::lock_guard lock(m_mutex);
  return {m_records.begin(), m_records.end()};
}

ApiTotals ApiLedger::totals() const {
  const std::lock_guard lock(m_mutex);
  return m_totals;
}

ApiLedger::Headroom ApiLedger::headroom() const {
  const std::lock_guard lock(m_mutex);
  const double unheld = m_budget_usd - spent();
  return {unheld - m_held_usd, unheld, m_holds > 0};
}

void ApiLedger::hold(double usd) {
  const std::lock_guard lock(m_mutex);
  m_held_usd += usd;
  ++m_holds;
}

void ApiLedger::exhaust(const std::string& why) {
  const std::lock_guard lock(m_mutex);
  if (m_unaffordable.empty()) m_unaffordable = why;
  if (!m_exhausted.load()) {
    spdlog::info("{}: the budget of {} cannot pay for a request: {}", who, dollars(m_budget_usd), why);
  }
  m_exhausted = true;
}

std::optional<std::string> ApiLedger::budget_refusal() const {
  if (!m_exhausted.load()) return std::nullopt;
  const std::lock_guard lock(m_mutex);
  if (!m_unaffordable.empty() && m_unmeasured.empty()) {
    return "this job's API budget of " + dollars(m_budget_usd) + " cannot pay for a further request (" +
           m_unaffordable + "; " + dollars(spent()) + " measured), so no further requests are forwarded";
  }
  if (!m_unmeasured.empty()) {
    return "this job's API budget of " + dollars(m_budget_usd) + " cannot be enforced (" + m_unmeasured +
           "), so no further requests are forwarded";
  }
  return "this job's API budget of " + dollars(m_budget_usd) + " is spent (" + dollars(spent()) +
         " measured); no further requests are forwarded";
}

void ApiLedger::finish(ApiRequestRecord record, bool metered_route, bool complete) {
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
  // Only what the client cannot cause counts: the connection to the
  // upstream, or its certificate.
  if (record.outcome == ApiOutcome::upstream_unreachable || record.outcome == ApiOutcome::upstream_certificate) {
    ++m_failed_connects;
  } else if (record.outcome == ApiOutcome::forwarded) {
    m_failed_connects = 0;
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
  if (record.bytes_up > 0) m_totals.bytes_up[m_destination] += record.bytes_up;
  m_totals.bytes_down += record.bytes_down;
  if (m_budget_usd > 0) {
    if (spent() >= m_budget_usd && !m_exhausted.load()) {
      spdlog::info("{}: the budget of {} is spent ({} measured)", who, dollars(m_budget_usd), dollars(spent()));
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
  while (m_records.size() > std::max<std::size_t>(1, m_max_records)) m_records.pop_front();
}

}  // namespace mullet::net
