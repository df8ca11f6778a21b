#include "jobs/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "git/handles.hpp"
#include "jobs/id.hpp"
#include "jobs/summary_cache.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

using git::check;

std::string ref_name(const std::string& id) {
  return std::string(jobs_ref_prefix) + id;
}

std::string commit_summary_line(git_commit* commit) {
  const std::string message = git_commit_message(commit);
  const auto start = message.find('\n') == std::string::npos ? 0 : message.rfind('\n', message.size() - 2) + 1;
  return message.substr(start);
}

// What a record commit may hold: a little more than run_job keeps (8 MiB of
// worker.log, 64 MiB of events.jsonl, each with a cut marker).
// A node's logs are node-<N>.worker.log and node-<N>.events.jsonl.
std::size_t max_record_file_bytes(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with("events.jsonl")) return 65U << 20U;
  if (ends_with("worker.log")) return 9U << 20U;
  return 16U << 20U;
}

// The commit a job's ref points at; a ref naming a tree or a missing object is
// a damaged record, not an internal error. Its size is checked first: libgit2
// reads a commit (its message is the summary line) whole.
git::CommitPtr record_commit(git_repository* repo, const git_oid& id, const std::string& job) {
  git_odb* raw_odb = nullptr;
  check(git_repository_odb(&raw_odb, repo), "cannot open the object database");
  git::OdbPtr odb(raw_odb);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (git_odb_read_header(&size, &type, odb.get(), &id) < 0 || type != GIT_OBJECT_COMMIT) {
    throw DamagedRecord(job, "its ref", "does not name a commit");
  }
  if (size > max_record_file_bytes("")) throw DamagedRecord(job, "its record commit", "is too large");
  git_commit* raw = nullptr;
  if (git_commit_lookup(&raw, repo, &id) < 0) throw DamagedRecord(job, "its ref", "does not name a commit");
  return git::CommitPtr(raw);
}

git::CommitPtr lookup_commit(git_repository* repo, const git_oid& id) {
  git_commit* raw = nullptr;
  check(git_commit_lookup(&raw, repo, &id), "cannot read job record " + git::oid_to_string(id));
  return git::CommitPtr(raw);
}

// The record commit's parents: the base, the result when there is one, then
// each node's result that is not among them yet (what gc must keep).
std::vector<std::string> record_parents(const JobRecord& record) {
  std::vector<std::string> parents = {record.base};
  const auto add = [&](const std::string& commit) {
    if (!commit.empty() && std::find(parents.begin() + 1, parents.end(), commit) == parents.end()) {
      parents.push_back(commit);
    }
  };
  add(record.result);
  for (const auto& node : record.nodes) add(node.result);
  return parents;
}

}  // namespace

std::int64_t next_job_sequence(const git::Repository& repo) {
  const std::string common = util::real_path(repo.common_dir());
  util::make_private_dirs(common, "mullet");
  const std::string path = common + "/mullet/job-sequence";
  const UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw failure("cannot open " + path + ": " + util::errno_text(errno));
  // The lock dies with the descriptor.
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw failure("cannot lock " + path + ": " + util::errno_text(errno));
  }
  char buffer[32] = {};
  const ssize_t got = ::pread(fd.get(), buffer, sizeof buffer - 1, 0);
  // A damaged counter starts again: the sequence only breaks ties.
  const std::int64_t last = got > 0 ? std::max<long long>(0, std::strtoll(buffer, nullptr, 10)) : 0;
  const std::string next = std::to_string(last + 1) + "\n";
  if (::pwrite(fd.get(), next.data(), next.size(), 0) != static_cast<ssize_t>(next.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(next.size())) != 0) {
    throw failure("cannot write " + path + ": " + util::errno_text(errno));
  }
  return last + 1;
}

