#include <unistd.h>

#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "executors/claude_args.hpp"
#include "executors/claude_binary.hpp"
#include "executors/executor.hpp"
#include "executors/opencode_args.hpp"
#include "executors/opencode_binary.hpp"
#include "jobs/api_access.hpp"
#include "jobs/disk_cap.hpp"
#include "jobs/layout.hpp"
#include "jobs/slots.hpp"
#include "jobs/workspace.hpp"
#include "sandbox/disk_image.hpp"
#include "sandbox/doctor.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

// What Bash runs: allow_bash, and Claude Code's read-only forms of the
// commands it names (every other one is denied).
std::string bash_summary(const std::vector<std::string>& allow_bash) {
  if (allow_bash.empty()) return "no Bash tool ([claude] allow_bash is empty)";
  std::string text = "Bash runs only " + util::join(allow_bash, ", ");
  const auto kept = executors::claude::commands_kept(allow_bash);
  if (!kept.empty()) text += ", and Claude Code's own read-only forms of " + util::join(kept, ", ");
  return text;
}

// What doctor learns about an agent's binary: the file, its version, a flag
// we rely on that it lacks (its argv cannot be built), what it may run.
struct AgentBinaryFacts {
  std::string path;
  std::string version;
  std::optional<Error> missing_flag;
  std::string allowed;
};

// Which binary a job of this agent would run. A missing binary fails its
// jobs before anything runs (exit 2); one without a flag we rely on makes
// them refused, like a broken wall. A warning unless the agent is the
// configured executor.
sandbox::Check agent_check(const std::string& title, bool configured, const std::function<AgentBinaryFacts()>& learn) {
  sandbox::Check check{title, false, false, {}, {}};
  try {
    const AgentBinaryFacts facts = learn();
    check.detail = facts.path + " (" + facts.version + ")";
    if (facts.missing_flag) {
      check.required = configured;
      check.detail += ": " + std::string(facts.missing_flag->what());
      check.fix = facts.missing_flag->hint();
      return check;
    }
    check.ok = true;
    check.detail += "; " + facts.allowed;
  } catch (const Error& error) {
    check.detail = error.what();
    check.fix = error.hint();
  }
  return check;
}

sandbox::Check claude_check(const config::Settings& settings, const std::string& cache_dir) {
  return agent_check("Claude Code (the claude executor)", settings.run.executor == "claude", [&] {
    namespace claude = executors::claude;
    const auto binary = claude::probe_binary(
        value_or_throw(claude::resolve_binary(settings.claude.binary, util::host_path())), cache_dir);
    const auto argv = claude::build_argv(binary.flags, {claude::worker_tools(settings.claude.allow_bash),
                                                        "settings.json", "{}", 0, settings.claude.model});
    const std::string& model = settings.claude.model;
    return AgentBinaryFacts{binary.path, binary.version, argv ? std::nullopt : std::optional<Error>(argv.error()),
                            "model " + (model.empty() ? std::string("Claude Code's choice") : model) + "; " +
                                bash_summary(settings.claude.allow_bash)};
  });
}

sandbox::Check opencode_check(const config::Settings& settings, const std::string& cache_dir) {
  return agent_check("opencode (the opencode executor)", settings.run.executor == "opencode", [&] {
    namespace opencode = executors::opencode;
    const auto& ours = settings.opencode;
    const auto binary =
        opencode::probe_binary(value_or_throw(opencode::resolve_binary(ours.binary, util::host_path())), cache_dir);
    const auto argv = opencode::build_argv(binary.run_flags, ours.model);
    return AgentBinaryFacts{
        binary.path, binary.version, argv ? std::nullopt : std::optional<Error>(argv.error()),
        "model " + ours.model + "; bash runs " +
            (ours.allow_bash.empty() ? std::string("nothing") : "only " + util::join(ours.allow_bash, ", "))};
  });
}

// As root, which host uids jobs' sandboxes run as.
// Whether jobs here get an overlay of a shared pristine checkout or a
// checkout of their own, and why (probed as a job would).
sandbox::Check work_tree_check(const config::Settings& settings, const std::optional<jobs::WorkTreeChoice>& probed) {
  sandbox::Check check{"work tree", true, false, {}, {}};
  if (!probed) {
    check.detail = "outside a repository: not probed";
    return check;
  }
  const jobs::WorkTreeChoice& choice = *probed;
  check.detail = choice.why;
  check.ok = choice.overlay || settings.sandbox.work_tree == config::WorkTree::checkout;
  if (!choice.refused.empty()) {
    check.fix = "jobs are refused: " + choice.refused + "; set [sandbox] work_tree = \"auto\"";
  } else if (!check.ok) {
    check.fix = "jobs still run, each with a full checkout (slower to start, more disk)";
  }
  return check;
}

