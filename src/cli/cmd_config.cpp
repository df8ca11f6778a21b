#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

int show_config(const std::string& base_rev) {
  std::optional<git::Repository> repo;
  try {
    repo.emplace(open_repository());
  } catch (const Error&) {
    if (!base_rev.empty()) throw;
  }
  std::optional<git_oid> base;
  if (repo && (!base_rev.empty() || git_repository_head_unborn(repo->get()) != 1)) {
    base = base_rev.empty() ? repo->head_commit() : repo->resolve_commit(base_rev);
  }
  const auto config = load_config(repo ? &*repo : nullptr, base);
  const auto location = config::user_config_location();
  std::cout << "# user config: " << location.path << "\n";
  if (base) std::cout << "# repository config: .mullet.toml at " << git::oid_to_string(*base) << "\n";
  // Values may come from the repository's .mullet.toml.
  std::cout << "\n" << util::terminal_safe(config.describe());
  return 0;
}

}  // namespace

void add_config_command(CLI::App& app, Action& chosen) {
  auto base = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("config", "Print the effective configuration and where each value came from");
  sub->add_option("--base", *base, "Read .mullet.toml from this commit (default: HEAD)")->type_name("COMMIT");
  sub->callback([base, &chosen] { chosen = [base] { return show_config(*base); }; });
}

}  // namespace mullet::cli
