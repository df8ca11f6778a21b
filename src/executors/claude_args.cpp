#include "executors/claude_args.hpp"

#include <algorithm>
#include <cctype>

#include "net/grant.hpp"
#include "util/strings.hpp"

namespace mullet::executors::claude {

const std::vector<std::string>& worker_tools() {
  static const std::vector<std::string> tools = {"Read", "Edit", "Write", "Glob", "Grep", "Bash"};
  return tools;
}

std::set<std::string> flags_from_help(std::string_view help) {
  std::set<std::string> flags;
  for (std::size_t at = help.find("--"); at != std::string_view::npos; at = help.find("--", at + 2)) {
    if (at > 0 && !std::isspace(static_cast<unsigned char>(help[at - 1])) && help[at - 1] != ',') continue;
    std::size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-')) ++end;
    if (end > at + 2 && std::isalpha(static_cast<unsigned char>(help[at + 2]))) {
      flags.insert(std::string(help.substr(at, end - at)));
    }
  }
  return flags;
}

Result<std::vector<std::string>> build_argv(const std::set<std::string>& available, const ArgvOptions& options) {
  // Each of these closes a door; without one the worker would run with
  // Claude Code's defaults, so a binary that lacks one is refused.
  const std::vector<std::vector<std::string>> required = {
      {"--print"},
      {"--strict-mcp-config"},
      {"--disable-slash-commands"},
      {"--tools", util::join(worker_tools(), ",")},
      {"--permission-mode", "dontAsk"},
      {"--output-format", "stream-json"},
      {"--verbose"},
      {"--json-schema", options.result_schema},
      {"--settings", options.settings_path},
      {"--setting-sources", ""},
      {"--no-session-persistence"},
  };
  std::vector<std::string> argv = {binary_inside};
  for (const auto& flag : required) {
    if (available.count(flag.front()) == 0) {
      return fail(refused_error(
          "the installed Claude Code has no " + flag.front() + " option, which git-mullet relies on; nothing was run",
          "install a Claude Code version that has it (npm install -g @anthropic-ai/claude-code), or set "
          "[claude] binary to one"));
    }
    argv.insert(argv.end(), flag.begin(), flag.end());
  }
  // The design asks for --restricted; no released version has it yet.
  if (available.count("--restricted") != 0) argv.emplace_back("--restricted");
  if (options.max_budget_usd > 0 && available.count("--max-budget-usd") != 0) {
    argv.emplace_back("--max-budget-usd");
    argv.push_back(util::format_decimal(options.max_budget_usd));
  }
  return argv;
}

nlohmann::json build_settings(const SettingsInputs& in) {
  nlohmann::json allow = nlohmann::json::array();
  for (const char* tool : {"Read", "Edit", "Write", "Glob", "Grep"}) allow.push_back(tool);
  for (const auto& pattern : in.allow_bash) allow.push_back("Bash(" + pattern + ")");

  // Permission rules take "//" for an absolute path.
  nlohmann::json deny = nlohmann::json::array();
  nlohmann::json deny_write = nlohmann::json::array();
  deny.push_back("Read(/" + in.home + "/**)");
  deny.push_back("Edit(/" + in.home + "/**)");
  for (const auto& dir : in.dependency_dirs) {
    const std::string path = in.work_tree + "/" + dir;
    deny.push_back("Edit(/" + path + "/**)");
    deny.push_back("Write(/" + path + "/**)");
    deny_write.push_back(path);
  }

  nlohmann::json settings;
  settings["permissions"] = {
      {"defaultMode", "dontAsk"},
      {"disableBypassPermissionsMode", "disable"},
      {"allow", allow},
      {"deny", deny},
      {"ask", nlohmann::json::array()},
      {"additionalDirectories", nlohmann::json::array()},
  };
  settings["sandbox"] = {
      {"enabled", true},
      {"failIfUnavailable", true},
      {"allowUnsandboxedCommands", false},
      {"autoAllowBashIfSandboxed", false},
      {"excludedCommands", nlohmann::json::array()},
      {"network",
       {{"allowedDomains", nlohmann::json::array()}, {"allowLocalBinding", false}, {"allowAllUnixSockets", false}}},
      {"filesystem", {{"denyRead", nlohmann::json::array({in.home})}, {"denyWrite", deny_write}}},
  };
  settings["disableAllHooks"] = true;
  settings["enableAllProjectMcpServers"] = false;
  // Also the canary: with it, the init event lists no memory paths. Claude
  // Code in -p mode ignores a settings file that fails validation, so the
  // executor checks that init shows this took effect.
  settings["autoMemoryEnabled"] = false;
  return settings;
}

nlohmann::json result_schema() {
  return {
      {"type", "object"},
      {"properties",
       {{"status",
         {{"type", "string"},
          {"enum", {"done", "blocked"}},
          {"description", "done: the task is complete; blocked: it cannot be completed here"}}},
        {"summary", {{"type", "string"}, {"description", "what was changed and why, or what blocks the task"}}}}},
      {"required", {"status", "summary"}},
      {"additionalProperties", false},
  };
}

std::string build_prompt(const PromptInputs& in) {
  std::string text;
  text += "You are working unattended inside a sandbox, in a private clone of a git repository at " + in.work_tree +
          ". The rules of this sandbox, so you do not waste attempts:\n";
  text += "- Edit files only under " + in.work_tree + "; nothing else is writable and your home is off limits.\n";
  if (in.allow_bash.empty()) {
    text +=
        "- You may not run shell commands: every Bash call will be refused. Use Read, Edit, Write, Glob and Grep.\n";
  } else {
    text += "- Bash may run only these commands (Claude Code permission patterns), and nothing else:";
    for (const auto& pattern : in.allow_bash) text += " `" + pattern + "`";
    text +=
        "\n- Run one command per Bash call: compound commands (&&, ||, ;, |) and redirections to other programs "
        "are refused.\n";
  }
  text += "- There is no network access.\n";
  text +=
      "- Do not commit, branch or otherwise use git to record changes: git-mullet commits what you leave in the "
      "work tree. The git directory is read-only.\n";
  text +=
      "- Finish by returning the structured result: status \"done\" when the task is complete, \"blocked\" when "
      "it cannot be completed here, and a short summary of what you changed or what blocks you.\n";
  text += "\nThe task:\n\n" + in.task;
  if (text.back() != '\n') text += '\n';
  return text;
}

}  // namespace mullet::executors::claude
