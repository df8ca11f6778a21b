#include <doctest/doctest.h>

#include <string>

#include "config/config.hpp"
#include "git/handles.hpp"
#include "git/repository.hpp"
#include "jobs/phases.hpp"
#include "jobs/sandbox_objects.hpp"
#include "sandbox/plan.hpp"
#include "util/fs.hpp"

#include "support/support.hpp"

using mullet::jobs::BoundedLog;
using mullet::jobs::log_tail_kept;
using mullet::test::contains;
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

namespace {

const mullet::sandbox::Mount* mount_at(const mullet::sandbox::Plan& plan, const std::string& destination) {
  for (const auto& mount : plan.mounts) {
    if (mount.destination == destination) return &mount;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a phase's plan binds the objects its history allows, and only the user's store borrows") {
  using mullet::config::History;
  using mullet::jobs::SandboxObjects;
  ScratchDir dir;
  mullet::util::make_dirs(dir / "user-objects/info");
  mullet::util::make_dirs(dir / "borrowed");
  mullet::util::write_file(dir / "user-objects/info/alternates", dir / "borrowed" + "\n");
  mullet::util::make_dirs(dir / "bases/0123-base/objects/pack");
  const auto settings = mullet::config::Config().settings();
  mullet::jobs::JobPaths paths;
  paths.empty_file = dir / "empty";
  const mullet::jobs::SandboxDirs dirs{dir / "work", dir / "git", dir / "home", std::nullopt, {}};
  const auto phase = mullet::jobs::gate_phase(settings, {"check", "true", 0, ""});

  SUBCASE("all: the user's store and what it borrows") {
    const SandboxObjects objects{History::all, {}, dir / "user-objects", ""};
    const auto plan = mullet::jobs::plan_for(settings, paths, dirs, objects, phase, "", "", std::nullopt);
    CHECK(plan.history == "all");
    REQUIRE(mount_at(plan, "/mullet/objects") != nullptr);
    CHECK(mount_at(plan, "/mullet/objects")->source == dir / "user-objects");
    REQUIRE(mount_at(plan, "/mullet/objects-1") != nullptr);
    CHECK(mount_at(plan, "/mullet/objects-1")->source == dir / "borrowed");
    CHECK(mount_at(plan, "/mullet/objects/info/alternates") != nullptr);
    CHECK(plan.env.at("GIT_ALTERNATE_OBJECT_DIRECTORIES") == "/mullet/objects:/mullet/objects-1");
  }
  for (const History history : {History::base, History::none}) {
    const std::string name(mullet::config::history_name(history));
    SUBCASE(("the base's pack alone: " + name).c_str()) {
      const SandboxObjects objects{history, {}, dir / "bases/0123-base/objects", ""};
      const auto plan = mullet::jobs::plan_for(settings, paths, dirs, objects, phase, "", "", std::nullopt);
      CHECK(plan.history == name);
      REQUIRE(mount_at(plan, "/mullet/objects") != nullptr);
      CHECK(*mount_at(plan, "/mullet/objects") == mullet::sandbox::Mount{mullet::sandbox::MountKind::read_only_bind,
                                                                         dir / "bases/0123-base/objects",
                                                                         "/mullet/objects"});
      CHECK(mount_at(plan, "/mullet/objects-1") == nullptr);
      CHECK(mount_at(plan, "/mullet/objects/info/alternates") == nullptr);
      for (const auto& mount : plan.mounts) CHECK(!contains(mount.source, "user-objects"));
      CHECK(plan.env.at("GIT_ALTERNATE_OBJECT_DIRECTORIES") == "/mullet/objects");
      CHECK(contains(mullet::sandbox::describe(plan),
                     "history:     " + name +
                         (history == History::base ? " (the objects the base commit reaches"
                                                   : " (the base commit and its files, no history")));
    }
  }
}

TEST_CASE("planned sandbox objects: where each history's objects are, nothing built") {
  using mullet::config::History;
  ScratchDir dir;
  mullet::test::GitRepo user(dir / "user");
  mullet::test::make_file(user.path("README"), "hello\n");
  const std::string base = user.commit_all("base");
  const auto repo = mullet::git::Repository::open_git_dir(user.path(".git"));
  const auto oid = mullet::git::oid_from_string(base);
  const std::string common = mullet::util::real_path(user.path(".git"));

  const auto all = mullet::jobs::planned_sandbox_objects(repo, History::all, oid);
  CHECK(all.objects_dir == common + "/objects");
  CHECK(all.shallow.empty());
  const auto with_history = mullet::jobs::planned_sandbox_objects(repo, History::base, oid);
  CHECK(with_history.objects_dir == common + "/mullet/bases/" + base + "-base/objects");
  CHECK(with_history.shallow.empty());
  const auto without = mullet::jobs::planned_sandbox_objects(repo, History::none, oid);
  CHECK(without.objects_dir == common + "/mullet/bases/" + base + "-none/objects");
  CHECK(without.shallow == base + "\n");
  CHECK(!mullet::util::exists(common + "/mullet/bases"));
}
