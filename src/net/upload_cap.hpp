// What a phase may send out of its sandbox: the bytes that go upstream, per
// destination, through the egress proxy (client to destination) and the
// credential endpoint (request heads and bodies), counted together against
// one cap (limits.egress_mb) that the job's earlier phases have used up part
// of. Whoever forwards asks before each write and forwards only what it is
// given, so the connection that reaches the cap is cut there: nothing over it
// leaves. Any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace mullet::net {

class UploadCap {
 public:
  // `limit_bytes` 0: no cap (only counting). `spent_before`: what the job's
  // earlier phases sent.
  explicit UploadCap(std::uint64_t limit_bytes = 0, std::uint64_t spent_before = 0);

  // Counts and returns how many of `wanted` bytes to `destination` may go:
  // all of them, or what is left before the cap.
  std::uint64_t take(const std::string& destination, std::uint64_t wanted);
  // All of `wanted` or nothing (a request that goes whole or not at all).
  bool take_all(const std::string& destination, std::uint64_t wanted);

  // The cap is reached: the job's uploads add up to it, or a request was
  // given less than it asked for. Stays so.
  bool exhausted() const { return m_exhausted.load(); }

  std::uint64_t limit_bytes() const { return m_limit; }
  std::uint64_t spent_before() const { return m_spent_before; }
  // This phase's bytes up, by destination ("host:port").
  std::map<std::string, std::uint64_t> bytes_up() const;

 private:
  // What may still go (m_mutex held).
  std::uint64_t room() const;

  const std::uint64_t m_limit;
  const std::uint64_t m_spent_before;
  mutable std::mutex m_mutex;
  std::map<std::string, std::uint64_t> m_bytes_up;
  std::uint64_t m_total = 0;
  std::atomic<bool> m_exhausted{false};
};

}  // namespace mullet::net
