// Job records in the user's repository.
//
// Each job is one ref, refs/mullet/jobs/<id>, pointing at a "record commit":
//   tree     job.json (the full record) and the phases' logs (worker.log, ...)
//   parents  the base commit, then the result commit when there is one, so
//            git gc keeps both for as long as the job exists and
//            `git push origin 'refs/mullet/*'` carries everything
//   message  one line of summary JSON, all that `list` needs to read
// Updates are compare-and-swap on that one ref, so concurrent writers never
// lose each other's work.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "git/repository.hpp"
#include "jobs/record.hpp"

namespace mullet::jobs {

inline constexpr const char* jobs_ref_prefix = "refs/mullet/jobs/";
inline constexpr const char* discarded_ref = "refs/mullet/discarded";

// One line of `list`: the summary from the record commit's message, or what
// is wrong with it.
struct JobSummary {
  std::string id;      // from the ref's name
  std::string damage;  // empty unless the record is damaged
  // record.created_at read while it is at hand: `list` orders every job by
  // it. Unset for a damaged record or a time that is not one.
  std::optional<std::int64_t> created_ms;
  RecordSummary record;
};

struct StoredJob {
  JobRecord record;
  git_oid record_commit{};
};

// A job, or one node of it, as a command names it (`ID` or `ID/N`).
struct AddressedJob {
  StoredJob job;
  int node = 0;  // 0: the job as a whole; else 1..job.record.nodes.size()
};

// The next job's sequence number in this repository (1, 2, ...), from a
// counter file under the common git dir, taken under a lock.
std::int64_t next_job_sequence(const git::Repository& repo);

class JobStore {
 public:
  explicit JobStore(const git::Repository& repo) : m_repo(repo) {}

  std::vector<std::string> ids() const;
  // Every job's summary (from the commit messages), unordered; a damaged one
  // is listed with its damage instead of failing the list.
  std::vector<JobSummary> summaries() const;
  // Throws DamagedRecord (exit 2) for a record that fails validation
  // (jobs/record.hpp), whose base/result are not the record commit's parents
  // or do not name commits, or whose files are not bounded blobs.
  std::optional<StoredJob> load(const std::string& id) const;
  // The unique job id `prefix` names; usage error otherwise.
  std::string resolve(const std::string& prefix) const;
  // Resolves a unique prefix to a stored job; usage error otherwise.
  StoredJob find(const std::string& prefix) const;
  // `ID` or `ID/N` (jobs/id.hpp): usage error for a bad or absent node.
  AddressedJob find_address(const std::string& address) const;
  // A file kept beside job.json (a log); nullopt when absent; DamagedRecord
  // when it is not a blob or larger than what run_job keeps.
  std::optional<std::string> read_file(const StoredJob& job, const std::string& name) const;

  // Creates the job's ref; fails if it exists.
  git_oid create(const JobRecord& record);
  // Writes a new record commit (keeping the files of the old one unless
  // replaced by `files`) if the ref still points at `expected`. Returns the
  // new commit, or nullopt when someone else moved the ref first.
  std::optional<git_oid> save(const JobRecord& record, const std::map<std::string, std::string>& files,
                              const git_oid& expected);
  // Reads, applies `change`, saves; retries when the ref moved meanwhile.
  StoredJob update(const std::string& id, const std::function<void(JobRecord&)>& change,
                   const std::map<std::string, std::string>& files = {});
  // The record commit the job's ref names, without reading the record (so a
  // damaged job can still be discarded).
  std::optional<git_oid> ref_target(const std::string& id) const;
  // Deletes the job's ref if it still points at `expected`, leaving a trace in
  // the reflog of refs/mullet/discarded. False when the ref moved.
  bool remove(const std::string& id, const git_oid& expected);

 private:
  void check_commits(const JobRecord& record, git_commit* record_commit) const;
  void expect_commit(const std::string& id, const std::string& field, const std::string& hex, bool must_exist) const;
  git_oid write_record_commit(const JobRecord& record, const std::map<std::string, std::string>& files,
                              const std::optional<git_oid>& previous) const;
  const git::Repository& m_repo;
};

}  // namespace mullet::jobs
