#include "jobs/dry_run.hpp"

#include <unistd.h>

#include <optional>

#include "executors/executor.hpp"
#include "jobs/api_access.hpp"
#include "jobs/gates.hpp"
#include "jobs/layout.hpp"
#include "jobs/phases.hpp"
#include "jobs/sandbox_objects.hpp"
#include "jobs/slots.hpp"
#include "jobs/workspace.hpp"

namespace mullet::jobs {
std::vector<sandbox::Plan> job_plans(const git::Repository& repo, const config::Settings& settings,
                                     const std::string& job_id, const git_oid& base, const std::string& prompt,
                                     const std::vector<config::Gate>& extra_gates, int node) {
  const auto executor = executors::make_executor(settings.run.executor);
  // No credential is read for a plan: the sentinel is a placeholder.
  executors::ApiAccess placeholder{"http://127.0.0.1:" + std::to_string(sandbox::inside::api_port),
                                   "sk-mullet-(a new sentinel per job)", executors::ApiAuth::api_key};
  const auto spec = executor->prepare({prompt, settings, jobs_directory(repo), &placeholder});
  const JobPaths paths = node == 0 ? job_paths(repo, job_id) : node_paths(repo, job_id, node);
  // What a node's phases see of it (attempts.cpp sets the same).
  const auto numbered = [node](PhaseSpec phase) {
    if (node > 0) phase.env["MULLET_NODE"] = std::to_string(node);
    return phase;
  };
  const SandboxObjects objects = planned_sandbox_objects(repo, settings.sandbox.history, base);
  const WorkTreeChoice choice = usable_work_tree(repo, settings);
  const std::string socket_placeholder = "/tmp/mullet-proxy-XXXXXX/proxy.sock";
  const std::optional<UidRange> uids =
      ::geteuid() == 0 ? std::optional<UidRange>(sandbox_uid_range(settings.sandbox)) : std::nullopt;
  const SandboxDirs dirs =
      planned_worker_dirs(repo, paths, base, uids ? std::optional<uid_t>(uids->first) : std::nullopt, choice);
  std::vector<sandbox::Plan> plans;
  if (!settings.run.setup.empty()) {
    const auto setup = numbered(setup_phase(settings));
    plans.push_back(
        plan_for(settings, paths, dirs, objects, setup, setup.grants.empty() ? "" : socket_placeholder, "", uids));
  }
  auto worker = numbered(worker_phase(settings, paths, spec));
  if (spec.uses_api) {
    worker.api.emplace();
    worker.api->upstream = value_or_throw(net::parse_upstream_url(planned_upstream(settings, *executor)));
  }
  plans.push_back(plan_for(settings, paths, dirs, objects, worker, worker.grants.empty() ? "" : socket_placeholder,
                           "/tmp/mullet-proxy-XXXXXX/api.sock", uids));
  for (auto& plan : plans) plan.work_tree_note = choice.why;
  for (const auto& gate : job_gates(settings, extra_gates)) {
    plans.push_back(
        plan_for(settings, paths, gate_dirs(paths), objects, numbered(gate_phase(settings, gate)), "", "", uids));
  }
  return plans;
}

}  // namespace mullet::jobs
