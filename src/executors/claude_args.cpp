#include "executors/claude_args.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>

#include "net/grant.hpp"
#include "util/strings.hpp"

namespace mullet::executors::claude {

std::vector<std::string> worker_tools(const std::vector<std::string>& allow_bash) {
  std::vector<std::string> tools = {"Read", "Edit", "Write", "Glob", "Grep"};
  if (!allow_bash.empty()) tools.emplace_back("Bash");
  return tools;
}

const std::vector<std::string>& auto_allowed_commands() {
  // Claude Code 2.1.197, each of these run in at least one form with no
  // Bash rule (a sweep of every program on PATH and shell builtin, with no
  // argument, a file, --version, and the forms its read-only tables name).
  // `if`, `while` and `until` alone only reach bash as a syntax error, and
  // are here so that nothing at all runs.
  static const std::vector<std::string> commands = {
      "[",         "[[",      "arch",     "base64",   "basename", "cal",     "cat",      "cd",       "claude",
      "cmp",       "column",  "comm",     "cut",      "date",     "df",      "diff",     "dirname",  "docker",
      "du",        "echo",    "egrep",    "expand",   "expr",     "false",   "fd",       "fdfind",   "fgrep",
      "file",      "find",    "fmt",      "fold",     "free",     "git",     "grep",     "groups",   "head",
      "help",      "hexdump", "history",  "hostname", "id",       "if",      "ifconfig", "ip",       "jq",
      "locale",    "ls",      "lsof",     "man",      "md5sum",   "netstat", "nl",       "node",     "nproc",
      "numfmt",    "od",      "paste",    "pgrep",    "pr",       "printf",  "ps",       "pwd",      "pyright",
      "python",    "python3", "readlink", "realpath", "rev",      "rg",      "sed",      "seq",      "sha1sum",
      "sha256sum", "sleep",   "sort",     "ss",       "stat",     "strings", "tac",      "tail",     "test",
      "tput",      "tr",      "tree",     "true",     "tsort",    "type",    "uname",    "unexpand", "uniq",
      "until",     "uptime",  "wc",       "which",    "while",    "whoami",  "xargs",
  };
  return commands;
}

std::vector<std::string> commands_to_deny(const std::vector<std::string>& allow_bash) {
  // A pattern's first word is what Claude Code matches a command's first
  // word against: "npm test:*" names npm, "make:*" make, "*" every command.
  std::vector<std::string> first_words;
  for (const auto& pattern : allow_bash) {
    const auto trimmed = util::trim(pattern);
    first_words.push_back(trimmed.substr(0, trimmed.find_first_of(" \t:")));
  }
  std::vector<std::string> denied;
  for (const auto& command : auto_allowed_commands()) {
    const bool named = std::any_of(first_words.begin(), first_words.end(), [&](const std::string& word) {
      return word == command || ::fnmatch(word.c_str(), command.c_str(), 0) == 0;
    });
    if (!named) denied.push_back(command);
  }
  return denied;
}

std::vector<std::string> commands_kept(const std::vector<std::string>& allow_bash) {
  const auto denied = commands_to_deny(allow_bash);
  std::vector<std::string> kept;
  for (const auto& command : auto_allowed_commands()) {
    if (std::find(denied.begin(), denied.end(), command) == denied.end()) kept.push_back(command);
  }
  return kept;
}

Result<std::vector<std::string>> build_argv(const std::set<std::string>& available, const ArgvOptions& options) {
  // Each of these closes a door; without one the worker would run with
  // Claude Code's defaults, so a binary that lacks one is refused.
  const std::vector<std::vector<std::string>> required = {
      {"--print"},
      {"--strict-mcp-config"},
      {"--disable-slash-commands"},
      {"--tools", util::join(options.tools, ",")},
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
  if (!options.model.empty()) {
    if (available.count("--model") == 0) {
      return fail(
          refused_error("the installed Claude Code has no --model option, so [claude] model (or --model) "
                        "cannot choose its model; nothing was run",
                        "install a Claude Code version that has it, or leave the model to Claude Code"));
    }
    // A flag's value follows it as its own argument; the name was checked
    // (config::check_model_name: no leading '-', printable) when it was set.
    argv.insert(argv.end(), {"--model", options.model});
  }
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
  // Without Bash in --tools these would never be asked; with it, they turn
  // off what Claude Code runs unasked (a deny rule beats its read-only
  // allowance in every form probed: pipes, `;`, `&&`, quoting, variables).
  if (!in.allow_bash.empty()) {
    for (const auto& command : commands_to_deny(in.allow_bash)) deny.push_back("Bash(" + command + ":*)");
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
    text += "- You have no shell: there is no Bash tool. Use Read, Edit, Write, Glob and Grep.\n";
  } else {
    text += "- Bash may run only these commands (Claude Code permission patterns), and nothing else:";
    for (const auto& pattern : in.allow_bash) text += " `" + pattern + "`";
    text +=
        "\n- Run one command per Bash call: compound commands (&&, ||, ;, |) and redirections to other programs "
        "are refused.\n";
    if (const auto kept = commands_kept(in.allow_bash); !kept.empty()) {
      text += "- Claude Code's own read-only forms of these commands also run: " + util::join(kept, ", ") + ".\n";
    }
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