std::vector<std::string> JobStore::ids() const {
  std::vector<std::string> found;
  git_reference_iterator* raw = nullptr;
  check(git_reference_iterator_glob_new(&raw, m_repo.get(), "refs/mullet/jobs/*"), "cannot list jobs");
  git::ReferenceIteratorPtr iterator(raw);
  const char* name = nullptr;
  const std::size_t prefix = std::string(jobs_ref_prefix).size();
  while (git_reference_next_name(&name, iterator.get()) == 0) {
    const std::string id = std::string(name).substr(prefix);
    if (is_valid_job_id(id)) found.push_back(id);
  }
  return found;
}

std::vector<JobSummary> JobStore::summaries() const {
  // The refs first, so the summaries (large, and thousands of them) are
  // placed once rather than moved as a vector grows.
  std::vector<std::pair<std::string, std::optional<git_oid>>> refs;
  {
    git_reference_iterator* raw = nullptr;
    check(git_reference_iterator_glob_new(&raw, m_repo.get(), "refs/mullet/jobs/*"), "cannot list jobs");
    git::ReferenceIteratorPtr iterator(raw);
    git_reference* raw_ref = nullptr;
    const std::size_t prefix = std::string(jobs_ref_prefix).size();
    while (git_reference_next(&raw_ref, iterator.get()) == 0) {
      git::ReferencePtr ref(raw_ref);
      std::string id = std::string(git_reference_name(ref.get())).substr(prefix);
      if (!is_valid_job_id(id)) continue;
      const git_oid* target = git_reference_target(ref.get());
      refs.emplace_back(std::move(id), target == nullptr ? std::nullopt : std::optional<git_oid>(*target));
    }
  }
  const std::string common = util::real_path(m_repo.common_dir());
  SummaryCache cache(common + "/mullet/summary-cache");
  std::vector<JobSummary> found(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    auto& [id, target] = refs[i];
    JobSummary& summary = found[i];
    summary.id = std::move(id);
    try {
      if (!target) throw DamagedRecord(summary.id, "its ref", "is not a direct reference");
      const std::string commit_hex = git::oid_to_string(*target);
      if (!cache.find(commit_hex, summary.record) || summary.record.id != summary.id) {
        summary.record = RecordSummary();
        const auto commit = record_commit(m_repo.get(), *target, summary.id);
        const auto json = nlohmann::json::parse(commit_summary_line(commit.get()), nullptr, false);
        if (json.is_discarded()) throw DamagedRecord(summary.id, "the summary line", "is not JSON");
        summary.record = summary_of(record_from_json(json, summary.id));
        cache.remember(commit_hex, summary.record);
      }
      summary.created_ms = util::parse_utc_ms(summary.record.created_at);
    } catch (const DamagedRecord& damaged) {
      summary.damage = damaged.field() + " " + damaged.problem();
    }
  }
  try {
    util::make_private_dirs(common, "mullet");
    cache.save();
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): without a cache, the next list reads every record
  }
  return found;
}

std::optional<StoredJob> JobStore::load(const std::string& id) const {
  git_reference* raw_ref = nullptr;
  if (git_reference_lookup(&raw_ref, m_repo.get(), ref_name(id).c_str()) < 0) return std::nullopt;
  git::ReferencePtr ref(raw_ref);
  if (git_reference_type(ref.get()) != GIT_REFERENCE_DIRECT) {
    throw DamagedRecord(id, "its ref", "is not a direct reference");
  }
  StoredJob job;
  job.record_commit = *git_reference_target(ref.get());
  job.record.id = id;
  const auto commit = record_commit(m_repo.get(), job.record_commit, id);
  auto content = read_file(job, "job.json");
  if (!content) throw DamagedRecord(id, "job.json", "is missing");
  const auto json = nlohmann::json::parse(*content, nullptr, false);
  if (json.is_discarded()) throw DamagedRecord(id, "job.json", "is not JSON");
  job.record = record_from_json(json, id);
  check_commits(job.record, commit.get());
  return job;
}

