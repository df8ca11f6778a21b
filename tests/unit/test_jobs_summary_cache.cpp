#include <doctest/doctest.h>

#include <string>

#include "jobs/record.hpp"
#include "jobs/summary_cache.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

using mullet::jobs::ChangeStats;
using mullet::jobs::decode_summary;
using mullet::jobs::encode_summary;
using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::RecordSummary;
using mullet::jobs::summary_json;
using mullet::jobs::summary_of;
using mullet::jobs::SummaryCache;
using mullet::test::ScratchDir;

namespace {

const std::string commit_a(40, 'a');
const std::string commit_b(40, 'b');

// Every field summary_json keeps set to something other than its default.
JobRecord full_summary() {
  JobRecord record;
  record.format = 1;
  record.id = "0123456789";
  record.title = "tabs\there, a newline\nthere, a backslash \\t and \\n, and ünïcödé \x1b[31m";
  record.state = JobState::failed;
  record.base = std::string(40, '1');
  record.result = std::string(40, '2');
  record.executor.name = "claude";
  record.sequence = 42;
  record.created_at = "2026-12-04T17:00:00.123Z";
  record.finished_at = "2026-12-04T17:05:00.456Z";
  record.error = "the gate \\ failed\n\tsee the log";
  record.runner = {12345, 987654321, "00000000-0000-0000-0000-000000000001", ""};
  record.cost_usd = 0.1 + 0.2;  // a double that prints long
  record.changes = ChangeStats{3, 10, 7};
  record.dispatch = mullet::jobs::DispatchRecord{"slurm", "12_3", "node-1.example", "TIMEOUT\tthen gone"};
  for (int number = 1; number <= 3; ++number) {
    auto& node = record.nodes.emplace_back();
    node.number = number;
    node.state = number == 2 ? JobState::succeeded : JobState::failed;
    node.result = number == 3 ? "" : std::string(40, static_cast<char>('a' + number));
  }
  return record;
}

}  // namespace

TEST_CASE("summary cache: a line gives back every field summary_json keeps") {
  for (const bool bare : {false, true}) {
    JobRecord record = full_summary();
    if (bare) {
      record.result.clear();
      record.error.clear();
      record.finished_at.clear();
      record.cost_usd.reset();
      record.changes.reset();
      record.nodes.clear();
      record.dispatch.reset();
    }
    const std::string line = encode_summary(commit_a, summary_of(record));
    CHECK(line.find('\n') == std::string::npos);
    RecordSummary decoded;
    REQUIRE(decode_summary(line, commit_a, decoded));
    // summary_json is what list prints and reads: a field added to it and
    // not to the cache fails here.
    CHECK(summary_json(decoded) == summary_json(record));
  }
}

TEST_CASE("summary cache: a line of another commit, cut short or altered is not read") {
  const std::string line = encode_summary(commit_a, summary_of(full_summary()));
  RecordSummary decoded;
  CHECK_FALSE(decode_summary(line, commit_b, decoded));
  CHECK_FALSE(decode_summary(line.substr(0, line.size() - 3), commit_a, decoded));
  CHECK_FALSE(decode_summary(line + "\textra", commit_a, decoded));
  // The dispatch fields are checked as a record's are.
  for (const auto& [good, bad] : std::vector<std::pair<std::string, std::string>>{
           {"\tslurm\t", "\tkube\t"}, {"\t12_3\t", "\t12;3\t"}, {"\tnode-1.example\t", "\tnode 1\t"}}) {
    std::string altered = line;
    const auto at = altered.find(good);
    REQUIRE(at != std::string::npos);
    altered.replace(at, good.size(), bad);
    CHECK_FALSE(decode_summary(altered, commit_a, decoded));
  }
  std::string bad_state = line;
  bad_state.replace(bad_state.find("\tfailed\t"), 8, "\tbogus\t");
  CHECK_FALSE(decode_summary(bad_state, commit_a, decoded));
  std::string bad_escape = line;
  bad_escape.replace(bad_escape.find("\\t"), 2, "\\x");
  CHECK_FALSE(decode_summary(bad_escape, commit_a, decoded));
}

TEST_CASE("summary cache: what one run remembers the next finds, in any order; what it did not use is dropped") {
  ScratchDir scratch;
  const std::string path = scratch / "summary-cache";
  JobRecord first = full_summary();
  JobRecord second = full_summary();
  second.id = "abcdefabcd";
  second.title = "second";
  {
    SummaryCache cache(path);
    RecordSummary found;
    CHECK_FALSE(cache.find(commit_a, found));
    cache.remember(commit_a, summary_of(first));
    cache.remember(commit_b, summary_of(second));
    cache.save();
  }
  {
    SummaryCache cache(path);
    RecordSummary found;
    REQUIRE(cache.find(commit_b, found));  // out of the order written
    CHECK(found.title == "second");
    cache.save();  // commit_a was not asked for: it goes
  }
  SummaryCache cache(path);
  RecordSummary found;
  CHECK_FALSE(cache.find(commit_a, found));
  CHECK(cache.find(commit_b, found));
}

TEST_CASE("summary cache: a file that is not a cache of ours is read as empty") {
  ScratchDir scratch;
  const std::string path = scratch / "summary-cache";
  mullet::util::write_file(path, commit_a + "\t" + "not a cache\n");
  SummaryCache cache(path);
  RecordSummary found;
  CHECK_FALSE(cache.find(commit_a, found));
}
