#include "jobs/sandbox_objects.hpp"

#include "git/base_objects.hpp"
#include "util/fs.hpp"

namespace mullet::jobs {
namespace {

git::BaseHistory base_history(config::History history) {
  return history == config::History::none ? git::BaseHistory::commit_only : git::BaseHistory::ancestry;
}

}  // namespace

SandboxObjects planned_sandbox_objects(const git::Repository& repo, config::History history, const git_oid& base) {
  SandboxObjects objects{history, base, {}, {}};
  if (history == config::History::all) {
    objects.objects_dir = util::real_path(repo.objects_dir());
  } else {
    objects.objects_dir = git::base_objects_dir(repo, base, base_history(history));
    if (history == config::History::none) objects.shallow = git::oid_to_string(base) + "\n";
  }
  return objects;
}

SandboxObjects prepare_sandbox_objects(const git::Repository& repo, config::History history, const git_oid& base) {
  if (history == config::History::all) return planned_sandbox_objects(repo, history, base);
  const git::BaseObjects built = git::ensure_base_objects(repo, base, base_history(history));
  return {history, base, built.objects_dir, built.shallow};
}

}  // namespace mullet::jobs
