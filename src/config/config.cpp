#include "config/config.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "util/strings.hpp"

namespace mullet::config {
namespace {

enum class Kind { string, list, integer, boolean, number };
// What the repository's .mullet.toml may do with a key.
enum class RepoRule { user_only, narrow_list, lower_only, free };

struct KeySpec {
  const char* key;
  Kind kind;
  RepoRule repo_rule;
  Value default_value;
  const char* help;
};

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      {"run.executor", Kind::string, RepoRule::user_only, std::string("claude"), "worker: claude or command"},
      {"run.command", Kind::string, RepoRule::user_only, std::string(), "shell command for the command executor"},
      {"run.setup", Kind::string, RepoRule::free, std::string(),
       "shell command run once in the clone before the worker, with the setup grants"},
      {"run.dependency_dirs", Kind::list, RepoRule::free,
       std::vector<std::string>{"node_modules", "vendor", ".venv", "target", "build"},
       "top-level directories that setup fills: read-only afterwards, never in the result"},
      {"sandbox.env", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       "extra environment variable names let into sandboxes"},
      // 0x70000000: far above users, system services and the container ranges
      // (systemd leaves 0x70000000..0x7ffdffff unassigned).
      {"sandbox.uid", Kind::integer, RepoRule::user_only, std::int64_t{1879048192},
       "first host uid of the range sandboxes run as when git-mullet runs as root (one uid per running job)"},
      {"sandbox.uid_count", Kind::integer, RepoRule::user_only, std::int64_t{1024},
       "how many host uids that range has: as many jobs may run at once as root"},
      {"network.setup", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       "host:port destinations the setup phase may reach"},
      {"network.worker", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       "host:port destinations the worker may reach"},
      {"claude.binary", Kind::string, RepoRule::user_only, std::string("claude"), "the Claude Code binary"},
      {"claude.base_url", Kind::string, RepoRule::user_only, std::string("https://api.anthropic.com"),
       "the worker's API endpoint"},
      {"claude.allow_bash", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       "Bash command patterns the worker may run"},
      {"run.attempts", Kind::integer, RepoRule::lower_only, std::int64_t{1},
       "worker runs per job: a failed gate sends the worker back while attempts remain"},
      {"run.max_parallel", Kind::integer, RepoRule::user_only, std::int64_t{0},
       "jobs that may run at once in one repository (0: no cap); more wait for a slot"},
      {"limits.timeout", Kind::integer, RepoRule::lower_only, std::int64_t{3600}, "wall-clock seconds per phase"},
      {"limits.job_timeout", Kind::integer, RepoRule::lower_only, std::int64_t{14400},
       "wall-clock seconds for the whole job, every attempt and gate included"},
      {"limits.gate_timeout", Kind::integer, RepoRule::lower_only, std::int64_t{1800},
       "wall-clock seconds per gate, unless the gate sets its own (lower) timeout"},
      {"limits.turns", Kind::integer, RepoRule::lower_only, std::int64_t{200},
       "the worker's turns per attempt (Claude Code)"},
      {"limits.cost_usd", Kind::number, RepoRule::lower_only, 20.0,
       "the worker's API cost per attempt in USD (Claude Code)"},
      {"limits.inactivity", Kind::integer, RepoRule::lower_only, std::int64_t{1800},
       "seconds without output before a phase is stopped"},
      {"limits.memory_mb", Kind::integer, RepoRule::lower_only, std::int64_t{8192}, "memory cap per sandbox (MiB)"},
      {"limits.processes", Kind::integer, RepoRule::lower_only, std::int64_t{1024}, "process cap per sandbox"},
      {"limits.disk_mb", Kind::integer, RepoRule::lower_only, std::int64_t{10240},
       "disk the worker may fill in its clone and home (MiB)"},
      {"limits.file_mb", Kind::integer, RepoRule::lower_only, std::int64_t{100},
       "largest file the result may record (MiB); larger ones are left out"},
  };
  return keys;
}

