#include <doctest/doctest.h>

#include <string>

#include "util/clock.hpp"

using mullet::util::epoch_ms;
using mullet::util::format_elapsed;
using mullet::util::now_utc_ms;
using mullet::util::parse_utc_ms;

TEST_CASE("parse_utc_ms reads record times with and without milliseconds") {
  CHECK(parse_utc_ms("1970-01-01T00:00:00Z") == 0);
  CHECK(parse_utc_ms("1970-01-01T00:00:01.250Z") == 1250);
  CHECK(parse_utc_ms("2026-12-02T13:53:40Z") == 1796219620000);
  CHECK(parse_utc_ms("2026-12-02T13:53:40.999Z") == 1796219620999);
  // Older records (seconds) and newer ones (milliseconds) order together.
  CHECK(*parse_utc_ms("2026-12-02T13:53:40Z") < *parse_utc_ms("2026-12-02T13:53:40.001Z"));
  for (const char* bad :
       {"", "2026-12-02", "2026-12-02T13:53:40", "2026-12-02T13:53:40.12Z", "2026-13-02T13:53:40Z",
        "2026-02-30T13:53:40Z", "2026-12-02 13:53:40Z", "2026-12-02T13:53:40+01:00", "x026-12-02T13:53:40Z"}) {
    CHECK_MESSAGE(!parse_utc_ms(bad), bad);
  }
}

TEST_CASE("now_utc_ms is read back as the time it was written") {
  const auto before = epoch_ms();
  const std::string now = now_utc_ms();
  const auto after = epoch_ms();
  REQUIRE(now.size() == 24);
  const auto read = parse_utc_ms(now);
  REQUIRE(read);
  CHECK(*read >= before);
  CHECK(*read <= after);
}

TEST_CASE("format_elapsed keeps two units at most") {
  CHECK(format_elapsed(-5) == "0s");
  CHECK(format_elapsed(999) == "0s");
  CHECK(format_elapsed(59999) == "59s");
  CHECK(format_elapsed(65000) == "1m05s");
  CHECK(format_elapsed(3723000) == "1h02m");
  CHECK(format_elapsed(90000000) == "1d01h");
}
