// Pure builders for the opencode worker: its command line, the configuration
// it gets through OPENCODE_CONFIG_CONTENT (and the same permission through
// OPENCODE_PERMISSION, which would replace it), the environment that keeps
// it from reading any other configuration or reaching anything but its
// provider, the prompt, and the check of the configuration it reports.
//
// Facts about the pinned opencode that these rely on: docs/opencode-probe.md.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace mullet::executors::opencode {

// Fixed paths inside the sandbox.
inline constexpr const char* binary_inside = "/mullet/bin/opencode";

// Where our configuration goes: the inline JSON opencode merges last.
inline constexpr const char* config_variable = "OPENCODE_CONFIG_CONTENT";

// "provider/model" split at the first slash (a model id may hold more).
struct ModelName {
  std::string provider;
  std::string model;
};
Result<ModelName> parse_model(std::string_view text);

// opencode's own Anthropic provider speaks the Messages API; every other
// provider is configured as OpenAI-compatible chat completions, the other
// dialect the credential endpoint forwards.
enum class ProviderDialect { anthropic_messages, chat_completions };
ProviderDialect dialect_of(const ModelName& model);

// The permission object, fail-closed: opencode's built-in default allows every
// tool not named and the last matching rule wins, so "*": "deny" comes first
// and the tools the worker gets are allowed after it by name; bash is denied
// but for the allow_bash patterns; external_directory, webfetch, websearch
// are denied. Key order is meaning here: hence ordered_json.
nlohmann::ordered_json build_permission(const std::vector<std::string>& allow_bash);

struct ConfigInputs {
  ModelName model;
  std::string base_url;  // the credential endpoint, "http://127.0.0.1:<port>"
  std::string api_key;   // the sentinel
  std::vector<std::string> allow_bash;
};

// The whole configuration: the provider through the credential endpoint and
// nothing else enabled, no plugin, no MCP server, no LSP, no formatter, no
// sharing, no autoupdate, and build_permission().
nlohmann::ordered_json build_config(const ConfigInputs& inputs);

// What every run of opencode gets, with `home` its home: its config, data,
// cache and state directories under it, project configuration (a clone's
// opencode.json[c], .opencode/, AGENTS.md) off, the models list, LSP
// downloads, sharing, autoupdate and default plugins off, and npm offline (it
// installs a plugin into its config directory in-process otherwise).
std::map<std::string, std::string> quiet_environment(const std::string& home);

// quiet_environment() plus our configuration and its permission.
std::map<std::string, std::string> worker_environment(const nlohmann::ordered_json& config, const std::string& home);

// Every variable opencode reads its configuration or a provider key from:
// worker_environment() sets the first ones itself, and [sandbox] env must
// never let any of them in.
bool is_configuration_variable(std::string_view name);

// The worker's argv: `opencode run --format json --model MODEL`; the prompt
// goes on its stdin (read as the message when no message argument is given),
// so no size limit of an argument applies and it is not on a command line. A
// flag we rely on that `run_flags` (from `opencode run --help`) lacks is a
// refusal naming it.
Result<std::vector<std::string>> build_argv(const std::set<std::string>& run_flags, const std::string& model);

// The argv that prints the effective configuration (`opencode debug config`).
std::vector<std::string> debug_config_argv();

// Empty when `printed` (what `opencode debug config` printed) is `ours`
// as opencode reports it (its empty defaults added, API keys masked, its
// user name); else what differs, for the refusal.
std::string check_effective_config(std::string_view printed, const nlohmann::ordered_json& ours);

struct PromptInputs {
  std::string task;
  std::vector<std::string> allow_bash;
  std::string work_tree;  // inside path
};

// The same rules as Claude Code's prompt, and how to finish: opencode has no
// structured result, so the last message must end with a result line (see
// opencode_stream.hpp, parse_final_result).
std::string build_prompt(const PromptInputs& inputs);

// The result line's marker: `MULLET-RESULT {"status": ..., "summary": ...}`.
inline constexpr const char* result_marker = "MULLET-RESULT";

}  // namespace mullet::executors::opencode
