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
  const auto files = read_config_files(repo ? &*repo : nullptr, base);
  // A broken user file leaves nothing trustworthy to print.
  if (!files.user_problems.empty()) {
    auto problems = files.user_problems;
    problems.insert(problems.end(), files.repo_problems.begin(), files.repo_problems.end());
    config::throw_if_problems(problems);
  }
  const auto location = config::user_config_location();
  std::string text = "# The effective configuration, as TOML; after each key, where its value came from.\n";
  text += "# user file: " + location.path +
          (location.path == "/dev/null" ? " (none)"
           : files.user_file_exists     ? ""
                                        : " (does not exist)") +
          "\n";
  if (!base) {
    text += "# repository file: none (not in a repository with a commit)\n";
  } else if (!files.repo_file_exists) {
    text += "# repository file: .mullet.toml at " + git::oid_to_string(*base) + " (does not exist)\n";
  } else {
    text += "# repository file: .mullet.toml at " + git::oid_to_string(*base) +
            (files.repo_problems.empty() ? "" : " (rejected, left out: see the error)") + "\n";
  }
  // Values and comments may come from the repository's .mullet.toml.
  std::cout << util::terminal_safe(text + "\n" + files.config.describe()) << std::flush;
  // The error, and its exit code, once the rest is printed.
  config::throw_if_problems(files.repo_problems);
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
