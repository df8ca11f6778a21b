#include "net/upload_cap.hpp"

#include <algorithm>
#include <limits>

namespace mullet::net {

UploadCap::UploadCap(std::uint64_t limit_bytes, std::uint64_t spent_before)
    : m_limit(limit_bytes), m_spent_before(spent_before) {
  m_exhausted = m_limit > 0 && m_spent_before >= m_limit;
}

std::uint64_t UploadCap::room() const {
  if (m_limit == 0) return std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t used = m_spent_before + m_total;
  return used >= m_limit ? 0 : m_limit - used;
}

std::uint64_t UploadCap::take(const std::string& destination, std::uint64_t wanted) {
  const std::lock_guard lock(m_mutex);
  const std::uint64_t given = std::min(wanted, room());
  if (given > 0) m_bytes_up[destination] += given;
  m_total += given;
  if (m_limit > 0 && (given < wanted || room() == 0)) m_exhausted = true;
  return given;
}

bool UploadCap::take_all(const std::string& destination, std::uint64_t wanted) {
  const std::lock_guard lock(m_mutex);
  if (wanted > room() || (m_limit > 0 && m_exhausted.load())) {
    m_exhausted = m_limit > 0;
    return false;
  }
  if (wanted > 0) m_bytes_up[destination] += wanted;
  m_total += wanted;
  if (m_limit > 0 && room() == 0) m_exhausted = true;
  return true;
}

std::map<std::string, std::uint64_t> UploadCap::bytes_up() const {
  const std::lock_guard lock(m_mutex);
  return m_bytes_up;
}

}  // namespace mullet::net
