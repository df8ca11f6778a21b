#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "sandbox/doctor.hpp"
#include "util/error.hpp"

namespace mullet::cli {
namespace {

// The grants each phase would get here: the user's config, narrowed by the
// repository's .mullet.toml at HEAD when run inside a repository.
nlohmann::json phase_grants() {
  std::optional<git::Repository> repo;
  try {
    repo.emplace(open_repository());
  } catch (const Error&) {
  }
  std::optional<git_oid> base;
  if (repo && git_repository_head_unborn(repo->get()) != 1) base = repo->head_commit();
  const auto config = load_config(repo ? &*repo : nullptr, base);
  return {{"setup", config.list("network.setup")},
          {"worker", config.list("network.worker")},
          {"gates", nlohmann::json::array()}};
}

int doctor(bool json) {
  const auto checks = sandbox::run_doctor_checks();
  const auto grants = phase_grants();
  bool required_ok = true;
  for (const auto& check : checks) required_ok = required_ok && (check.ok || !check.required);
  if (json) {
    std::cout
        << nlohmann::json{{"ok", required_ok}, {"checks", sandbox::checks_to_json(checks)}, {"grants", grants}}.dump(2)
        << "\n";
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