const KeySpec* find_key(const std::string& key) {
  for (const auto& spec : schema()) {
    if (key == spec.key) return &spec;
  }
  return nullptr;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::string: return "a string";
    case Kind::list: return "an array of strings";
    case Kind::integer: return "an integer";
    case Kind::boolean: return "true or false";
    case Kind::number: return "a number";
  }
  return "?";
}

std::string location(const std::string& file_label, const toml::node& node) {
  return file_label + ":" + std::to_string(node.source().begin.line);
}

// Converts a TOML node to the key's kind; nullopt when the type is wrong.
std::optional<Value> convert(const toml::node& node, Kind kind) {
  switch (kind) {
    case Kind::string:
      if (auto text = node.value<std::string>(); text && node.is_string()) return Value(*text);
      return std::nullopt;
    case Kind::integer:
      if (node.is_integer()) return Value(*node.value<std::int64_t>());
      return std::nullopt;
    case Kind::boolean:
      if (node.is_boolean()) return Value(*node.value<bool>());
      return std::nullopt;
    case Kind::number:
      if (node.is_integer() || node.is_floating_point()) return Value(*node.value<double>());
      return std::nullopt;
    case Kind::list: {
      const auto* array = node.as_array();
      if (array == nullptr) return std::nullopt;
      std::vector<std::string> items;
      for (const auto& item : *array) {
        if (!item.is_string()) return std::nullopt;
        items.push_back(*item.value<std::string>());
      }
      return Value(items);
    }
  }
  return std::nullopt;
}

bool valid_destination(const std::string& item) {
  if (item == "*") return true;
  const auto colon = item.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string port = item.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
  const long number = std::strtol(port.c_str(), nullptr, 10);
  return number >= 1 && number <= 65535;
}

// Whether a host:port grant names an address rather than a host name (IPv6 in
// brackets, or anything starting with a digit: 127.1, 0x7f.1 and the like).
bool names_an_address(const std::string& grant) {
  const auto colon = grant.rfind(':');
  const std::string host = colon == std::string::npos ? grant : grant.substr(0, colon);
  return !host.empty() && (host[0] == '[' || (host[0] >= '0' && host[0] <= '9'));
}

double numeric(const Value& value) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) return static_cast<double>(*number);
  if (const auto* number = std::get_if<double>(&value)) return *number;
  return 0;
}

// Checks a value's content; returns an error message or empty.
std::string validate(const std::string& key, const Value& value) {
  if (key == "run.executor") {
    const auto& name = std::get<std::string>(value);
    if (name != "claude" && name != "command") return "unknown executor '" + name + "' (known: claude, command)";
  }
  if (key == "sandbox.env") {
    for (const auto& name : std::get<std::vector<std::string>>(value)) {
      if (!util::is_env_name(name)) return "'" + name + "' is not a valid environment variable name";
    }
  }
  if (key == "network.setup" || key == "network.worker") {
    for (const auto& item : std::get<std::vector<std::string>>(value)) {
      if (!valid_destination(item)) return "'" + item + "' is not host:port (or \"*\")";
    }
  }
  if (key.rfind("limits.", 0) == 0 || key == "sandbox.uid" || key == "sandbox.uid_count" || key == "run.attempts") {
    if (numeric(value) <= 0) return "must be a positive number";
  }
  if (key == "run.max_parallel" && numeric(value) < 0) return "must be 0 (no cap) or more";
  return {};
}

std::string format_value(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    std::ostringstream out;
    out << toml::value<std::string>(*text);
    return out.str();
  }
  if (const auto* items = std::get_if<std::vector<std::string>>(&value)) {
    std::ostringstream out;
    toml::array array;
    for (const auto& item : *items) array.push_back(item);
    out << array;
    return out.str();
  }
  if (const auto* number = std::get_if<std::int64_t>(&value)) return std::to_string(*number);
  if (const auto* number = std::get_if<double>(&value)) return util::format_decimal(*number);
  return std::get<bool>(value) ? "true" : "false";
}

}  // namespace

