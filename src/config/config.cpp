#include "config/config.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <toml++/toml.h>

#include "net/address.hpp"
#include "net/credential_endpoint.hpp"
#include "net/grant.hpp"
#include "util/strings.hpp"

namespace mullet::config {
namespace {

enum class Kind { string, list, integer, boolean, number };
// What the repository's .mullet.toml may do with a key. narrow_choice: the
// key's value is one word of its choices (choices_of), widest first, and the
// repository may only pick the user's word or one after it.
enum class RepoRule { user_only, narrow_list, narrow_choice, lower_only, free };

// What a key's value may be, whoever sets it. Every bound is chosen so that
// no honest configuration meets it and every use downstream stays far from
// overflow (seconds * 1000 as milliseconds, MiB << 20 as bytes, in 64 bits).
struct Bounds {
  double min = 0;             // integers and numbers: the smallest allowed
  double max = 0;             // ... and the largest
  bool min_open = false;      // min itself is not allowed (a cost of 0)
  std::size_t max_bytes = 0;  // strings, and each item of a list
  std::size_t max_items = 0;  // lists
};

constexpr std::int64_t max_seconds = 30LL * 24 * 3600;  // 30 days
constexpr std::int64_t max_mebibytes = 1LL << 20;       // 1 TiB
constexpr std::size_t command_bytes = std::size_t{64} * 1024;
constexpr std::size_t name_bytes = 4096;  // paths, URLs, list items
constexpr std::size_t list_items = 256;
constexpr std::size_t max_nesting = 16;

constexpr Bounds between(std::int64_t min, std::int64_t max) {
  return {static_cast<double>(min), static_cast<double>(max), false, 0, 0};
}
constexpr Bounds above(double min, double max) {
  return {min, max, true, 0, 0};
}
constexpr Bounds text(std::size_t bytes) {
  return {0, 0, false, bytes, 0};
}
constexpr Bounds items(std::size_t count, std::size_t bytes_each) {
  return {0, 0, false, bytes_each, count};
}

// Where a key's value goes in Settings. Each conversion checks the value
// against its field's type (the schema's bounds already keep it in range).
using Apply = void (*)(Settings& settings, const Value& value);

struct KeySpec {
  const char* key;
  Kind kind;
  RepoRule repo_rule;
  Value default_value;
  Bounds bounds;
  const char* help;
  Apply apply;
};

const std::string& text_of(const Value& value) {
  return std::get<std::string>(value);
}
const std::vector<std::string>& list_of(const Value& value) {
  return std::get<std::vector<std::string>>(value);
}
template <typename Integer>
Integer integer_of(const Value& value) {
  const std::int64_t number = std::get<std::int64_t>(value);
  if (!std::in_range<Integer>(number)) throw failure(std::to_string(number) + " does not fit its field");
  return static_cast<Integer>(number);
}
std::chrono::seconds seconds_of(const Value& value) {
  return std::chrono::seconds(integer_of<std::int64_t>(value));
}
Mebibytes mebibytes_of(const Value& value) {
  const auto count = integer_of<std::uint64_t>(value);
  if (count > (std::numeric_limits<std::uint64_t>::max() >> 20U)) throw failure("too many MiB to count in bytes");
  return Mebibytes(count);
}
double number_of(const Value& value) {
  return std::get<double>(value);
}

// The words a narrow_choice key takes, widest first; null for other keys.
const std::vector<std::string>* choices_of(std::string_view key) {
  static const std::vector<std::string> history = {"all", "base", "none"};
  if (key == "sandbox.history") return &history;
  return nullptr;
}

// The user-only key that lets a repository raise a lower_only key up to its
// value (0: only lower it); null for keys without one.
const char* raise_cap_of(std::string_view key) {
  if (key == "run.attempts") return "run.max_attempts";
  return nullptr;
}

// "run.max_attempts" as a person finds it in a file: "[run] max_attempts".
std::string key_name(std::string_view key) {
  const auto dot = key.find('.');
  return "[" + std::string(key.substr(0, dot)) + "] " + std::string(key.substr(dot + 1));
}

// What a repository may raise `key` to over `yours` when the user set its
// cap (non-zero): the cap, or yours when that is higher; nullopt without a
// cap (then the key's rule alone applies).
std::optional<Value> raise_ceiling(std::string_view key, const Value& yours,
                                   const std::map<std::string, Entry>& entries) {
  const char* cap_key = raise_cap_of(key);
  if (cap_key == nullptr) return std::nullopt;
  const auto cap = std::get<std::int64_t>(entries.at(cap_key).value);
  if (cap == 0) return std::nullopt;
  return std::max(cap, std::get<std::int64_t>(yours));
}

std::size_t choice_index(const std::vector<std::string>& choices, const std::string& word) {
  return static_cast<std::size_t>(std::find(choices.begin(), choices.end(), word) - choices.begin());
}

History history_of(const Value& value) {
  const std::string& word = text_of(value);
  for (const History history : {History::all, History::base, History::none}) {
    if (history_name(history) == word) return history;
  }
  throw failure("'" + word + "' is not a history");
}

// One table of every key: its length is the number of keys, not complexity.
const std::vector<KeySpec>& schema() {  // NOLINT(readability-function-size)
  static const std::vector<KeySpec> keys = {
      {"run.executor", Kind::string, RepoRule::user_only, std::string("claude"), text(name_bytes),
       "worker: claude, opencode or command",
       [](Settings& settings, const Value& value) { settings.run.executor = text_of(value); }},
      {"run.command", Kind::string, RepoRule::user_only, std::string(), text(command_bytes),
       "shell command for the command executor",
       [](Settings& settings, const Value& value) { settings.run.command = text_of(value); }},
      {"run.setup", Kind::string, RepoRule::free, std::string(), text(command_bytes),
       "shell command run once in the clone before the worker, with the setup grants",
       [](Settings& settings, const Value& value) { settings.run.setup = text_of(value); }},
      {"run.dependency_dirs", Kind::list, RepoRule::free,
       std::vector<std::string>{"node_modules", "vendor", ".venv", "target", "build"}, items(list_items, name_bytes),
       "top-level directories that setup fills: read-only afterwards, never in the result",
       [](Settings& settings, const Value& value) { settings.run.dependency_dirs = list_of(value); }},
      {"sandbox.env", Kind::list, RepoRule::narrow_list, std::vector<std::string>{}, items(list_items, name_bytes),
       "extra environment variable names let into sandboxes",
       [](Settings& settings, const Value& value) { settings.sandbox.env = list_of(value); }},
      {"sandbox.history", Kind::string, RepoRule::narrow_choice, std::string("base"), text(name_bytes),
       "what of the repository's objects sandboxes can read: base (the base commit and its history), none (the base "
       "commit and its files only), all (every object: other branches, tags, stashes, reflogs, unreachable objects)",
       [](Settings& settings, const Value& value) { settings.sandbox.history = history_of(value); }},
      {"sandbox.work_tree", Kind::string, RepoRule::user_only, std::string("auto"), text(name_bytes),
       "how a job's work tree is made: auto (an overlay of the base's pristine checkout, shared by the jobs on that "
       "base: kernel overlayfs where the kernel allows it, else fuse-overlayfs where it can mount, else a checkout "
       "of its own), overlay (kernel overlayfs or the job is refused), fuse-overlayfs (fuse-overlayfs or the job is "
       "refused), checkout (always a checkout of its own)",
       [](Settings& settings, const Value& value) {
         const std::string word = text_of(value);
         settings.sandbox.work_tree = word == "checkout"         ? WorkTree::checkout
                                      : word == "overlay"        ? WorkTree::overlay
                                      : word == "fuse-overlayfs" ? WorkTree::fuse
                                                                 : WorkTree::automatic;
       }},
      {"sandbox.disk_cap", Kind::string, RepoRule::user_only, std::string("auto"), text(name_bytes),
       "how the kernel holds [limits] disk_mb: auto (as root with a kernel overlay work tree, setup and worker write "
       "to an ext4 image of disk_mb, so the file system itself stops them; elsewhere the polled watch), off (the "
       "polled watch only)",
       [](Settings& settings, const Value& value) {
         settings.sandbox.disk_cap = text_of(value) == "off" ? DiskCap::off : DiskCap::automatic;
       }},
      {"sandbox.cgroup", Kind::string, RepoRule::user_only, std::string("auto"), text(name_bytes),
       "where the kernel holds memory_mb and processes: auto (a cgroup per sandbox where the host offers one: v2 as "
       "root or in a delegated subtree, v1 as root), off (git-mullet's own polling only), or an absolute path: a "
       "cgroup v2 directory you may write, delegated to you, to make the sandboxes' cgroups in",
       [](Settings& settings, const Value& value) { settings.sandbox.cgroup = text_of(value); }},
      // 0x70000000: far above users, system services and the container ranges
      // (systemd leaves 0x70000000..0x7ffdffff unassigned). 0 is root and
      // 2^32-1 is (uid_t)-1, "no change" to setresuid; jobs/slots.cpp checks
      // that the whole range stays below it.
      {"sandbox.uid", Kind::integer, RepoRule::user_only, std::int64_t{1879048192}, between(1, 4294967294LL),
       "first host uid of the range sandboxes run as when git-mullet runs as root (one uid per running job)",
       [](Settings& settings, const Value& value) { settings.sandbox.uid = integer_of<uid_t>(value); }},
      {"sandbox.uid_count", Kind::integer, RepoRule::user_only, std::int64_t{1024}, between(1, 1LL << 20),
       "how many host uids that range has: as many jobs may run at once as root",
       [](Settings& settings, const Value& value) { settings.sandbox.uid_count = integer_of<std::uint32_t>(value); }},
      {"network.setup", Kind::list, RepoRule::narrow_list, std::vector<std::string>{}, items(list_items, name_bytes),
       "host:port destinations the setup phase may reach",
       [](Settings& settings, const Value& value) { settings.network.setup = list_of(value); }},
      {"network.worker", Kind::list, RepoRule::narrow_list, std::vector<std::string>{}, items(list_items, name_bytes),
       "host:port destinations the worker may reach",
       [](Settings& settings, const Value& value) { settings.network.worker = list_of(value); }},
      {"claude.binary", Kind::string, RepoRule::user_only, std::string("claude"), text(name_bytes),
       "the Claude Code binary",
       [](Settings& settings, const Value& value) { settings.claude.binary = text_of(value); }},
      {"claude.base_url", Kind::string, RepoRule::user_only, std::string("https://api.anthropic.com"), text(name_bytes),
       "the worker's API endpoint",
       [](Settings& settings, const Value& value) { settings.claude.base_url = text_of(value); }},
      {"claude.credential", Kind::string, RepoRule::user_only, std::string(), text(name_bytes),
       "the [[credential]] the worker's API requests carry (empty: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or "
       "CLAUDE_CODE_OAUTH_TOKEN from git-mullet's environment)",
       [](Settings& settings, const Value& value) { settings.claude.credential = text_of(value); }},
      {"claude.model", Kind::string, RepoRule::user_only, std::string(), text(max_model_bytes),
       "the Claude Code worker's model, as its --model takes it (empty: Claude Code chooses)",
       [](Settings& settings, const Value& value) { settings.claude.model = text_of(value); }},
      {"claude.allow_bash", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       items(list_items, name_bytes), "Bash command patterns the worker may run",
       [](Settings& settings, const Value& value) { settings.claude.allow_bash = list_of(value); }},
      {"opencode.binary", Kind::string, RepoRule::user_only, std::string("opencode"), text(name_bytes),
       "the opencode binary",
       [](Settings& settings, const Value& value) { settings.opencode.binary = text_of(value); }},
      {"opencode.model", Kind::string, RepoRule::user_only, std::string("anthropic/claude-sonnet-4-5"),
       text(max_model_bytes), "the opencode worker's model, as provider/model",
       [](Settings& settings, const Value& value) { settings.opencode.model = text_of(value); }},
      {"opencode.credential", Kind::string, RepoRule::user_only, std::string(), text(name_bytes),
       "the [[credential]] the opencode worker's API requests carry (empty: ANTHROPIC_API_KEY for the anthropic "
       "provider, OPENAI_API_KEY for openai, from git-mullet's environment)",
       [](Settings& settings, const Value& value) { settings.opencode.credential = text_of(value); }},
      {"opencode.allow_bash", Kind::list, RepoRule::narrow_list, std::vector<std::string>{},
       items(list_items, name_bytes),
       "bash command patterns the opencode worker may run (opencode's permission syntax)",
       [](Settings& settings, const Value& value) { settings.opencode.allow_bash = list_of(value); }},
      {"run.attempts", Kind::integer, RepoRule::lower_only, std::int64_t{1}, between(1, 100),
       "worker runs per job: a failed gate sends the worker back while attempts remain",
       [](Settings& settings, const Value& value) { settings.run.attempts = integer_of<int>(value); }},
      {"run.max_attempts", Kind::integer, RepoRule::user_only, std::int64_t{0}, between(0, 100),
       "how high the repository's .mullet.toml may set attempts (0: it may only lower them); higher is capped here",
       [](Settings& settings, const Value& value) { settings.run.max_attempts = integer_of<int>(value); }},
      {"run.max_parallel", Kind::integer, RepoRule::user_only, std::int64_t{0}, between(0, 1024),
       "jobs that may run at once in one repository (0: no cap); more wait for a slot",
       [](Settings& settings, const Value& value) { settings.run.max_parallel = integer_of<int>(value); }},
      {"run.notify", Kind::list, RepoRule::user_only, std::vector<std::string>{}, items(list_items, name_bytes),
       "a program and its arguments, run on the host when a job ends, with the job's JSON on stdin",
       [](Settings& settings, const Value& value) { settings.run.notify = list_of(value); }},
      {"dispatch.engine", Kind::string, RepoRule::user_only, std::string("local"), text(name_bytes),
       "where `run` runs a job: local (here) or slurm (submitted with sbatch; the node runs it against the same "
       "repository path)",
       [](Settings& settings, const Value& value) { settings.dispatch.engine = text_of(value); }},
      {"dispatch.partition", Kind::string, RepoRule::user_only, std::string(), text(name_bytes),
       "the Slurm partition jobs are submitted to (empty: the cluster's default)",
       [](Settings& settings, const Value& value) { settings.dispatch.partition = text_of(value); }},
      {"dispatch.account", Kind::string, RepoRule::user_only, std::string(), text(name_bytes),
       "the Slurm account jobs are charged to (empty: none given)",
       [](Settings& settings, const Value& value) { settings.dispatch.account = text_of(value); }},
      {"dispatch.sbatch_args", Kind::list, RepoRule::user_only, std::vector<std::string>{},
       items(list_items, name_bytes), "more sbatch arguments, each item one argument (no shell)",
       [](Settings& settings, const Value& value) { settings.dispatch.sbatch_args = list_of(value); }},
      {"dispatch.cpus", Kind::integer, RepoRule::user_only, std::int64_t{1}, between(1, 4096),
       "CPUs a dispatched job asks the scheduler for (sbatch --cpus-per-task)",
       [](Settings& settings, const Value& value) { settings.dispatch.cpus = integer_of<int>(value); }},
      {"limits.timeout", Kind::integer, RepoRule::lower_only, std::int64_t{3600}, between(1, max_seconds),
       "wall-clock seconds per phase",
       [](Settings& settings, const Value& value) { settings.limits.timeout = seconds_of(value); }},
      {"limits.job_timeout", Kind::integer, RepoRule::lower_only, std::int64_t{14400}, between(1, max_seconds),
       "wall-clock seconds for the whole job, every attempt and gate included",
       [](Settings& settings, const Value& value) { settings.limits.job_timeout = seconds_of(value); }},
      {"limits.gate_timeout", Kind::integer, RepoRule::lower_only, std::int64_t{1800}, between(1, max_seconds),
       "wall-clock seconds per gate, unless the gate sets its own (lower) timeout",
       [](Settings& settings, const Value& value) { settings.limits.gate_timeout = seconds_of(value); }},
      {"limits.turns", Kind::integer, RepoRule::lower_only, std::int64_t{200}, between(1, 1000000),
       "the worker's turns per attempt (Claude Code)",
       [](Settings& settings, const Value& value) { settings.limits.turns = integer_of<std::int64_t>(value); }},
      {"limits.cost_usd", Kind::number, RepoRule::lower_only, 20.0, above(0, 1e6),
       "the worker's API cost per attempt in USD (Claude Code)",
       [](Settings& settings, const Value& value) { settings.limits.cost_usd = number_of(value); }},
      {"limits.inactivity", Kind::integer, RepoRule::lower_only, std::int64_t{1800}, between(1, max_seconds),
       "seconds without output before a phase is stopped",
       [](Settings& settings, const Value& value) { settings.limits.inactivity = seconds_of(value); }},
      {"limits.memory_mb", Kind::integer, RepoRule::lower_only, std::int64_t{8192}, between(1, max_mebibytes),
       "memory cap per sandbox (MiB)",
       [](Settings& settings, const Value& value) { settings.limits.memory_mb = mebibytes_of(value); }},
      {"limits.processes", Kind::integer, RepoRule::lower_only, std::int64_t{1024}, between(1, 1LL << 20),
       "process cap per sandbox",
       [](Settings& settings, const Value& value) { settings.limits.processes = integer_of<std::uint32_t>(value); }},
      {"limits.disk_mb", Kind::integer, RepoRule::lower_only, std::int64_t{10240}, between(1, max_mebibytes),
       "disk the worker may fill in its clone and home (MiB)",
       [](Settings& settings, const Value& value) { settings.limits.disk_mb = mebibytes_of(value); }},
      {"limits.egress_mb", Kind::integer, RepoRule::lower_only, std::int64_t{256}, between(1, max_mebibytes),
       "what a job may send out (MiB): request bytes through the egress proxy and the API endpoint, every phase "
       "together",
       [](Settings& settings, const Value& value) { settings.limits.egress_mb = mebibytes_of(value); }},
      {"limits.file_mb", Kind::integer, RepoRule::lower_only, std::int64_t{100}, between(1, max_mebibytes),
       "largest file the result may record (MiB); larger ones are left out",
       [](Settings& settings, const Value& value) { settings.limits.file_mb = mebibytes_of(value); }},
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

Kind kind_of(const Value& value) {
  if (std::holds_alternative<std::string>(value)) return Kind::string;
  if (std::holds_alternative<std::vector<std::string>>(value)) return Kind::list;
  if (std::holds_alternative<std::int64_t>(value)) return Kind::integer;
  if (std::holds_alternative<bool>(value)) return Kind::boolean;
  return Kind::number;
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
      // toml++ gives an empty optional for an integer beyond 2^53 asked as a
      // double: convert here, so a huge integer is a huge number, out of range.
      if (node.is_integer()) return Value(static_cast<double>(*node.value<std::int64_t>()));
      if (node.is_floating_point()) return Value(*node.value<double>());
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

// Why a repository's grant would widen the user's list; empty when it does
// not. "*" reaches public destinations only, and only a grant naming an
// address exactly reaches a restricted one, so a repository that names an
// address (the host's own, a private network's, cloud metadata) widens any
// list; it may only pick host names the user's list covers.
std::string repo_grant_widens(const std::string& item, const std::vector<std::string>& allowed) {
  if (net::grant_names_an_address(item)) return "names an address; a repository may name host names only";
  const auto grant = net::parse_grant(item);
  if (!grant) return "is not a grant";
  if (grant->kind == net::Grant::Kind::name && net::is_localhost_name(grant->destination)) {
    return "names the host's loopback; a repository may name public host names only";
  }
  for (const auto& mine : allowed) {
    const auto granted = net::parse_grant(mine);
    if (!granted) continue;
    if (granted->kind == net::Grant::Kind::anywhere ||
        (grant->kind == net::Grant::Kind::name && granted->allows(grant->destination))) {
      return {};
    }
  }
  return "is not in your user config";
}

bool names_an_address(const std::string& key, const Value& value) {
  if (key != "network.setup" && key != "network.worker") return false;
  const auto& items = std::get<std::vector<std::string>>(value);
  return std::any_of(items.begin(), items.end(),
                     [](const std::string& item) { return net::grant_names_an_address(item); });
}

double numeric(const Value& value) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) return static_cast<double>(*number);
  if (const auto* number = std::get_if<double>(&value)) return *number;
  return 0;
}

// "from 1 to 2592000", "more than 0 and at most 1000000".
std::string range_text(const Bounds& bounds) {
  return (bounds.min_open ? "more than " + util::format_decimal(bounds.min) + " and at most "
                          : "from " + util::format_decimal(bounds.min) + " to ") +
         util::format_decimal(bounds.max);
}

// A value's size and range against its key's bounds; an error message or
// empty. NaN fails every comparison, so each test is written to reject it.
std::string check_bounds(const KeySpec& spec, const Value& value) {
  const Bounds& bounds = spec.bounds;
  if (spec.kind == Kind::integer || spec.kind == Kind::number) {
    const double number = numeric(value);
    const bool above_min = bounds.min_open ? number > bounds.min : number >= bounds.min;
    if (!(std::isfinite(number) && above_min && number <= bounds.max)) {
      return "must be " + std::string(spec.kind == Kind::number ? "a finite number " : "") + range_text(bounds);
    }
  }
  if (const auto* text = std::get_if<std::string>(&value); text != nullptr && text->size() > bounds.max_bytes) {
    return "is " + std::to_string(text->size()) + " bytes long; at most " + std::to_string(bounds.max_bytes) +
           " are allowed";
  }
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    if (list->size() > bounds.max_items) {
      return "has " + std::to_string(list->size()) + " items; at most " + std::to_string(bounds.max_items) +
             " are allowed";
    }
    for (const auto& item : *list) {
      if (item.size() > bounds.max_bytes) {
        return "has an item " + std::to_string(item.size()) + " bytes long; at most " +
               std::to_string(bounds.max_bytes) + " are allowed";
      }
    }
  }
  return {};
}

// Checks a value against its key: bounds first, then content; returns an
// error message or empty.
std::string validate(const KeySpec& spec, const Value& value) {
  if (auto message = check_bounds(spec, value); !message.empty()) return message;
  const std::string key = spec.key;
  if (const auto* choices = choices_of(key)) {
    const auto& word = std::get<std::string>(value);
    if (choice_index(*choices, word) == choices->size()) {
      return "must be one of " + util::join(*choices, ", ") + " (not '" + word + "')";
    }
  }
  if (key == "claude.model" || key == "opencode.model") {
    if (auto message = check_model_name(std::get<std::string>(value)); !message.empty()) return message;
  }
  if (key == "run.executor") {
    const auto& name = std::get<std::string>(value);
    if (name != "claude" && name != "opencode" && name != "command") {
      return "unknown executor '" + name + "' (known: claude, opencode, command)";
    }
  }
  if (key == "dispatch.engine") {
    const auto& word = std::get<std::string>(value);
    if (word != "local" && word != "slurm") return "must be local or slurm (not '" + word + "')";
  }
  if (key == "sandbox.work_tree") {
    const auto& word = std::get<std::string>(value);
    if (word != "auto" && word != "overlay" && word != "fuse-overlayfs" && word != "checkout") {
      return "must be auto, overlay, fuse-overlayfs or checkout (not '" + word + "')";
    }
  }
  if (key == "sandbox.disk_cap") {
    const auto& word = std::get<std::string>(value);
    if (word != "auto" && word != "off") return "must be auto or off (not '" + word + "')";
  }
  if (key == "sandbox.cgroup") {
    const auto& word = std::get<std::string>(value);
    if (word != "auto" && word != "off" && (word.empty() || word.front() != '/')) {
      return "must be auto, off or an absolute path to a cgroup v2 directory (not '" + word + "')";
    }
  }
  if (key == "sandbox.env") {
    for (const auto& name : std::get<std::vector<std::string>>(value)) {
      if (!util::is_env_name(name)) return "'" + name + "' is not a valid environment variable name";
      if (is_api_credential_name(name)) {
        return "'" + name +
               "' would put an API credential inside the sandbox; the worker's API is served by the credential "
               "endpoint, which takes " +
               name +
               " from git-mullet's own environment (or a [[credential]] of your user config) and never lets it in: "
               "remove it from [sandbox] env";
      }
    }
  }
  if (key == "network.setup" || key == "network.worker") {
    for (const auto& item : std::get<std::vector<std::string>>(value)) {
      if (const auto grant = net::parse_grant(item); !grant) {
        return "'" + item + "' is not host:port (or \"*\"): " + grant.error().what();
      }
    }
  }
  return {};
}

// Skips the string starting at `at` (any of TOML's four quotings), counting
// the lines it spans; an unterminated one ends at the line's or text's end.
void skip_string(std::string_view text, std::size_t& at, std::size_t& line) {
  const char quote = text[at];
  const std::string_view triple = quote == '"' ? R"(""")" : "'''";
  const bool multiline = text.substr(at, 3) == triple;
  at += multiline ? 3 : 1;
  while (at < text.size()) {
    const char c = text[at];
    if (c == '\n') {
      ++line;
      if (!multiline) return;
    } else if (c == '\\' && quote == '"') {
      ++at;
      if (at < text.size() && text[at] == '\n') ++line;
    } else if (multiline ? text.substr(at, 3) == triple : c == quote) {
      at += multiline ? 3 : 1;
      // One or two quotes just inside the closing delimiter belong to the
      // string (five quotes end one with two): left over, they would open a
      // string that hides the rest of the line from the count.
      for (int extra = 0; multiline && extra < 2 && at < text.size() && text[at] == quote; ++extra) ++at;
      return;
    }
    ++at;
  }
}

// The nesting of a TOML document, measured without parsing it: toml++
// recurses (to parse and to free) once per level, so a document 100,000
// tables deep overflows the stack. Counts each table header part, each dotted
// key part and each array or inline table; an array of tables adds at most one
// level per part, so the real depth is at most twice this. Returns the line
// where the count first passes `limit`, or 0. Malformed input is left to
// toml++ to report.
std::size_t line_too_deep(std::string_view text, std::size_t limit) {
  struct Open {
    char bracket;
    std::size_t depth;  // of the value the bracket opened
  };
  std::vector<Open> open;  // never deeper than `limit`: each push adds a level
  std::size_t line = 1;
  std::size_t table_depth = 0;  // of the last [header]
  std::size_t base = 0;         // of the table the key being read is in
  std::size_t key_parts = 0;
  std::size_t depth = 0;  // of the value being read
  bool in_key = true;
  std::size_t at = 0;
  const auto close_bracket = [&] {
    if (open.empty()) return;
    depth = open.back().depth;
    open.pop_back();
  };
  while (at < text.size()) {
    const char c = text[at];
    if (c == '"' || c == '\'') {
      if (in_key && key_parts == 0) key_parts = 1;
      skip_string(text, at, line);
      continue;
    }
    if (c == '#') {
      while (at < text.size() && text[at] != '\n') ++at;
      continue;
    }
    ++at;
    if (c == '\n') {
      ++line;
      if (open.empty()) {
        in_key = true;
        base = table_depth;
        key_parts = 0;
      }
    } else if (c == ' ' || c == '\t' || c == '\r') {
      continue;
    } else if (in_key) {
      if (c == '[' && open.empty() && key_parts == 0) {
        // A [table] or [[array of tables]] header: its parts, up to ']'.
        std::size_t parts = 1;
        if (at < text.size() && text[at] == '[') {
          ++parts;
          ++at;
        }
        while (at < text.size() && text[at] != ']' && text[at] != '\n') {
          if (text[at] == '"' || text[at] == '\'') {
            skip_string(text, at, line);
            continue;
          }
          if (text[at] == '.') ++parts;
          ++at;
        }
        table_depth = parts;
        base = parts;
        if (table_depth > limit) return line;
        while (at < text.size() && text[at] == ']') ++at;
      } else if (c == '.') {
        if (base + ++key_parts > limit) return line;
      } else if (c == '=') {
        depth = base + std::max<std::size_t>(key_parts, 1);
        if (depth > limit) return line;
        in_key = false;
      } else if (c == '}') {  // an empty inline table, or a trailing comma
        close_bracket();
        in_key = false;
      } else if (key_parts == 0) {
        key_parts = 1;
      }
    } else if (c == '[' || c == '{') {
      open.push_back({c, depth});
      if (c == '[') {
        if (++depth > limit) return line;
      } else {
        in_key = true;
        base = depth;
        key_parts = 0;
      }
    } else if (c == ']' || c == '}') {
      close_bracket();
    } else if (c == ',' && !open.empty()) {
      if (open.back().bracket == '{') {
        in_key = true;
        base = open.back().depth;
        key_parts = 0;
      } else {
        depth = open.back().depth + 1;
      }
    }
  }
  return 0;
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
  if (const auto* number = std::get_if<double>(&value)) {
    // A TOML float, read back as one.
    std::string text = util::format_decimal(*number);
    if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    return text;
  }
  return std::get<bool>(value) ? "true" : "false";
}

void merge_credentials(const toml::node& section, const std::string& file_label, std::vector<Problem>& problems,
                       std::vector<Credential>& credentials);

// Calls `visit` with each table of an array-of-tables section (`[[name]]`),
// once what is not a table has been reported.
void for_each_table(const toml::node& section, const std::string& name, const std::string& file_label,
                    std::vector<Problem>& problems,
                    const std::function<void(const toml::node&, const toml::table&)>& visit) {
  const auto* tables = section.as_array();
  if (tables == nullptr) {
    problems.push_back({ExitCode::usage, location(file_label, section) + ": " + name +
                                             ": must be an array of tables ([[" + name + "]])"});
    return;
  }
  for (const auto& node : *tables) {
    if (const auto* table = node.as_table()) {
      visit(node, *table);
    } else {
      problems.push_back(
          {ExitCode::usage, location(file_label, node) + ": " + name + ": each [[" + name + "]] must be a table"});
    }
  }
}

// [[gate]] tables of either file: each checked, then appended to `gates`.
void merge_gates(const toml::node& section, const std::string& file_label, std::vector<Problem>& problems,
                 std::vector<Gate>& gates) {
  auto malformed = [&](const std::string& message) { problems.push_back({ExitCode::usage, message}); };
  for_each_table(section, "gate", file_label, problems, [&](const toml::node& gate_node, const toml::table& table) {
    Gate gate;
    gate.origin = location(file_label, gate_node);
    bool ok = true;
    for (const auto& [field_key, field_node] : table) {
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
        const auto seconds = field_node.value<std::int64_t>();
        if (!field_node.is_integer() || *seconds < 1 || *seconds > max_seconds) {
          malformed(where + ": must be an integer from 1 to " + std::to_string(max_seconds) + " (seconds)");
          ok = false;
        } else {
          gate.timeout_seconds = *seconds;
        }
      } else {
        malformed(where + ": unknown key (known: name, command, timeout)");
        ok = false;
      }
    }
    if (ok) {
      if (auto message = check_gate(gate); !message.empty()) {
        malformed(gate.origin + ": gate: " + message);
        ok = false;
      }
    }
    if (ok && gates.size() >= max_gates) {
      malformed(gate.origin + ": gate: at most " + std::to_string(max_gates) + " gates are allowed");
      ok = false;
    }
    if (ok) {
      if (gate.name.empty()) gate.name = default_gate_name(gate.command);
      gates.push_back(gate);
    }
  });
}

// Why the repository's file may not set `spec` to `value` over `yours` (what
// the defaults and the user file made it), each reason completing "the
// repository's .mullet.toml ..."; empty when it may.
std::vector<std::string> repository_widens(const KeySpec& spec, const Value& value, const Value& yours) {
  const std::string key = spec.key;
  switch (spec.repo_rule) {
    case RepoRule::free: return {};
    case RepoRule::user_only: return {"may not set this; only your user config can"};
    case RepoRule::narrow_list: {
      const auto& allowed = std::get<std::vector<std::string>>(yours);
      std::vector<std::string> refusals;
      for (const auto& item : std::get<std::vector<std::string>>(value)) {
        if (key.rfind("network.", 0) == 0) {
          if (const auto why = repo_grant_widens(item, allowed); !why.empty()) {
            refusals.push_back("may only narrow this list; '" + item + "' " + why);
          }
        } else if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
          refusals.push_back("may only narrow this list; '" + item + "' is not in your user config");
        }
      }
      return refusals;
    }
    case RepoRule::narrow_choice: {
      const auto& choices = *choices_of(key);
      const std::size_t index = choice_index(choices, text_of(yours));
      if (choice_index(choices, text_of(value)) >= index) return {};
      const std::vector<std::string> allowed(choices.begin() + static_cast<std::ptrdiff_t>(index), choices.end());
      return {"may only narrow this (yours is " + format_value(yours) + "; it may choose " +
              util::join(allowed, " or ") + ")"};
    }
    case RepoRule::lower_only:
      if (numeric(value) > numeric(yours)) {
        const char* cap = raise_cap_of(key);
        return {"may only lower this limit (yours is " + format_value(yours) + ")" +
                (cap == nullptr ? std::string()
                                : "; your user config's " + key_name(cap) + " may let a repository raise it")};
      }
      return {};
  }
  return {};
}

}  // namespace

Config::Config() {
  for (const auto& spec : schema()) m_entries[spec.key] = Entry{spec.default_value, Source::built_in, "built-in"};
}

const Entry& Config::entry(const std::string& key) const {
  const auto found = m_entries.find(key);
  if (found == m_entries.end()) throw failure("internal error: unknown configuration key " + key);
  return found->second;
}

Settings Config::settings() const {
  Settings settings;
  for (const auto& spec : schema()) {
    try {
      spec.apply(settings, entry(spec.key).value);
    } catch (const std::exception& error) {
      throw failure("internal error: configuration key " + std::string(spec.key) + ": " + error.what());
    }
  }
  settings.gates = m_gates;
  settings.credentials = m_credentials;
  return settings;
}

std::vector<Problem> Config::merge_toml(const std::string& text, const std::string& file_label, Source source) {
  std::vector<Problem> problems;
  auto malformed = [&](const std::string& message) { problems.push_back({ExitCode::usage, message}); };
  if (text.size() > max_file_bytes) {
    malformed(file_label + ": is " + std::to_string(text.size()) + " bytes long; at most " +
              std::to_string(max_file_bytes) + " are allowed");
    return problems;
  }
  if (const auto line = line_too_deep(text, max_nesting); line != 0) {
    malformed(file_label + ":" + std::to_string(line) + ": nested more than " + std::to_string(max_nesting) +
              " levels deep");
    return problems;
  }
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
    if (section == "credential") {
      if (from_repo) {
        problems.push_back({ExitCode::refused, location(file_label, section_node) +
                                                   ": credential: credentials come from your user config only"});
      } else {
        merge_credentials(section_node, file_label, problems, m_credentials);
      }
      continue;
    }
    if (section == "gate") {
      merge_gates(section_node, file_label, problems, m_gates);
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
      // A repository's grant that names an address is refused as such below,
      // however malformed its spelling: the intent is what it is refused for.
      if (auto message = validate(*spec, *value); !message.empty() && !(from_repo && names_an_address(key, *value))) {
        malformed(where + ": " + message);
        continue;
      }
      Entry& current = m_entries[key];
      std::string origin = location(file_label, value_node);
      if (from_repo) {
        // Up to the user's cap, a repository may raise what it may otherwise
        // only lower; above it, it gets the cap.
        const auto ceiling = raise_ceiling(key, current.value, m_entries);
        if (ceiling && numeric(*value) > numeric(*ceiling)) {
          const std::string cap_name = key_name(raise_cap_of(key));
          m_warnings.push_back(where + ": the repository's .mullet.toml asks for " + format_value(*value) + "; your " +
                               cap_name + " caps it at " + format_value(*ceiling));
          origin += " (asks " + format_value(*value) + "; capped by your " + cap_name + ")";
          value = *ceiling;
        }
        const auto refusals = repository_widens(*spec, *value, ceiling.value_or(current.value));
        for (const auto& why : refusals) {
          problems.push_back({ExitCode::refused, where + ": the repository's .mullet.toml " + why});
        }
        if (!refusals.empty()) continue;
      }
      current = Entry{*value, source, origin};
    }
  }
  return problems;
}

void Config::set_from_flag(const std::string& key, Value value, const std::string& flag) {
  const KeySpec* spec = find_key(key);
  if (spec == nullptr) throw failure("internal error: unknown configuration key " + key);
  if (const auto* number = std::get_if<std::int64_t>(&value); number != nullptr && spec->kind == Kind::number) {
    value = static_cast<double>(*number);
  }
  if (kind_of(value) != spec->kind) throw usage_error(flag + ": must be " + kind_name(spec->kind));
  if (auto message = validate(*spec, value); !message.empty()) throw usage_error(flag + ": " + message);
  m_entries[key] = Entry{std::move(value), Source::flag, flag};
}

namespace {

// A comment holds one line: an origin names a file, whose path may hold
// anything.
std::string comment(const std::string& text) {
  std::string line;
  for (const char c : text) {
    if (c == '\n' || c == '\r') {
      line += c == '\n' ? "\\n" : "\\r";
    } else {
      line += c;
    }
  }
  return "  # " + line;
}

}  // namespace

std::string Config::describe() const {
  std::ostringstream out;
  // TOML declares a table once: each section's keys together, sections in
  // the order the schema first names them.
  std::vector<std::string> sections;
  for (const auto& spec : schema()) {
    const std::string key = spec.key;
    const std::string section = key.substr(0, key.find('.'));
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) sections.push_back(section);
  }
  for (const auto& section : sections) {
    if (section != sections.front()) out << "\n";
    out << "[" << section << "]\n";
    for (const auto& spec : schema()) {
      const std::string key = spec.key;
      if (key.substr(0, key.find('.')) != section) continue;
      const Entry& current = entry(key);
      out << key.substr(key.find('.') + 1) << " = " << format_value(current.value) << comment(current.origin) << "\n";
    }
  }
  for (const auto& gate : m_gates) {
    out << "\n[[gate]]" << comment(gate.origin) << "\n";
    out << "name = " << format_value(gate.name) << "\n";
    out << "command = " << format_value(gate.command) << "\n";
    if (gate.timeout_seconds > 0) out << "timeout = " << gate.timeout_seconds << "\n";
  }
  for (const auto& credential : m_credentials) {
    out << "\n[[credential]]" << comment(credential.origin) << "\n";
    out << "name = " << format_value(credential.name) << "\n";
    out << "base_url = " << format_value(credential.base_url) << "\n";
    out << "header = " << format_value(credential.header) << "\n";
    out << "format = " << format_value(credential.format) << "\n";
    if (!credential.env.empty()) out << "env = " << format_value(credential.env) << "\n";
    if (!credential.command.empty()) out << "command = " << format_value(credential.command) << "\n";
    if (!credential.ca_file.empty()) out << "ca_file = " << format_value(credential.ca_file) << "\n";
  }
  return out.str();
}

std::string_view history_name(History history) {
  switch (history) {
    case History::all: return "all";
    case History::base: return "base";
    case History::none: return "none";
  }
  return "?";
}

bool is_api_credential_name(std::string_view name) {
  return name == "ANTHROPIC_API_KEY" || name == "ANTHROPIC_AUTH_TOKEN" || name == "CLAUDE_CODE_OAUTH_TOKEN" ||
         name == "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR";
}

namespace {

// A credential's fields against each other: a message, or empty.
std::string check_credential(const Credential& credential) {
  const auto is_name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  };
  if (credential.name.empty() || credential.name.size() > 64 ||
      !std::all_of(credential.name.begin(), credential.name.end(), is_name_char)) {
    return "needs a name of 1 to 64 letters, digits, '-', '_' or '.'";
  }
  if (credential.base_url.empty()) return "needs a base_url";
  const auto upstream = net::parse_upstream_url(credential.base_url);
  if (!upstream) return "base_url: " + std::string(upstream.error().what());
  if (!upstream->tls && !net::is_localhost_name(upstream->destination) &&
      !(upstream->destination.address && !net::restricted_address_kind(*upstream->destination.address).empty())) {
    return "base_url: http:// would send the credential in the clear; use https://, or http:// only for a gateway "
           "on this machine or your own network, named by its address (127.0.0.1, 10.x, ...) or localhost";
  }
  if (const auto header = net::credential_header({credential.header, credential.format}, "x"); !header) {
    return "header/format: " + std::string(header.error().what());
  }
  if (credential.env.empty() == credential.command.empty()) {
    return "needs exactly one of env (a variable of git-mullet's environment) and command (argv, run without a shell)";
  }
  if (!credential.env.empty() && !util::is_env_name(credential.env)) {
    return "env: '" + credential.env + "' is not a valid environment variable name";
  }
  return {};
}

// [[credential]] tables of a user file: each checked, then appended to
// `credentials`.
void merge_credentials(const toml::node& section, const std::string& file_label, std::vector<Problem>& problems,
                       std::vector<Credential>& credentials) {
  auto malformed = [&](const std::string& message) { problems.push_back({ExitCode::usage, message}); };
  for_each_table(section, "credential", file_label, problems, [&](const toml::node& node, const toml::table& table) {
    Credential credential;
    credential.origin = location(file_label, node);
    bool ok = true;
    for (const auto& [field_key, field_node] : table) {
      const std::string field(field_key.str());
      const std::string where = location(file_label, field_node) + ": credential." + field;
      if (field == "command") {
        const auto* words = field_node.as_array();
        const bool strings = words != nullptr && !words->empty() && words->size() <= list_items &&
                             std::all_of(words->begin(), words->end(), [](const toml::node& word) {
                               return word.is_string() && word.value<std::string>()->size() <= command_bytes;
                             });
        if (!strings) {
          malformed(where + ": must be a non-empty list of strings (argv; no shell runs it)");
          ok = false;
          continue;
        }
        for (const auto& word : *words) credential.command.push_back(*word.value<std::string>());
        continue;
      }
      std::string* text = field == "name"       ? &credential.name
                          : field == "base_url" ? &credential.base_url
                          : field == "header"   ? &credential.header
                          : field == "format"   ? &credential.format
                          : field == "env"      ? &credential.env
                          : field == "ca_file"  ? &credential.ca_file
                                                : nullptr;
      if (text == nullptr) {
        malformed(where + ": unknown key (known: name, base_url, header, format, env, command, ca_file)");
        ok = false;
      } else if (!field_node.is_string() || field_node.value<std::string>()->size() > name_bytes) {
        malformed(where + ": must be a string of at most " + std::to_string(name_bytes) + " bytes");
        ok = false;
      } else {
        *text = *field_node.value<std::string>();
      }
    }
    if (!ok) return;
    if (auto message = check_credential(credential); !message.empty()) {
      malformed(credential.origin + ": credential: " + message);
    } else if (std::any_of(credentials.begin(), credentials.end(),
                           [&](const Credential& other) { return other.name == credential.name; })) {
      malformed(credential.origin + ": credential: another [[credential]] is named '" + credential.name + "'");
    } else if (credentials.size() >= max_credentials) {
      malformed(credential.origin + ": credential: at most " + std::to_string(max_credentials) + " are allowed");
    } else {
      credentials.push_back(std::move(credential));
    }
  });
}

}  // namespace

bool is_user_only(std::string_view key) {
  const auto& keys = schema();
  return std::any_of(keys.begin(), keys.end(),
                     [&](const KeySpec& spec) { return spec.key == key && spec.repo_rule == RepoRule::user_only; });
}

bool is_lower_only(std::string_view key) {
  const auto& keys = schema();
  return std::any_of(keys.begin(), keys.end(),
                     [&](const KeySpec& spec) { return spec.key == key && spec.repo_rule == RepoRule::lower_only; });
}

std::vector<std::string> user_only_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : schema()) {
    if (spec.repo_rule == RepoRule::user_only) keys.emplace_back(spec.key);
  }
  return keys;
}

std::string check_model_name(std::string_view name) {
  if (name.size() > max_model_bytes) {
    return "is " + std::to_string(name.size()) + " bytes long; at most " + std::to_string(max_model_bytes) +
           " are allowed";
  }
  if (!name.empty() && name.front() == '-') return "may not start with '-' (it would read as an option)";
  const bool printable = std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < '\x7f'; });
  if (!printable) return "must be printable ASCII, without spaces";
  return {};
}

std::string default_gate_name(const std::string& command) {
  return util::first_line(command, 256);
}

std::string check_gate(const Gate& gate) {
  if (gate.command.empty()) return "needs a command";
  if (gate.command.size() > command_bytes) {
    return "the command is " + std::to_string(gate.command.size()) + " bytes long; at most " +
           std::to_string(command_bytes) + " are allowed";
  }
  if (gate.name.size() > name_bytes) {
    return "the name is " + std::to_string(gate.name.size()) + " bytes long; at most " + std::to_string(name_bytes) +
           " are allowed";
  }
  // 0 (none given) leaves limits.gate_timeout in charge.
  if (gate.timeout_seconds < 0 || gate.timeout_seconds > max_seconds) {
    return "timeout must be from 1 to " + std::to_string(max_seconds) + " (seconds)";
  }
  return {};
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
