#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "git/handles.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct MergeOptions {
  std::string job;
  std::string branch;
  bool force = false;
};

int merge(const MergeOptions& options) {
  const git::Repository repo = open_repository();
  const auto job = jobs::JobStore(repo).find(options.job);
  const auto& record = job.record;
  const auto state = jobs::effective_state(record);
  if (record.result.empty()) {
    throw usage_error("job " + record.id + " has nothing to merge (" + jobs::state_name(state) + ", no changes)");
  }
  std::string failed_gate;
  if (!record.attempts.empty()) {
    for (const auto& gate : record.attempts.back().gates) {
      if (!gate.passed) failed_gate = gate.name;
    }
  }
  if (!failed_gate.empty() && !options.force) {
    throw usage_error("job " + record.id + " failed its gate '" + failed_gate + "'",
                      "see `git mullet show " + record.id + "`; pass --force to take its result anyway");
  }
  if (state != jobs::JobState::succeeded && !options.force) {
    throw usage_error("job " + record.id + " did not succeed (" + jobs::state_name(state) + ")",
                      "review it with `git mullet diff " + record.id + "`; pass --force to take its result anyway");
  }
  const std::string branch = options.branch.empty() ? "mullet/" + record.id : options.branch;
  int valid = 0;
  if (git_branch_name_is_valid(&valid, branch.c_str()) < 0 || valid == 0) {
    throw usage_error("'" + branch + "' is not a valid branch name");
  }
  const std::string ref_name = "refs/heads/" + branch;
  git_reference* existing = nullptr;
  if (git_reference_lookup(&existing, repo.get(), ref_name.c_str()) == 0) {
    git_reference_free(existing);
    throw usage_error("branch '" + branch + "' already exists", "choose another name with --branch NAME");
  }
  const git_oid result = git::oid_from_string(record.result);
  git_reference* created = nullptr;
  const std::string log_message = "git-mullet merge " + record.id;
  // Creates the branch only: HEAD, the index and the work tree stay as they are.
  if (git_reference_create(&created, repo.get(), ref_name.c_str(), &result, 0, log_message.c_str()) < 0) {
    throw usage_error("cannot create branch '" + branch + "': " + git::last_error_message());
  }
  git::ReferencePtr owned(created);
  std::cout << util::terminal_safe("created branch " + branch + " at " + short_sha(record.result) + " (job " +
                                   record.id + ")\n  look at it: git log -p " + branch + "\n  merge it:   git merge " +
                                   branch + "\n");
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* sub = app.add_subcommand("merge", "Fetch a job's result in as a new branch, and stop there");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_option("--branch", options->branch, "Branch name (default: mullet/<id>)");
  sub->add_flag("--force", options->force, "Take the result of a job that did not succeed");
  sub->callback([options, &chosen] { chosen = [options] { return merge(*options); }; });
}

}  // namespace mullet::cli