std::string source_name(Source source) {
  switch (source) {
    case Source::built_in: return "built-in";
    case Source::user_file: return "user config";
    case Source::repo_file: return "repository config";
    case Source::flag: return "flag";
  }
  return "?";
}

Config::Config() {
  for (const auto& spec : schema()) m_entries[spec.key] = Entry{spec.default_value, Source::built_in, "built-in"};
}

const Entry& Config::entry(const std::string& key) const {
  const auto found = m_entries.find(key);
  if (found == m_entries.end()) throw failure("internal error: unknown configuration key " + key);
  return found->second;
}
const std::string& Config::string(const std::string& key) const {
  return std::get<std::string>(entry(key).value);
}
const std::vector<std::string>& Config::list(const std::string& key) const {
  return std::get<std::vector<std::string>>(entry(key).value);
}
std::int64_t Config::integer(const std::string& key) const {
  return std::get<std::int64_t>(entry(key).value);
}
double Config::number(const std::string& key) const {
  return std::get<double>(entry(key).value);
}
bool Config::boolean(const std::string& key) const {
  return std::get<bool>(entry(key).value);
}

std::vector<Problem> Config::merge_toml(const std::string& text, const std::string& file_label, Source source) {
  std::vector<Problem> problems;
  auto malformed = [&](const std::string& message) { problems.push_back({ExitCode::usage, message}); };
  toml::table document;
  try {
    document = toml::parse(text, file_label);
  } catch (const toml::parse_error& error) {
    malformed(file_label + ":" + std::to_string(error.source().begin.line) + ": " + std::string(error.description()));
    return problems;
  }
  const bool from_repo = source == Source::repo_file;

  for (const auto& [section_key, section_node] : document) {
    const std::string section(section_key.str());
    if (section == "gate") {
      const auto* gates = section_node.as_array();
      if (gates == nullptr) {
        malformed(location(file_label, section_node) + ": gate: must be an array of tables ([[gate]])");
        continue;
      }
      for (const auto& gate_node : *gates) {
        const auto* table = gate_node.as_table();
        if (table == nullptr) {
          malformed(location(file_label, gate_node) + ": gate: each [[gate]] must be a table");
          continue;
        }
        Gate gate;
        gate.origin = location(file_label, gate_node);
        bool ok = true;
        for (const auto& [field_key, field_node] : *table) {
          const std::string field(field_key.str());
          const std::string where = location(file_label, field_node) + ": gate." + field;
          if (field == "name" || field == "command") {
            if (!field_node.is_string()) {
              malformed(where + ": must be a string");
              ok = false;
            } else {
              (field == "name" ? gate.name : gate.command) = *field_node.value<std::string>();
            }
          } else if (field == "timeout") {
            if (!field_node.is_integer() || *field_node.value<std::int64_t>() <= 0) {
              malformed(where + ": must be a positive integer (seconds)");
              ok = false;
            } else {
              gate.timeout_seconds = *field_node.value<std::int64_t>();
            }
          } else {
            malformed(where + ": unknown key (known: name, command, timeout)");
            ok = false;
          }
        }
        if (ok && gate.command.empty()) {
          malformed(gate.origin + ": gate: needs a command");
          ok = false;
        }
        if (ok) {
          if (gate.name.empty()) gate.name = util::first_line(gate.command, 40);
          m_gates.push_back(gate);
        }
      }
      continue;
    }
    const auto* table = section_node.as_table();
    if (table == nullptr) {
      malformed(location(file_label, section_node) + ": " + section + ": unknown key");
      continue;
    }
    for (const auto& [name_key, value_node] : *table) {
      const std::string key = section + "." + std::string(name_key.str());
      const std::string where = location(file_label, value_node) + ": " + key;
      const KeySpec* spec = find_key(key);
      if (spec == nullptr) {
        malformed(where + ": unknown key");
        continue;
      }
      auto value = convert(value_node, spec->kind);
      if (!value) {
        malformed(where + ": must be " + kind_name(spec->kind));
        continue;
      }
      if (auto message = validate(key, *value); !message.empty()) {
        malformed(where + ": " + message);
        continue;
      }
      Entry& current = m_entries[key];
      if (from_repo) {
        const std::string widen = where + ": the repository's .mullet.toml ";
        if (spec->repo_rule == RepoRule::user_only) {
          problems.push_back({ExitCode::refused, widen + "may not set this; only your user config can"});
          continue;
        }
        if (spec->repo_rule == RepoRule::narrow_list) {
          const auto& allowed = std::get<std::vector<std::string>>(current.value);
          bool widened = false;
          for (const auto& item : std::get<std::vector<std::string>>(*value)) {
            // "*" means any public destination; an address (which may be the
            // host's own, a private network's, or cloud metadata) is covered
            // only when the user lists it exactly.
            const bool star_covers = !(key.rfind("network.", 0) == 0 && names_an_address(item));
            const bool listed = std::find(allowed.begin(), allowed.end(), item) != allowed.end() ||
                                (star_covers && std::find(allowed.begin(), allowed.end(), "*") != allowed.end());
            if (!listed) {
              problems.push_back(
                  {ExitCode::refused, widen + "may only narrow this list; '" + item + "' is not in your user config"});
              widened = true;
            }
          }
          if (widened) continue;
        }
        if (spec->repo_rule == RepoRule::lower_only && numeric(*value) > numeric(current.value)) {
          problems.push_back(
              {ExitCode::refused, widen + "may only lower this limit (yours is " + format_value(current.value) + ")"});
          continue;
        }
      }
      current = Entry{*value, source, location(file_label, value_node)};
    }
  }
  return problems;
}

