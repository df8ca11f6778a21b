// Configuration: the user's file, the repository's .mullet.toml (read from the
// pinned base commit, never from a work tree), then flags.
//
// The schema is one table (config.cpp). Each key says what the repository
// file may do with it: nothing (user-only), only narrow a list, only lower a
// limit, or set it freely. The repository can never widen a wall. One limit
// the user may let it raise: run.attempts, up to [run] max_attempts (a higher
// ask is capped there, with a warning in warnings()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/settings.hpp"
#include "util/error.hpp"

namespace mullet::config {

enum class Source { built_in, user_file, repo_file, flag };

using Value = std::variant<std::string, std::vector<std::string>, std::int64_t, bool, double>;

struct Entry {
  Value value;
  Source source = Source::built_in;
  std::string origin;  // "built-in", "FILE:LINE" or "--flag"
};

// A configuration file larger than this is refused unread (user file) or
// unparsed (the repository's blob).
inline constexpr std::size_t max_file_bytes = 1 << 20;
// Gates from files, and again gates from flags.
inline constexpr std::size_t max_gates = 256;

// Checks a gate however it was given (a [[gate]] table, --gate, a resumed
// job's record): a message, or empty when it is valid.
std::string check_gate(const Gate& gate);
// The name of a gate given only a command ([[gate]] without name, --gate):
// the command's whole first line, up to what a record keeps of a name; where
// a gate is shown for people, it is cut to fit there.
std::string default_gate_name(const std::string& command);

// A worker's model name ([claude] model, [opencode] model, run --model): it
// lands on a command line and in a configuration file, so at most
// max_model_bytes of printable ASCII without spaces, not starting with '-'.
// A message, or empty when it may be used (the empty name too).
inline constexpr std::size_t max_model_bytes = 256;
std::string check_model_name(std::string_view name);

// Whether only the user's own configuration (or a flag) may set `key`: the
// schema's user-only keys, which a repository's file may not set and a
// fetched record's flags may not replay. False for an unknown key.
bool is_user_only(std::string_view key);
// Whether a repository's file may only lower the key (a limit, run.attempts).
bool is_lower_only(std::string_view key);
std::vector<std::string> user_only_keys();

// Claude Code's credential variables: never let into a sandbox ([sandbox]
// env refuses them); the credential endpoint uses them from our environment.
bool is_api_credential_name(std::string_view name);
// Credentials in a user file.
inline constexpr std::size_t max_credentials = 64;

struct Problem {
  ExitCode severity;  // usage for malformed input, refused for a wall widened
  std::string message;
};

class Config {
 public:
  // Built-in defaults for every key.
  Config();

  // The merged values as types, each checked again against its field's type.
  Settings settings() const;

  // Each key's value and where it came from (`git mullet config`, the flags
  // a job records).
  const Entry& entry(const std::string& key) const;
  const std::map<std::string, Entry>& entries() const { return m_entries; }
  const std::vector<Gate>& gates() const { return m_gates; }
  const std::vector<Credential>& credentials() const { return m_credentials; }
  // What merging changed rather than refused (a repository's attempts capped
  // by [run] max_attempts), one message each, for the caller to show.
  const std::vector<std::string>& warnings() const { return m_warnings; }

  // Merges one TOML document. `file_label` names it in messages. Returns every
  // problem found (too large or too deeply nested, unknown keys, wrong types,
  // values out of their key's range, walls widened).
  std::vector<Problem> merge_toml(const std::string& text, const std::string& file_label, Source source);
  // A flag given on the command line (or replayed from a job's record); the
  // same checks as a file's value. Throws a usage error for a bad value.
  void set_from_flag(const std::string& key, Value value, const std::string& flag);

  // The effective configuration as TOML, each key with where it came from
  // as a comment; [[gate]] and [[credential]] tables too (a credential's
  // variable name or command, never a secret: the file holds none).
  std::string describe() const;

 private:
  std::map<std::string, Entry> m_entries;
  std::vector<Gate> m_gates;
  std::vector<Credential> m_credentials;
  std::vector<std::string> m_warnings;
};

// Throws one Error listing every problem (exit code: refused if any problem
// widens a wall, else usage).
void throw_if_problems(const std::vector<Problem>& problems);

// Where the user's config file is: $GIT_MULLET_CONFIG, else
// $XDG_CONFIG_HOME/git-mullet/config.toml, else ~/.config/git-mullet/config.toml.
// `explicit_path` says whether the user named it (then it must exist).
struct UserConfigLocation {
  std::string path;
  bool explicit_path = false;
};
UserConfigLocation user_config_location();

}  // namespace mullet::config