void JobStore::check_commits(const JobRecord& r, git_commit* record) const {
  // The record commit's parents are the base and the result: what gc keeps
  // must be what the record names.
  expect_commit(r.id, "base", r.base, true);
  expect_commit(r.id, "result", r.result, true);
  for (std::size_t n = 0; n < r.nodes.size(); ++n) {
    expect_commit(r.id, "nodes[" + std::to_string(n) + "].result", r.nodes[n].result, true);
  }
  const auto parents = record_parents(r);
  bool same = git_commit_parentcount(record) == parents.size();
  for (unsigned i = 0; same && i < parents.size(); ++i) {
    same = git::oid_to_string(*git_commit_parent_id(record, i)) == parents[i];
  }
  if (!same) throw DamagedRecord(r.id, "base/result", "are not the record commit's parents");
  // A base made of uncommitted changes sits on the HEAD the record names.
  if (r.base_uncommitted) {
    expect_commit(r.id, "base_head", r.base_head, false);
    const auto base = lookup_commit(m_repo.get(), git::oid_from_string(r.base));
    if (git_commit_parentcount(base.get()) != 1 ||
        git::oid_to_string(*git_commit_parent_id(base.get(), 0)) != r.base_head) {
      throw DamagedRecord(r.id, "base_head", "is not the base commit's parent");
    }
  }
  // Earlier attempts' snapshots may have been pruned; those that exist must be commits.
  const auto check_attempts = [&](const std::vector<AttemptRecord>& attempts, const std::string& prefix) {
    for (std::size_t a = 0; a < attempts.size(); ++a) {
      const std::string field = prefix + "attempts[" + std::to_string(a) + "]";
      expect_commit(r.id, field + ".result", attempts[a].result, false);
      for (std::size_t g = 0; g < attempts[a].gates.size(); ++g) {
        expect_commit(r.id, field + ".gates[" + std::to_string(g) + "].commit", attempts[a].gates[g].commit, false);
      }
    }
  };
  check_attempts(r.attempts, "");
  for (std::size_t n = 0; n < r.nodes.size(); ++n) {
    check_attempts(r.nodes[n].attempts, "nodes[" + std::to_string(n) + "].");
  }
}

void JobStore::expect_commit(const std::string& id, const std::string& field, const std::string& hex,
                             bool must_exist) const {
  if (hex.empty()) return;
  const git_oid oid = git::oid_from_string(hex);
  git_odb* raw_odb = nullptr;
  check(git_repository_odb(&raw_odb, m_repo.get()), "cannot open the object database");
  git::OdbPtr odb(raw_odb);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (git_odb_read_header(&size, &type, odb.get(), &oid) < 0) {
    if (must_exist) throw DamagedRecord(id, field, "names an object this repository does not have");
    return;
  }
  if (type != GIT_OBJECT_COMMIT) throw DamagedRecord(id, field, "does not name a commit");
}

std::string JobStore::resolve(const std::string& prefix) const {
  // `stop`, `discard`, `wait` and `shell` act on a whole job: a node's
  // address is answered as such, not as a job nobody has.
  if (const auto address = parse_job_address(prefix, max_nodes); address && address->node != 0) {
    throw usage_error("'" + prefix + "' names one node of a job; this command acts on a whole job",
                      "name the job alone: " + address->job);
  }
  return value_or_throw(match_job_id(ids(), prefix));
}

std::optional<git_oid> JobStore::ref_target(const std::string& id) const {
  git_reference* raw_ref = nullptr;
  if (git_reference_lookup(&raw_ref, m_repo.get(), ref_name(id).c_str()) < 0) return std::nullopt;
  git::ReferencePtr ref(raw_ref);
  const git_oid* target = git_reference_target(ref.get());
  if (target == nullptr) return std::nullopt;
  return *target;
}

StoredJob JobStore::find(const std::string& prefix) const {
  const std::string id = resolve(prefix);
  auto job = load(id);
  if (!job) throw usage_error("no job matches '" + prefix + "'");
  return *job;
}