void Config::set_from_flag(const std::string& key, Value value, const std::string& flag) {
  if (auto message = validate(key, value); !message.empty()) throw usage_error(flag + ": " + message);
  m_entries[key] = Entry{std::move(value), Source::flag, flag};
}

std::string Config::describe() const {
  std::ostringstream out;
  std::string section;
  for (const auto& spec : schema()) {
    const std::string key = spec.key;
    const std::string this_section = key.substr(0, key.find('.'));
    if (this_section != section) {
      if (!section.empty()) out << "\n";
      out << "[" << this_section << "]\n";
      section = this_section;
    }
    const Entry& current = entry(key);
    out << key.substr(key.find('.') + 1) << " = " << format_value(current.value) << "  # " << current.origin << "\n";
  }
  for (const auto& gate : m_gates) {
    out << "\n[[gate]]  # " << gate.origin << "\n";
    out << "name = " << format_value(gate.name) << "\n";
    out << "command = " << format_value(gate.command) << "\n";
    if (gate.timeout_seconds > 0) out << "timeout = " << gate.timeout_seconds << "\n";
  }
  return out.str();
}

void throw_if_problems(const std::vector<Problem>& problems) {
  if (problems.empty()) return;
  ExitCode code = ExitCode::usage;
  std::vector<std::string> lines;
  for (const auto& problem : problems) {
    if (problem.severity == ExitCode::refused) code = ExitCode::refused;
    lines.push_back(problem.message);
  }
  const std::string hint = code == ExitCode::refused
                               ? "the repository file may only narrow what your user config allows"
                               : "fix the configuration file named above";
  throw Error(code, "invalid configuration:\n  " + util::join(lines, "\n  "), hint);
}

UserConfigLocation user_config_location() {
  if (const char* path = std::getenv("GIT_MULLET_CONFIG"); path != nullptr && *path != '\0') return {path, true};
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg == '/') {
    return {std::string(xdg) + "/git-mullet/config.toml", false};
  }
  const char* home = std::getenv("HOME");
  return {std::string(home != nullptr ? home : "") + "/.config/git-mullet/config.toml", false};
}

}  // namespace mullet::config
