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

// The tools the worker gets; StructuredOutput is how it returns its result.
const std::vector<std::string>& worker_tools();

// Every long option (--name) a `--help` text mentions.
std::set<std::string> flags_from_help(std::string_view help);

struct ArgvOptions {
  std::string settings_path;  // inside the sandbox
  std::string result_schema;  // JSON text
  double max_budget_usd = 0;  // 0: no cap
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
