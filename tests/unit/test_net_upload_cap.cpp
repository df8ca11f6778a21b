#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "net/upload_cap.hpp"

using mullet::net::UploadCap;
using Counts = std::map<std::string, std::uint64_t>;

TEST_CASE("upload cap: counts per destination and gives what is left before the cap") {
  UploadCap cap(1000);
  CHECK(cap.take("a.example:443", 300) == 300);
  CHECK(cap.take("b.example:443", 500) == 500);
  CHECK_FALSE(cap.exhausted());
  // The piece that crosses the cap is cut at it.
  CHECK(cap.take("a.example:443", 400) == 200);
  CHECK(cap.exhausted());
  CHECK(cap.take("b.example:443", 1) == 0);
  CHECK(cap.bytes_up() == Counts{{"a.example:443", 500}, {"b.example:443", 500}});
}

TEST_CASE("upload cap: reaching the cap exactly exhausts it") {
  UploadCap cap(100);
  CHECK(cap.take("x:1", 100) == 100);
  CHECK(cap.exhausted());
}

TEST_CASE("upload cap: all or nothing, for requests that go whole") {
  UploadCap cap(1000);
  CHECK(cap.take_all("api:443", 600));
  CHECK_FALSE(cap.exhausted());
  // Too large for what is left: nothing goes, and the cap counts as reached.
  CHECK_FALSE(cap.take_all("api:443", 401));
  CHECK(cap.exhausted());
  CHECK_FALSE(cap.take_all("api:443", 1));
  CHECK(cap.bytes_up() == Counts{{"api:443", 600}});
}

TEST_CASE("upload cap: earlier phases' bytes count; a cap of 0 only counts") {
  UploadCap spent(1000, 900);
  CHECK_FALSE(spent.exhausted());
  CHECK(spent.take("x:1", 200) == 100);
  CHECK(spent.exhausted());
  CHECK(spent.spent_before() == 900);
  CHECK(spent.limit_bytes() == 1000);

  const UploadCap gone(1000, 1000);
  CHECK(gone.exhausted());

  UploadCap unlimited;
  CHECK(unlimited.take("x:1", 1ULL << 40U) == 1ULL << 40U);
  CHECK(unlimited.take_all("x:1", 1ULL << 40U));
  CHECK_FALSE(unlimited.exhausted());
  CHECK(unlimited.bytes_up() == Counts{{"x:1", 2ULL << 40U}});
}

TEST_CASE("upload cap: threads taking at once never pass the cap together") {
  UploadCap cap(100'000);
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> given(8, 0);
  for (std::size_t i = 0; i < given.size(); ++i) {
    threads.emplace_back([&cap, &given, i] {
      for (int n = 0; n < 1000; ++n) given[i] += cap.take(i % 2 == 0 ? "a:1" : "b:2", 97);
    });
  }
  for (auto& thread : threads) thread.join();
  std::uint64_t total = 0;
  for (const auto count : given) total += count;
  CHECK(total == 100'000);
  CHECK(cap.exhausted());
  std::uint64_t counted = 0;
  for (const auto& [destination, count] : cap.bytes_up()) counted += count;
  CHECK(counted == 100'000);
}
