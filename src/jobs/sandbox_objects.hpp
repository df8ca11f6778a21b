// What of the repository's objects a job's sandboxes see at /mullet/objects
// (`[sandbox] history`): the user's whole store (all), or the base's own
// pack (base, none; git/base_objects.hpp), which the first job on a base
// builds.
#pragma once

#include <string>

#include "config/settings.hpp"
#include "git/repository.hpp"

namespace mullet::jobs {

struct SandboxObjects {
  config::History history = config::History::base;
  git_oid base{};
  std::string objects_dir;  // host path (real), bound read-only at /mullet/objects
  std::string shallow;      // each clone's shallow file; empty: none
};

// Where they are, building nothing (run --dry-run).
SandboxObjects planned_sandbox_objects(const git::Repository& repo, config::History history, const git_oid& base);
// Where they are, with the base's pack built when it is missing.
SandboxObjects prepare_sandbox_objects(const git::Repository& repo, config::History history, const git_oid& base);

}  // namespace mullet::jobs
