#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "git/cli.hpp"
#include "git/handles.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
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
  Addressed found = find_addressed(jobs::JobStore(repo), options.job);
  std::string name = found.label;  // "ID", or "ID/N" for one node
  if (found.node == 0 && !found.record.nodes.empty()) {
    // A job of several nodes: its chosen node, said with why.
    const auto& job = found.job.record;
    const auto chosen = jobs::chosen_node(job);
    if (!chosen) {
      throw usage_error(
          "no node of job " + job.id + " passed every gate (" + jobs::nodes_summary(job) + "), so none is chosen",
          "see them with `git mullet show " + job.id + "`; take one node with `git mullet merge " + job.id +
              "/N` (--force if it did not succeed)");
    }
    std::cout << util::terminal_safe("job " + job.id + ": taking " + jobs::choice_reason(job, *chosen) + "\n");
    found.record = jobs::node_view(job, *chosen);
    name = job.id + "/" + std::to_string(*chosen);
  }
  const auto& record = found.record;
  const auto state = jobs::effective_state(record);
  if (record.result.empty()) {
    throw usage_error("job " + name + " has nothing to merge (" + jobs::state_name(state) + ", no changes)");
  }
  std::string failed_gate;
  if (!record.attempts.empty()) {
    for (const auto& gate : record.attempts.back().gates) {
      if (!gate.passed) failed_gate = gate.name;
    }
  }
  if (!failed_gate.empty() && !options.force) {
    throw usage_error("job " + name + " failed its gate '" + failed_gate + "'",
                      "see `git mullet show " + name + "`; pass --force to take its result anyway");
  }
  if (state != jobs::JobState::succeeded && !options.force) {
    throw usage_error("job " + name + " did not succeed (" + jobs::state_name(state) + ")",
                      "review it with `git mullet diff " + name + "`; pass --force to take its result anyway");
  }
  // A node named by the user gets a branch of its own: mullet/<id>-<N>.
  const std::string branch = !options.branch.empty() ? options.branch
                             : found.node == 0       ? "mullet/" + record.id
                                                     : "mullet/" + record.id + "-" + std::to_string(found.node);
  int valid = 0;
  if (git_branch_name_is_valid(&valid, branch.c_str()) < 0 || valid == 0) {
    throw usage_error("'" + branch + "' is not a valid branch name");
  }
  const std::string ref_name = "refs/heads/" + branch;
  // Created only if it does not exist, checked under git's lock on the ref
  // (libgit2 checks before it locks, so two concurrent merges could both
  // "create" it). HEAD, the index and the work tree stay as they are.
  const auto created = git::run_git({repo.git_dir(), std::nullopt, {}},
                                    git::create_ref_args(ref_name, record.result, "git-mullet merge " + name));
  if (!created.status.success()) {
    git_reference* existing = nullptr;
    if (git_reference_lookup(&existing, repo.get(), ref_name.c_str()) == 0) {
      git_reference_free(existing);
      throw usage_error("branch '" + branch + "' already exists", "choose another name with --branch NAME");
    }
    throw usage_error("cannot create branch '" + branch + "': " + util::trim(created.err));
  }
  std::cout << util::terminal_safe("created branch " + branch + " at " + short_sha(record.result) + " (job " + name +
                                   ")\n  look at it: git log -p " + branch + "\n  merge it:   git merge " + branch +
                                   "\n");
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* sub = app.add_subcommand("merge", "Fetch a job's result in as a new branch, and stop there");
  sub->add_option("JOB", options->job, "Job id or unique prefix; JOB/N for node N of a job of several")->required();
  sub->add_option("--branch", options->branch, "Branch name (default: mullet/<id>)")->type_name("NAME");
  sub->add_flag("--force", options->force, "Take the result of a job that did not succeed");
  sub->callback([options, &chosen] { chosen = [options] { return merge(*options); }; });
}

}  // namespace mullet::cli
