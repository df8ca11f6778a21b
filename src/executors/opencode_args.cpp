#include "executors/opencode_args.hpp"

#include <array>

#include "util/strings.hpp"

namespace mullet::executors::opencode {
namespace {

// The tools the worker gets besides bash; `write` comes with `edit`.
constexpr std::array<const char*, 6> allowed_tools = {"read", "edit", "glob", "grep", "list", "todowrite"};

// Keys `opencode debug config` adds to any configuration, as it printed them
// with nothing configured for them.
constexpr std::array<const char*, 3> empty_defaults = {"agent", "mode", "command"};

std::string shortened(const nlohmann::json& value) {
  const std::string text = value.dump();
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

// As opencode reports ours: every provider's apiKey masked.
nlohmann::json as_reported(const nlohmann::ordered_json& ours) {
  auto expected = nlohmann::json::parse(ours.dump());
  if (auto providers = expected.find("provider"); providers != expected.end() && providers->is_object()) {
    for (auto& provider : *providers) {
      if (provider.contains("options") && provider["options"].contains("apiKey")) provider["options"]["apiKey"] = "***";
    }
  }
  return expected;
}

}  // namespace

Result<ModelName> parse_model(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) {
    return fail(usage_error("[opencode] model '" + std::string(text) + "' is not provider/model",
                            "name it as opencode does, e.g. anthropic/claude-sonnet-4-5"));
  }
  return ModelName{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

ProviderDialect dialect_of(const ModelName& model) {
  return model.provider == "anthropic" ? ProviderDialect::anthropic_messages : ProviderDialect::chat_completions;
}

nlohmann::ordered_json build_permission(const std::vector<std::string>& allow_bash) {
  nlohmann::ordered_json permission = nlohmann::ordered_json::object();
  permission["*"] = "deny";
  for (const char* tool : allowed_tools) permission[tool] = "allow";
  nlohmann::ordered_json bash = nlohmann::ordered_json::object();
  bash["*"] = "deny";
  for (const auto& pattern : allow_bash) bash[pattern] = "allow";
  permission["bash"] = bash;
  permission["external_directory"] = "deny";
  permission["webfetch"] = "deny";
  permission["websearch"] = "deny";
  return permission;
}

nlohmann::ordered_json build_config(const ConfigInputs& in) {
  nlohmann::ordered_json provider = nlohmann::ordered_json::object();
  if (dialect_of(in.model) == ProviderDialect::chat_completions) {
    provider["npm"] = "@ai-sdk/openai-compatible";
  }
  provider["options"] = {{"baseURL", in.base_url + "/v1"}, {"apiKey", in.api_key}};
  if (dialect_of(in.model) == ProviderDialect::chat_completions) {
    // A custom provider's models are only those named here.
    provider["models"] = {{in.model.model, {{"tool_call", true}}}};
  }
  const std::string model = in.model.provider + "/" + in.model.model;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  config["autoupdate"] = false;
  config["share"] = "disabled";
  config["plugin"] = nlohmann::ordered_json::array();
  config["mcp"] = nlohmann::ordered_json::object();
  config["lsp"] = false;
  // A formatter is a program opencode runs on every file the worker edits.
  config["formatter"] = false;
  config["provider"] = {{in.model.provider, provider}};
  config["model"] = model;
  // Session titles: the same model, so that nothing else is ever asked for.
  config["small_model"] = model;
  config["enabled_providers"] = nlohmann::ordered_json::array({in.model.provider});
  config["permission"] = build_permission(in.allow_bash);
  return config;
}

std::map<std::string, std::string> quiet_environment(const std::string& home) {
  return {
      {"HOME", home},
      {"XDG_CONFIG_HOME", home + "/.config"},
      {"XDG_DATA_HOME", home + "/.local/share"},
      {"XDG_CACHE_HOME", home + "/.cache"},
      {"XDG_STATE_HOME", home + "/.local/state"},
      {"OPENCODE_DISABLE_PROJECT_CONFIG", "1"},
      {"OPENCODE_DISABLE_CLAUDE_CODE", "1"},
      {"OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"},
      {"OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"},
      {"OPENCODE_DISABLE_MODELS_FETCH", "1"},
      {"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"},
      {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
      {"OPENCODE_DISABLE_SHARE", "1"},
      // None of the OPENCODE_DISABLE_* variables stops its in-process npm
      // install of @opencode-ai/plugin into the config directory; this does.
      {"npm_config_offline", "true"},
  };
}

std::map<std::string, std::string> worker_environment(const nlohmann::ordered_json& config, const std::string& home) {
  auto env = quiet_environment(home);
  env[config_variable] = config.dump();
  // It replaces the configuration's whole permission object: set to ours, so
  // that nothing else can be.
  env["OPENCODE_PERMISSION"] = config.at("permission").dump();
  return env;
}

bool is_configuration_variable(std::string_view name) {
  const std::string lower = util::to_lower(name);
  for (const char* prefix : {"opencode", "npm_config_", "xdg_", "anthropic_", "openai_", "node_"}) {
    if (lower.starts_with(prefix)) return true;
  }
  return lower.ends_with("_api_key");
}

Result<std::vector<std::string>> build_argv(const std::set<std::string>& run_flags, const std::string& model) {
  for (const char* flag : {"--format", "--model"}) {
    if (run_flags.count(flag) == 0) {
      return fail(refused_error("this opencode's `run` has no " + std::string(flag) + " flag, which git-mullet needs",
                                "install a supported version (scripts/opencode-version names the tested one)"));
    }
  }
  return std::vector<std::string>{binary_inside, "run", "--format", "json", "--model", model};
}

std::vector<std::string> debug_config_argv() {
  return {binary_inside, "debug", "config"};
}

std::string check_effective_config(std::string_view printed, const nlohmann::ordered_json& ours) {
  auto reported = nlohmann::json::parse(printed, nullptr, false);
  if (!reported.is_object()) return "`opencode debug config` did not print a JSON object";
  reported.erase("username");
  for (const char* key : empty_defaults) {
    if (auto found = reported.find(key); found != reported.end() && found->is_object() && found->empty()) {
      reported.erase(found);
    }
  }
  const nlohmann::json expected = as_reported(ours);
  std::vector<std::string> differences;
  for (const auto& [key, value] : expected.items()) {
    if (!reported.contains(key)) {
      differences.push_back(key + " missing");
    } else if (reported[key] != value) {
      differences.push_back(key + " is " + shortened(reported[key]) + ", not " + shortened(value));
    }
  }
  for (const auto& [key, value] : reported.items()) {
    if (!expected.contains(key)) differences.push_back(key + " added: " + shortened(value));
  }
  if (differences.empty()) {
    // The last matching permission rule wins: the order is part of it.
    const auto ordered = nlohmann::ordered_json::parse(printed, nullptr, false);
    if (ordered.is_object() && ordered.contains("permission") &&
        ordered["permission"].dump() != ours.at("permission").dump()) {
      differences.push_back("permission rules in another order: " + shortened(ordered["permission"]));
    }
  }
  return util::join(differences, "; ");
}

std::string build_prompt(const PromptInputs& in) {
  std::string text;
  text += "You are working unattended inside a sandbox, in a private clone of a git repository at " + in.work_tree +
          ". The rules of this sandbox, so you do not waste attempts:\n";
  text += "- Edit files only under " + in.work_tree + "; nothing else is writable and your home is off limits.\n";
  if (in.allow_bash.empty()) {
    text += "- You have no shell: there is no bash tool. Use read, edit, write, glob, grep and list.\n";
  } else {
    text +=
        "- The bash tool may run only commands matching these patterns (opencode permission patterns), and "
        "nothing else:";
    for (const auto& pattern : in.allow_bash) text += " `" + pattern + "`";
    text += "\n";
  }
  text += "- There is no network access, and no web or sub-agent tools.\n";
  text +=
      "- Do not commit, branch or otherwise use git to record changes: git-mullet commits what you leave in the "
      "work tree. The git directory is read-only.\n";
  text += std::string("- Finish with a last message whose final line is the result, one line of JSON after ") +
          result_marker + ", exactly like this:\n  " + result_marker +
          " {\"status\": \"done\", \"summary\": \"what you changed\"}\n"
          "  Status \"done\" when the task is complete, \"blocked\" when it cannot be completed here; the summary "
          "says what you changed or what blocks you. Without that line the job fails.\n";
  text += "\nThe task:\n\n" + in.task;
  if (text.back() != '\n') text += '\n';
  return text;
}

}  // namespace mullet::executors::opencode