AddressedJob JobStore::find_address(const std::string& address) const {
  const JobAddress parsed = value_or_throw(parse_job_address(address, max_nodes));
  AddressedJob found{find(parsed.job), parsed.node};
  value_or_throw(check_node_number(found.job.record.id, parsed.node, found.job.record.nodes.size()));
  return found;
}

std::optional<std::string> JobStore::read_file(const StoredJob& job, const std::string& name) const {
  auto commit = record_commit(m_repo.get(), job.record_commit, job.record.id);
  git_tree* raw_tree = nullptr;
  check(git_commit_tree(&raw_tree, commit.get()), "cannot read a job record");
  git::TreePtr tree(raw_tree);
  const git_tree_entry* entry = git_tree_entry_byname(tree.get(), name.c_str());
  if (entry == nullptr) return std::nullopt;
  // Checked before reading: a forged record may hold a tree, a symlink or a
  // blob of gigabytes under these names.
  if (git_tree_entry_filemode(entry) != GIT_FILEMODE_BLOB) throw DamagedRecord(job.record.id, name, "is not a file");
  git_odb* raw_odb = nullptr;
  check(git_repository_odb(&raw_odb, m_repo.get()), "cannot open the object database");
  git::OdbPtr odb(raw_odb);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (git_odb_read_header(&size, &type, odb.get(), git_tree_entry_id(entry)) < 0 || type != GIT_OBJECT_BLOB) {
    throw DamagedRecord(job.record.id, name, "is missing or not a blob");
  }
  const std::size_t limit = max_record_file_bytes(name);
  if (size > limit) {
    throw DamagedRecord(job.record.id, name, "is larger than " + std::to_string(limit >> 20U) + " MiB");
  }
  return m_repo.read_blob(*git_tree_entry_id(entry));
}

git_oid JobStore::write_record_commit(const JobRecord& record, const std::map<std::string, std::string>& files,
                                      const std::optional<git_oid>& previous) const {
  git::TreePtr previous_tree;
  if (previous) {
    auto commit = lookup_commit(m_repo.get(), *previous);
    git_tree* raw_tree = nullptr;
    check(git_commit_tree(&raw_tree, commit.get()), "cannot read a job record");
    previous_tree.reset(raw_tree);
  }
  git_treebuilder* raw_builder = nullptr;
  check(git_treebuilder_new(&raw_builder, m_repo.get(), previous_tree.get()), "cannot build a job record");
  git::TreeBuilderPtr builder(raw_builder);
  auto add = [&](const std::string& name, const std::string& content) {
    git_oid blob{};
    check(git_blob_create_from_buffer(&blob, m_repo.get(), content.data(), content.size()),
          "cannot write a job record");
    check(git_treebuilder_insert(nullptr, builder.get(), name.c_str(), &blob, GIT_FILEMODE_BLOB),
          "cannot write a job record");
  };
  add("job.json", to_json(record).dump(2) + "\n");
  for (const auto& [name, content] : files) add(name, content);
  git_oid tree_id{};
  check(git_treebuilder_write(&tree_id, builder.get()), "cannot write a job record");
  git_tree* raw_tree = nullptr;
  check(git_tree_lookup(&raw_tree, m_repo.get(), &tree_id), "cannot write a job record");
  git::TreePtr tree(raw_tree);

  std::vector<git::CommitPtr> parents;
  for (const auto& parent : record_parents(record)) {
    parents.push_back(lookup_commit(m_repo.get(), git::oid_from_string(parent)));
  }
  std::vector<const git_commit*> parent_pointers;
  for (const auto& parent : parents) parent_pointers.push_back(parent.get());

  const auto signature = git::mullet_signature();
  const std::string message =
      "git-mullet job " + record.id + ": " + state_name(record.state) + "\n\n" + summary_json(record).dump() + "\n";
  git_oid commit_id{};
  check(git_commit_create(&commit_id, m_repo.get(), nullptr, signature.get(), signature.get(), nullptr, message.c_str(),
                          tree.get(), parent_pointers.size(), parent_pointers.data()),
        "cannot write a job record");
  return commit_id;
}

