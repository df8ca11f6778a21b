#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mullet::util {

// Current time as RFC 3339 UTC with seconds, e.g. 2026-12-02T13:53:40Z.
std::string now_utc();
// The same with milliseconds, e.g. 2026-12-02T13:53:40.125Z: what job records
// keep, so jobs started within one second still order.
std::string now_utc_ms();
// Milliseconds since the epoch of an RFC 3339 UTC time as the two above write
// it (with or without milliseconds); nullopt for anything else.
std::optional<std::int64_t> parse_utc_ms(const std::string& text);
// Milliseconds since the epoch, now.
std::int64_t epoch_ms();
// A duration for people: 45s, 1m05s, 2h03m, 3d04h.
std::string format_elapsed(std::int64_t ms);
// Monotonic milliseconds, for durations.
std::int64_t monotonic_ms();
// A fresh random lowercase hex string of `length` characters.
std::string random_hex(std::size_t length);

}  // namespace mullet::util
