#pragma once

#include <cstdint>
#include <string>

namespace mullet::util {

// Current time as RFC 3339 UTC with seconds, e.g. 2026-12-02T13:53:40Z.
std::string now_utc();
// Monotonic milliseconds, for durations.
std::int64_t monotonic_ms();
// A fresh random lowercase hex string of `length` characters.
std::string random_hex(std::size_t length);

}  // namespace mullet::util
