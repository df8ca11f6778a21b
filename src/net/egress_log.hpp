// The egress proxy's decisions: what each connection asked for, the verdict,
// and the bytes relayed. The log keeps the last ones only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mullet::net {

struct ProxyDecision {
  std::string time;    // RFC 3339 UTC
  std::string method;  // CONNECT, GET, ...; empty when no request was read
  std::string host;    // lower case, IPv6 without brackets
  int port = 0;
  bool allowed = false;  // the policy's verdict (the connection may still fail)
  std::string reason;    // "on the allow list", "not on the allow list", ...
  // Relayed through the tunnel; filled in when the connection ends.
  std::uint64_t bytes_up = 0;    // client to destination
  std::uint64_t bytes_down = 0;  // destination to client
};

nlohmann::json to_json(const ProxyDecision& decision);

// Any thread.
class DecisionLog {
 public:
  explicit DecisionLog(std::size_t max_decisions) : m_max(max_decisions) {}

  // Appends a decision; the number it returns names it to record_bytes().
  std::uint64_t record(ProxyDecision decision);
  // What a decision's connection relayed, and `cut` when the upload cap cut
  // it short; nothing when it has left the log.
  void record_bytes(std::uint64_t sequence, std::uint64_t up, std::uint64_t down, bool cut = false);
  // Oldest first.
  std::vector<ProxyDecision> decisions() const;

 private:
  const std::size_t m_max;
  mutable std::mutex m_mutex;
  std::deque<ProxyDecision> m_log;
  std::uint64_t m_first = 0;  // sequence number of m_log.front()
};

}  // namespace mullet::net
