#include "util/clock.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>
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

std::int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string now_utc_ms() {
  const std::int64_t now = epoch_ms();
  const std::time_t seconds = static_cast<std::time_t>(now / 1000);
  std::tm parts{};
  ::gmtime_r(&seconds, &parts);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &parts);
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(now % 1000));
  return std::string(text) + millis;
}

std::optional<std::int64_t> parse_utc_ms(const std::string& text) {
  // YYYY-MM-DDTHH:MM:SS, then Z or .mmmZ. `list` parses every job's times:
  // plain arithmetic, no allocation and no time zone lookup (timegm's).
  const bool with_millis = text.size() == 24;
  if (text.size() != 20 && !with_millis) return std::nullopt;
  const std::string_view shape = with_millis ? "dddd-dd-ddTdd:dd:dd.dddZ" : "dddd-dd-ddTdd:dd:ddZ";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (shape[i] == 'd' ? !digit : text[i] != shape[i]) return std::nullopt;
  }
  const auto number = [&](std::size_t at, std::size_t length) {
    int value = 0;
    for (std::size_t i = at; i < at + length; ++i) value = value * 10 + (text[i] - '0');
    return value;
  };
  const std::chrono::year_month_day date{std::chrono::year{number(0, 4)},
                                         std::chrono::month{static_cast<unsigned>(number(5, 2))},
                                         std::chrono::day{static_cast<unsigned>(number(8, 2))}};
  const std::int64_t hour = number(11, 2);
  const std::int64_t minute = number(14, 2);
  const std::int64_t second = number(17, 2);
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1000 + (with_millis ? number(20, 3) : 0);
}

std::string format_elapsed(std::int64_t ms) {
  // `list` formats two of these per job: digits into one buffer, no temporaries.
  const std::int64_t seconds = std::max<std::int64_t>(ms, 0) / 1000;
  char text[32];
  char* end = text;
  const auto put = [&](std::int64_t value, char unit, bool two_digits) {
    if (two_digits && value < 10) *end++ = '0';
    end = std::to_chars(end, text + sizeof text, value).ptr;
    *end++ = unit;
  };
  if (seconds < 60) {
    put(seconds, 's', false);
  } else if (seconds < 3600) {
    put(seconds / 60, 'm', false);
    put(seconds % 60, 's', true);
  } else if (seconds < 86400) {
    put(seconds / 3600, 'h', false);
    put(seconds / 60 % 60, 'm', true);
  } else {
    put(seconds / 86400, 'd', false);
    put(seconds / 3600 % 24, 'h', true);
  }
  return {text, end};
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
