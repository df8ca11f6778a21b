// The system calls a sandbox may not make, as data.
//
// Built here by one pure function, printed with the plan (`run --dry-run`),
// compiled to a BPF program by libseccomp (compile_syscall_filter) and handed
// to bubblewrap (`--seccomp`), which applies it just before our wall check
// runs: everything the sandbox runs afterwards (the worker, its children, a
// nested sandbox of its own) is under it. The list follows Flatpak's and
// Codex's: calls a coding worker never needs and that have a history of
// kernel escapes. A denied call fails with EPERM (the process goes on); a
// system call through the 32-bit or x32 entry points, which would name other
// numbers than the rules do, kills the process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/fd.hpp"

namespace mullet::sandbox {

// One comparison of one argument of the call.
struct ArgumentTest {
  enum class Op { equal, not_equal, at_least, masked_equal };
  unsigned index = 0;  // 0..5
  Op op = Op::equal;
  std::uint64_t value = 0;
  std::uint64_t mask = 0;  // masked_equal: (argument & mask) == value
  bool operator==(const ArgumentTest&) const = default;
};

struct SyscallRule {
  std::string syscall;               // as libseccomp names it
  std::optional<ArgumentTest> when;  // unset: every call
  std::string why;                   // for people (--dry-run)
  bool operator==(const SyscallRule&) const = default;
};

struct SyscallFilter {
  std::vector<SyscallRule> denied;  // each fails with EPERM
  // Claude Code runs its commands in a bubblewrap of its own: the mount
  // calls and netlink (its loopback) stay allowed for that phase.
  bool nested_sandbox = false;
  bool operator==(const SyscallFilter&) const = default;
};

// Pure: the filter for a phase; `nested_sandbox` for a worker that starts a
// sandbox of its own inside ours.
SyscallFilter syscall_filter(bool nested_sandbox);

nlohmann::json to_json(const SyscallFilter& filter);
// One line for `run --dry-run`.
std::string describe(const SyscallFilter& filter);

// The BPF program for `filter`, in a sealed memory file at offset 0, ready
// for bwrap's --seccomp. Throws (a refusal: the sandbox would be weaker) when
// libseccomp cannot build it; a call this architecture does not have
// (vm86 on x86_64) is left out.
UniqueFd compile_syscall_filter(const SyscallFilter& filter);

}  // namespace mullet::sandbox
