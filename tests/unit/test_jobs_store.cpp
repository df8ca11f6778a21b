#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "git/handles.hpp"
#include "git/repository.hpp"
#include "jobs/id.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"

#include "support/support.hpp"

using mullet::Error;
using mullet::git::oid_to_string;
using mullet::git::Repository;
using mullet::jobs::AttemptRecord;
using mullet::jobs::JobRecord;
using mullet::jobs::JobState;
using mullet::jobs::JobStore;
using mullet::jobs::StoredJob;
using mullet::test::contains;
using mullet::test::GitRepo;
using mullet::test::make_file;
using mullet::test::ScratchDir;

namespace {

// A repository with one commit, the base of the jobs recorded in it.
struct StoreFixture {
  StoreFixture() : user(scratch / "repo"), base(commit_base(user)), repo(Repository::open_git_dir(user.path(".git"))) {}

  static std::string commit_base(const GitRepo& user) {
    make_file(user.path("README"), "hello\n");
    return user.commit_all("base");
  }

  JobRecord new_record() const {
    JobRecord record;
    record.id = mullet::jobs::new_job_id();
    record.title = "a job";
    record.prompt = "do it";
    record.state = JobState::running;
    record.base = base;
    record.executor.name = "command";
    record.created_at = "2026-01-02T03:04:05Z";
    return record;
  }

  std::string ref_of(const std::string& id) const { return std::string(mullet::jobs::jobs_ref_prefix) + id; }

  ScratchDir scratch;
  GitRepo user;
  std::string base;
  Repository repo;
};

bool same_oid(const git_oid& a, const git_oid& b) {
  return git_oid_cmp(&a, &b) == 0;
}

}  // namespace

TEST_CASE("store: of two writers from the same old record, one wins and the other is told") {
  StoreFixture f;
  JobStore store(f.repo);
  const JobRecord created = f.new_record();
  const git_oid first = store.create(created);

  StoredJob writer_a = *store.load(created.id);
  StoredJob writer_b = *store.load(created.id);
  REQUIRE(same_oid(writer_a.record_commit, first));
  REQUIRE(same_oid(writer_b.record_commit, first));
  writer_a.record.title = "written by a";
  writer_b.record.title = "written by b";

  const auto a_saved = store.save(writer_a.record, {{"worker.log", "a's log\n"}}, writer_a.record_commit);
  REQUIRE(a_saved.has_value());
  const auto b_saved = store.save(writer_b.record, {{"worker.log", "b's log\n"}}, writer_b.record_commit);
  CHECK_FALSE(b_saved.has_value());

  // The ref names a's record, whole: its job.json and its files.
  REQUIRE(store.ref_target(created.id).has_value());
  CHECK(same_oid(*store.ref_target(created.id), *a_saved));
  const StoredJob stored = *store.load(created.id);
  CHECK(stored.record.title == "written by a");
  CHECK(store.read_file(stored, "worker.log") == "a's log\n");
  CHECK(f.user.git({"rev-parse", f.ref_of(created.id)}) == oid_to_string(*a_saved));

  SUBCASE("the loser, reading again, writes on top of the winner") {
    StoredJob again = *store.load(created.id);
    again.record.error = "b's second try";
    const auto saved = store.save(again.record, {}, again.record_commit);
    REQUIRE(saved.has_value());
    const StoredJob latest = *store.load(created.id);
    CHECK(latest.record.title == "written by a");
    CHECK(latest.record.error == "b's second try");
    // Files not replaced are kept from the record before.
    CHECK(store.read_file(latest, "worker.log") == "a's log\n");
  }
}

TEST_CASE("store: update reads again and reapplies its change when the ref moved meanwhile") {
  StoreFixture f;
  JobStore store(f.repo);
  const JobRecord created = f.new_record();
  store.create(created);

  int calls = 0;
  const StoredJob updated = store.update(created.id, [&](JobRecord& record) {
    ++calls;
    if (calls == 1) {
      // Another writer gets in between update's read and its write.
      StoredJob other = *store.load(created.id);
      other.record.title = "the other writer's title";
      REQUIRE(store.save(other.record, {}, other.record_commit).has_value());
    }
    record.error = "update's error";
  });
  CHECK(calls == 2);
  const StoredJob stored = *store.load(created.id);
  CHECK(same_oid(stored.record_commit, updated.record_commit));
  CHECK(stored.record.title == "the other writer's title");
  CHECK(stored.record.error == "update's error");
}

TEST_CASE("store: concurrent updates lose nothing") {
  StoreFixture f;
  const JobRecord created = f.new_record();
  JobStore(f.repo).create(created);
  constexpr int writers = 4;
  constexpr int updates_each = 5;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int writer = 0; writer < writers; ++writer) {
    threads.emplace_back([&, writer] {
      try {
        // libgit2 objects are not shared between threads: a repository each,
        // as separate git-mullet processes would have.
        const Repository own = Repository::open_git_dir(f.user.path(".git"));
        JobStore store(own);
        for (int i = 0; i < updates_each; ++i) {
          store.update(created.id, [&](JobRecord& record) {
            record.attempts.push_back(AttemptRecord{writer * 100 + i, "", "", {}, ""});
          });
        }
      } catch (const Error&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  const StoredJob stored = *JobStore(f.repo).load(created.id);
  CHECK(stored.record.attempts.size() == static_cast<std::size_t>(writers * updates_each));
}

TEST_CASE("store: deleting and updating the same job") {
  StoreFixture f;
  JobStore store(f.repo);
  const JobRecord created = f.new_record();
  const git_oid first = store.create(created);

  SUBCASE("a delete from a stale record is refused and deletes nothing") {
    store.update(created.id, [](JobRecord& record) { record.state = JobState::failed; });
    CHECK_FALSE(store.remove(created.id, first));
    REQUIRE(store.load(created.id).has_value());
    CHECK(store.load(created.id)->record.state == JobState::failed);
  }

  SUBCASE("an update after the delete is told, and brings nothing back") {
    StoredJob stale = *store.load(created.id);
    REQUIRE(store.remove(created.id, first));
    CHECK_FALSE(store.load(created.id).has_value());
    stale.record.state = JobState::failed;
    CHECK_FALSE(store.save(stale.record, {}, stale.record_commit).has_value());
    CHECK_FALSE(store.ref_target(created.id).has_value());
    try {
      store.update(created.id, [](JobRecord& record) { record.state = JobState::failed; });
      FAIL("updated a discarded job");
    } catch (const Error& error) {
      CHECK(contains(error.what(), "was discarded"));
    }
    CHECK_FALSE(store.ref_target(created.id).has_value());
  }

  SUBCASE("a delete leaves the record in the discard log") {
    REQUIRE(store.remove(created.id, first));
    CHECK(f.user.git({"reflog", "show", "--format=%H %gs", mullet::jobs::discarded_ref}) ==
          oid_to_string(first) + " git-mullet discard " + created.id);
    // A second delete finds nothing to delete.
    CHECK_FALSE(store.remove(created.id, first));
  }
}

TEST_CASE("store: a job is created once") {
  StoreFixture f;
  JobStore store(f.repo);
  const JobRecord created = f.new_record();
  store.create(created);
  JobRecord again = created;
  again.title = "a second job with the same id";
  CHECK_THROWS_AS(store.create(again), Error);
  CHECK(store.load(created.id)->record.title == "a job");
}
