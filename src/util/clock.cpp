#include "util/clock.hpp"

#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <vector>

#include "util/error.hpp"

namespace mullet::util {

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  ::gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string random_hex(std::size_t length) {
  std::vector<unsigned char> bytes((length + 1) / 2);
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw failure("cannot read random bytes");
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char byte : bytes) {
    hex += digits[byte >> 4U];
    hex += digits[byte & 0xFU];
  }
  hex.resize(length);
  return hex;
}

}  // namespace mullet::util
