// The effective configuration as types. Config (config.hpp) merges the user's
// file, the repository's .mullet.toml and flags, each value checked against
// the schema; Config::settings() then turns the result into this struct, in
// one place. Everything outside src/config/ reads these fields: a field is one
// `[table] key` of the schema, so a misspelt key is a compile error.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mullet::config {

struct Gate {
  std::string name;
  std::string command;
  std::int64_t timeout_seconds = 0;  // 0: the phase limit applies
  std::string origin;
  bool operator==(const Gate&) const = default;
};

// A size the configuration gives in MiB.
class Mebibytes {
 public:
  constexpr Mebibytes() = default;
  constexpr explicit Mebibytes(std::uint64_t count) : m_count(count) {}
  constexpr std::uint64_t count() const { return m_count; }
  constexpr std::uint64_t bytes() const { return m_count << 20U; }
  auto operator<=>(const Mebibytes&) const = default;

 private:
  std::uint64_t m_count = 0;
};

struct RunSettings {
  std::string executor;  // claude, opencode or command
  std::string command;   // the command executor's shell command
  std::string setup;     // empty: no setup phase
  std::vector<std::string> dependency_dirs;
  int attempts = 0;
  int max_parallel = 0;  // 0: no cap
  int max_attempts = 0;  // how high a repository may set attempts; 0: it may only lower them
  // [run] notify: argv of the user's program told when a job ends; empty: none.
  std::vector<std::string> notify;
  bool operator==(const RunSettings&) const = default;
};

// What of the repository's objects a sandbox can read (`[sandbox] history`),
// widest first: every object of the user's store; those reachable from the
// base commit; the base commit and its tree only.
enum class History { all, base, none };
std::string_view history_name(History history);

// How a job's work tree is made (`[sandbox] work_tree`): an overlay of the
// base's shared pristine checkout by kernel overlayfs where the kernel allows
// one, else by fuse-overlayfs, else a checkout of its own (automatic); only
// kernel overlayfs (overlay) or only fuse-overlayfs (fuse), refusing the job
// otherwise; or always a checkout of its own.
enum class WorkTree { automatic, overlay, fuse, checkout };

// How [limits] disk_mb is held (`[sandbox] disk_cap`): by an ext4 image the
// phase writes to where sandbox/disk_image.hpp can make one (automatic), or
// by the polled watch alone (off).
enum class DiskCap { automatic, off };

struct SandboxSettings {
  std::vector<std::string> env;  // extra variable names let in
  uid_t uid = 0;                 // as root: the first host uid of the sandboxes' range
  std::uint32_t uid_count = 0;
  History history = History::base;
  WorkTree work_tree = WorkTree::automatic;
  // [sandbox] cgroup: "auto", "off" or an absolute path (a delegated cgroup
  // v2 directory); sandbox/cgroup.hpp reads it.
  std::string cgroup = "auto";
  DiskCap disk_cap = DiskCap::automatic;
  bool operator==(const SandboxSettings&) const = default;
};

struct NetworkSettings {
  std::vector<std::string> setup;  // grants, as net::parse_grant reads them
  std::vector<std::string> worker;
  bool operator==(const NetworkSettings&) const = default;
};

// A credential of the user's ([[credential]], user config only): the value
// stays on the host, where the credential endpoint (net/credential_endpoint)
// writes it into the requests it forwards to `base_url`.
struct Credential {
  std::string name;
  std::string base_url;              // the upstream, as net::parse_upstream_url reads it
  std::string header = "x-api-key";  // the header written upstream
  std::string format = "{}";         // its value, "{}" standing for the credential
  std::string env;                   // the value is this host variable's ...
  std::vector<std::string> command;  // ... or this command's output (no shell, once per job)
  std::string ca_file;               // PEM trust anchors for the upstream; empty: the system's
  std::string origin;                // FILE:LINE
  bool operator==(const Credential&) const = default;
};

struct ClaudeSettings {
  std::string binary;
  std::string base_url;
  std::vector<std::string> allow_bash;
  std::string credential;  // a [[credential]]'s name; empty: the host's ANTHROPIC_* variables
  std::string model;       // Claude Code's --model; empty: Claude Code chooses
  bool operator==(const ClaudeSettings&) const = default;
};

struct OpencodeSettings {
  std::string binary;
  std::string model;                    // provider/model, as opencode names it
  std::vector<std::string> allow_bash;  // opencode bash permission patterns
  std::string credential;               // a [[credential]]'s name; empty: by provider, the host's variable
  bool operator==(const OpencodeSettings&) const = default;
};

struct LimitsSettings {
  std::chrono::seconds timeout{};       // per phase
  std::chrono::seconds job_timeout{};   // the whole job
  std::chrono::seconds gate_timeout{};  // per gate, unless the gate sets a lower one
  std::chrono::seconds inactivity{};
  std::int64_t turns = 0;  // per attempt (Claude Code)
  double cost_usd = 0;     // per attempt (Claude Code)
  Mebibytes memory_mb;
  std::uint32_t processes = 0;
  Mebibytes disk_mb;
  Mebibytes file_mb;    // the largest file a snapshot records
  Mebibytes egress_mb;  // what a job may send upstream, every phase together
  bool operator==(const LimitsSettings&) const = default;
};

// `[dispatch]` (user config only): where `run` sends a job. "local" runs it
// here; "slurm" submits it with sbatch.
struct DispatchSettings {
  std::string engine = "local";
  std::string partition;                 // sbatch --partition; empty: the cluster's default
  std::string account;                   // sbatch --account; empty: none
  std::vector<std::string> sbatch_args;  // more sbatch arguments, each one argument
  int cpus = 1;                          // sbatch --cpus-per-task
  bool operator==(const DispatchSettings&) const = default;
};

// Only Config::settings() makes one that means anything: a default-constructed
// Settings has every limit at 0.
struct Settings {
  RunSettings run;
  SandboxSettings sandbox;
  NetworkSettings network;
  ClaudeSettings claude;
  OpencodeSettings opencode;
  LimitsSettings limits;
  DispatchSettings dispatch;
  std::vector<Gate> gates;              // the files' [[gate]]s
  std::vector<Credential> credentials;  // the user file's [[credential]]s
  bool operator==(const Settings&) const = default;
};

}  // namespace mullet::config
