#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "sandbox/doctor.hpp"
#include "util/error.hpp"

namespace mullet::cli {
namespace {

int doctor(bool json) {
  const auto checks = sandbox::run_doctor_checks();
  bool required_ok = true;
  for (const auto& check : checks) required_ok = required_ok && (check.ok || !check.required);
  if (json) {
    std::cout << nlohmann::json{{"ok", required_ok}, {"checks", sandbox::checks_to_json(checks)}}.dump(2) << "\n";
  } else {
    for (const auto& check : checks) {
      const char* mark = check.ok ? "ok  " : (check.required ? "FAIL" : "warn");
      std::cout << mark << "  " << check.name << ": " << check.detail << "\n";
      if (!check.ok && !check.fix.empty()) std::cout << "      fix: " << check.fix << "\n";
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
