#include "net/egress_log.hpp"

#include <algorithm>
#include <utility>

namespace mullet::net {

nlohmann::json to_json(const ProxyDecision& decision) {
  return {{"time", decision.time},         {"method", decision.method},        {"host", decision.host},
          {"port", decision.port},         {"allowed", decision.allowed},      {"reason", decision.reason},
          {"bytes_up", decision.bytes_up}, {"bytes_down", decision.bytes_down}};
}

std::uint64_t DecisionLog::record(ProxyDecision decision) {
  const std::lock_guard lock(m_mutex);
  m_log.push_back(std::move(decision));
  while (m_log.size() > std::max<std::size_t>(1, m_max)) {
    m_log.pop_front();
    ++m_first;
  }
  return m_first + m_log.size() - 1;
}

void DecisionLog::record_bytes(std::uint64_t sequence, std::uint64_t up, std::uint64_t down, bool cut) {
  const std::lock_guard lock(m_mutex);
  if (sequence < m_first || sequence - m_first >= m_log.size()) return;
  auto& decision = m_log[sequence - m_first];
  decision.bytes_up = up;
  decision.bytes_down = down;
  if (cut) decision.reason += "; cut at the upload limit (limits.egress_mb)";
}

std::vector<ProxyDecision> DecisionLog::decisions() const {
  const std::lock_guard lock(m_mutex);
  return {m_log.begin(), m_log.end()};
}

}  // namespace mullet::net