// How a job's setup and worker would be held to disk_mb here (as
// `run --dry-run` says it per phase).
sandbox::Check disk_check(const config::Settings& settings, const std::optional<jobs::WorkTreeChoice>& probed) {
  sandbox::DiskCapWorkTree work_tree = sandbox::DiskCapWorkTree::kernel_overlay;
  if (!probed || !probed->overlay) {
    work_tree = sandbox::DiskCapWorkTree::checkout;
  } else if (probed->fuse) {
    work_tree = sandbox::DiskCapWorkTree::fuse_overlay;
  }
  const sandbox::DiskCapChoice choice = jobs::disk_cap_choice(settings, ::geteuid() == 0, work_tree);
  return {"disk",
          true,
          false,
          sandbox::describe_disk_cap(choice, static_cast<std::int64_t>(settings.limits.disk_mb.count())),
          {}};
}

std::optional<sandbox::Check> sandbox_user_check(const config::SandboxSettings& sandbox,
                                                 std::optional<uid_t>& probe_uid) {
  if (::geteuid() != 0) return std::nullopt;
  sandbox::Check check{"sandbox users", false, true, {}, {}};
  try {
    const auto range = jobs::sandbox_uid_range(sandbox);
    probe_uid = range.first;
    check.ok = true;
    check.detail = "git-mullet runs as root: each running job's sandboxes get a host uid of their own, from " +
                   std::to_string(range.first) + ".." +
                   std::to_string(static_cast<std::uint64_t>(range.first) + range.count - 1) +
                   " ([sandbox] uid, uid_count)";
  } catch (const Error& error) {
    probe_uid = 65534;  // the test sandbox still never runs as root
    check.detail = error.what();
    check.fix = error.hint();
  }
  return check;
}

int doctor(bool json) {
  // The grants each phase would get here: the user's config, narrowed by the
  // repository's .mullet.toml at HEAD when run inside a repository.
  std::optional<git::Repository> repo;
  try {
    repo.emplace(open_repository());
  } catch (const Error&) {
  }
  std::optional<git_oid> base;
  if (repo && git_repository_head_unborn(repo->get()) != 1) base = repo->head_commit();
  const config::Settings settings = load_config(repo ? &*repo : nullptr, base).settings();
  std::optional<uid_t> probe_uid;
  const auto user_check = sandbox_user_check(settings.sandbox, probe_uid);
  auto checks = sandbox::run_doctor_checks(probe_uid, settings.sandbox.cgroup);
  if (user_check) checks.push_back(*user_check);
  std::optional<jobs::WorkTreeChoice> work_tree;
  if (repo) work_tree = jobs::choose_work_tree(*repo, settings);
  checks.push_back(work_tree_check(settings, work_tree));
  checks.push_back(disk_check(settings, work_tree));
  checks.push_back(claude_check(settings, repo ? jobs::jobs_directory(*repo) : std::string()));
  checks.push_back(opencode_check(settings, repo ? jobs::jobs_directory(*repo) : std::string()));

  const nlohmann::json grants = {
      {"setup", settings.network.setup}, {"worker", settings.network.worker}, {"gates", nlohmann::json::array()}};
  // The model API is not a grant: the worker reaches it only through the
  // credential endpoint, which holds the key on this side.
  std::string api_upstream;
  if (const auto executor = executors::make_executor(settings.run.executor); executor->needs_api()) {
    const auto upstream = net::parse_upstream_url(jobs::planned_upstream(settings, *executor));
    api_upstream = upstream ? upstream->to_string() : std::string();
  }
  bool required_ok = true;
  for (const auto& check : checks) required_ok = required_ok && (check.ok || !check.required);
  if (json) {
    nlohmann::json report{{"ok", required_ok}, {"checks", sandbox::checks_to_json(checks)}, {"grants", grants}};
    report["api"] = api_upstream.empty() ? nlohmann::json() : nlohmann::json(api_upstream);
    std::cout << report.dump(2) << "\n";
  } else {
    for (const auto& check : checks) {
      const char* mark = check.ok ? "ok  " : (check.required ? "FAIL" : "warn");
      std::cout << mark << "  " << check.name << ": " << check.detail << "\n";
      if (!check.ok && !check.fix.empty()) std::cout << "      fix: " << check.fix << "\n";
    }
    for (const auto& [phase, list] : grants.items()) {
      std::string shown;
      for (const auto& grant : list) shown += (shown.empty() ? "" : ", ") + grant.get<std::string>();
      std::cout << "net   " << phase << ": " << (shown.empty() ? "no network" : "through the egress proxy to " + shown)
                << "\n";
    }
    if (!api_upstream.empty()) {
      std::cout << "api   worker: the model API through the credential endpoint to " << api_upstream << "\n";
    }
    std::cout << (required_ok ? "the sandbox can be built here\n"
                              : "jobs will be refused until the failures are fixed\n");
  }
  return required_ok ? 0 : static_cast<int>(ExitCode::refused);
}

}  // namespace

void add_doctor_command(CLI::App& app, Action& chosen) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("doctor", "Check everything the sandbox needs on this machine");
  sub->add_flag("--json", *json, "Print the checks as JSON");
  sub->callback([json, &chosen] { chosen = [json] { return doctor(*json); }; });
}

}  // namespace mullet::cli