git_oid JobStore::create(const JobRecord& record) {
  // A job whose task could not be read back (a prompt too long, a title with
  // control characters) is refused before it exists.
  try {
    record_from_json(to_json(record), record.id);
  } catch (const DamagedRecord& damaged) {
    throw usage_error("cannot record this job: its " + damaged.field() + " " + damaged.problem());
  }
  const git_oid commit = write_record_commit(record, {}, std::nullopt);
  git_reference* raw = nullptr;
  check(git_reference_create(&raw, m_repo.get(), ref_name(record.id).c_str(), &commit, 0, "git-mullet run"),
        "cannot create the job's ref");
  git::ReferencePtr ref(raw);
  return commit;
}

std::optional<git_oid> JobStore::save(const JobRecord& record, const std::map<std::string, std::string>& files,
                                      const git_oid& expected) {
  const git_oid commit = write_record_commit(record, files, expected);
  git_reference* raw = nullptr;
  const int rc = git_reference_create_matching(&raw, m_repo.get(), ref_name(record.id).c_str(), &commit, 1, &expected,
                                               "git-mullet update");
  if (rc == GIT_EMODIFIED || rc == GIT_ENOTFOUND || rc == GIT_ELOCKED) return std::nullopt;
  check(rc, "cannot update job " + record.id);
  git::ReferencePtr ref(raw);
  return commit;
}

StoredJob JobStore::update(const std::string& id, const std::function<void(JobRecord&)>& change,
                           const std::map<std::string, std::string>& files) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto job = load(id);
    if (!job) throw failure("job " + id + " was discarded while it was being updated");
    change(job->record);
    if (auto commit = save(job->record, files, job->record_commit)) {
      job->record_commit = *commit;
      return *job;
    }
    // The loser of a race backs off for a random moment, growing: writers in
    // step on a loaded machine would otherwise keep colliding (or finding the
    // ref locked) until they give up.
    thread_local std::minstd_rand random(std::random_device{}());
    const int most_ms = 1 << std::min(attempt, 6);
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + static_cast<int>(random() % most_ms)));
  }
  throw failure("cannot update job " + id + ": its record keeps changing under us");
}

bool JobStore::remove(const std::string& id, const git_oid& expected) {
  // Read the trace's reflog before moving the ref: libgit2 may or may not log
  // the move itself, and writing our copy afterwards leaves exactly one entry.
  git_reflog* raw_log = nullptr;
  check(git_reflog_read(&raw_log, m_repo.get(), discarded_ref), "cannot read the discard log");
  git::ReflogPtr log(raw_log);

  git_reference* raw_ref = nullptr;
  if (git_reference_lookup(&raw_ref, m_repo.get(), ref_name(id).c_str()) < 0) return false;
  git::ReferencePtr ref(raw_ref);
  const git_oid* current = git_reference_target(ref.get());
  if (current == nullptr || git_oid_cmp(current, &expected) != 0) return false;

  git_reference* raw_trace = nullptr;
  check(git_reference_create(&raw_trace, m_repo.get(), discarded_ref, &expected, 1, nullptr),
        "cannot record the discard");
  git::ReferencePtr trace(raw_trace);
  const int rc = git_reference_delete(ref.get());
  if (rc == GIT_EMODIFIED) return false;
  check(rc, "cannot delete the job's ref");

  const auto signature = git::mullet_signature();
  const std::string message = "git-mullet discard " + id;
  check(git_reflog_append(log.get(), &expected, signature.get(), message.c_str()), "cannot record the discard");
  check(git_reflog_write(log.get()), "cannot record the discard");
  return true;
}

}  // namespace mullet::jobs
