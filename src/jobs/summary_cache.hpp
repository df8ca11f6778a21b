// What `list` knows about each job, kept between runs.
//
// `list` needs one summary per job, and reading it from the record commit
// (inflating the commit, parsing its JSON, checking every field) costs more
// than everything else `list` does once there are thousands of jobs. Record
// commits never change (an update is a new commit), so a summary checked
// once stays true for as long as the job's ref names the same commit: the
// cache maps a record commit's id to its summary, already checked, in a
// format that is cheap to read. A job whose ref moved, or a cache that is
// missing, stale or unreadable, is simply read from its commit again.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jobs/record.hpp"

namespace mullet::jobs {

// One cache line for `summary` (the fields summary_json keeps), and back
// into the summary fields of `summary`; false for a line that is not one
// encode_summary wrote for that commit (`summary` is then partly written).
std::string encode_summary(const std::string& record_commit_hex, const RecordSummary& summary);
bool decode_summary(std::string_view line, std::string_view record_commit_hex, RecordSummary& summary);

class SummaryCache {
 public:
  // Reads the cache file at `path` (nothing when it is missing or not ours).
  explicit SummaryCache(std::string path);

  // The summary cached for this record commit into `summary`, if there is
  // one; one found is kept in the file save() writes.
  bool find(const std::string& record_commit_hex, RecordSummary& summary);
  // Keeps `summary` for the next run; every commit looked up or remembered
  // since construction is what the saved file holds.
  void remember(const std::string& record_commit_hex, const RecordSummary& summary);
  // Rewrites the file (atomically) when it would change; a failure only
  // costs the next run its speed, so it is not reported.
  void save() const;

 private:
  std::string m_path;
  std::string m_content;                  // the file as read
  std::vector<std::string_view> m_lines;  // into m_content, in the order save() wrote them
  std::size_t m_next_line = 0;            // the line the next lookup most likely wants
  // commit -> line, built only when a lookup is out of order
  std::unordered_map<std::string_view, std::string_view> m_index;
  std::deque<std::string> m_added;       // lines remembered in this run
  std::vector<std::string_view> m_kept;  // what save() writes
  std::size_t m_loaded_kept = 0;

  std::optional<std::string_view> line_for(const std::string& record_commit_hex);
};

}  // namespace mullet::jobs
