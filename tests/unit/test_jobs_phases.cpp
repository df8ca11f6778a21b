#include <doctest/doctest.h>

#include <string>

#include "jobs/phases.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

using mullet::jobs::BoundedLog;
using mullet::jobs::log_tail_kept;
using mullet::test::ScratchDir;

TEST_CASE("BoundedLog writes everything up to its cap") {
  ScratchDir dir;
  const std::string path = dir / "log";
  BoundedLog log(path, 100);
  log.write("hello\n");
  log.end_phase();
  CHECK(mullet::util::read_file(path) == "hello\n");
  CHECK(log.size() == 6);
}

TEST_CASE("BoundedLog stops at its cap, says how much it left out and keeps the end") {
  ScratchDir dir;
  const std::string path = dir / "log";
  BoundedLog log(path, 1000);
  const std::string chunk(4096, 'x');
  std::size_t written = 0;
  for (int i = 0; i < 200; ++i) {
    log.write(chunk);
    written += chunk.size();
    CHECK(log.size() == 1000);
  }
  log.write("THE END\n");
  written += 8;
  log.end_phase();
  const std::string text = mullet::util::read_file(path);
  CHECK(log.size() == text.size());
  const std::size_t left_out = written - 1000 - log_tail_kept;
  const std::string marker = "\n[git-mullet: " + std::to_string(left_out) + " bytes of output left out]\n";
  REQUIRE(text.size() == 1000 + marker.size() + log_tail_kept);
  CHECK(text.substr(1000, marker.size()) == marker);
  CHECK(text.substr(text.size() - 8) == "THE END\n");

  // The next phase: the file is full, so only its tail goes in.
  log.write("second phase\n");
  log.end_phase();
  CHECK(mullet::util::read_file(path) == text + "second phase\n");
}

TEST_CASE("BoundedLog counts what the file already holds (a resumed job)") {
  ScratchDir dir;
  const std::string path = dir / "log";
  mullet::util::write_file(path, std::string(50, 'a'));
  BoundedLog log(path, 60);
  CHECK(log.size() == 50);
  log.write(std::string(20, 'b'));
  log.end_phase();
  CHECK(mullet::util::read_file(path) == std::string(50, 'a') + std::string(10, 'b') + std::string(10, 'b'));
}
