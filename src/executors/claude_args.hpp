// Pure builders for the Claude Code worker: its command line, the settings
// file that makes its own sandbox mandatory, the result schema, the prompt,
// and the endpoint it needs on the network.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace mullet::executors::claude {

// Fixed paths inside the sandbox.
inline constexpr const char* binary_inside = "/mullet/bin/claude";
inline constexpr const char* settings_name = "claude-settings.json";
inline constexpr const char* config_dir_inside = "/mullet/home/.claude";

// The tools the worker gets (StructuredOutput, how it returns its result,
// comes on top): Bash only when allow_bash names a command, since Claude Code
// runs its own read-only commands with no Bash permission at all.
std::vector<std::string> worker_tools(const std::vector<std::string>& allow_bash);

// Every command Claude Code runs in some form with no Bash permission (its
// built-in read-only commands: `cat`, `ps`, `git log`, pipes between them...;
// each named by its first word), as probed in the pinned version; no setting
// turns that off. tests/security/test_claude_view.sh fails when the pinned
// binary runs one that is not here.
const std::vector<std::string>& auto_allowed_commands();

// Those of auto_allowed_commands() that no allow_bash pattern names (by its
// first word, which may be a glob): each gets a deny rule, and deny rules win
// over Claude Code's read-only allowance. A named one keeps it: with
// "git diff:*" allowed, Claude Code's read-only forms of git run too.
std::vector<std::string> commands_to_deny(const std::vector<std::string>& allow_bash);
// The rest: those whose read-only forms still run unasked.
std::vector<std::string> commands_kept(const std::vector<std::string>& allow_bash);

struct ArgvOptions {
  std::vector<std::string> tools;  // worker_tools()
  std::string settings_path;       // inside the sandbox
  std::string result_schema;       // JSON text
  double max_budget_usd = 0;       // 0: no cap
  std::string model;               // --model; empty: Claude Code chooses
};

// The worker's argv. A flag we rely on that `available` lacks is a refusal
// naming it; optional flags are passed only when available.
Result<std::vector<std::string>> build_argv(const std::set<std::string>& available, const ArgvOptions& options);

struct SettingsInputs {
  std::vector<std::string> allow_bash;       // [claude] allow_bash: Claude Code Bash patterns
  std::vector<std::string> dependency_dirs;  // top-level names, never written by the worker
  std::string work_tree;                     // inside path
  std::string home;                          // inside path
};

nlohmann::json build_settings(const SettingsInputs& inputs);

// {"status": "done"|"blocked", "summary": "..."}
nlohmann::json result_schema();

struct PromptInputs {
  std::string task;
  std::vector<std::string> allow_bash;
  std::string work_tree;  // inside path
};

std::string build_prompt(const PromptInputs& inputs);

}  // namespace mullet::executors::claude
