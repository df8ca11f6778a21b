// The git command-line tool, run hardened: no hooks, no system or global
// config, no fsmonitor, an explicit git dir and work tree (never discovered
// through a .git file), and an environment built from scratch.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/process.hpp"

namespace mullet::git {

struct GitCliTarget {
  std::string git_dir;
  std::optional<std::string> work_tree;
  // Extra object directories (GIT_ALTERNATE_OBJECT_DIRECTORIES).
  std::vector<std::string> alternates;
  // GIT_INDEX_FILE and GIT_OBJECT_DIRECTORY, when set (a scratch git dir of
  // ours that reads and writes the user's objects).
  std::optional<std::string> index_file{};
  std::optional<std::string> object_directory{};
  // Read the user's configuration as git does for them (system, global, `git
  // -c`, the identity variables) instead of none: only for commands that read
  // settings (`git var`), never for one that writes or checks out.
  bool user_config = false;
};

// GIT_ALTERNATE_OBJECT_DIRECTORIES for these directories (C-quoting those
// that contain the ':' separator).
std::string alternates_value(const std::vector<std::string>& dirs);
// The objects directories `objects_dir` borrows from (its info/alternates,
// followed as git does, five levels deep), as real paths.
std::vector<std::string> borrowed_object_dirs(const std::string& objects_dir);

// The argv prefix every invocation gets (exposed for tests).
std::vector<std::string> hardened_git_prefix();
util::Environment hardened_git_environment(const GitCliTarget& target);

// The argument lists of the git commands we run with values from records or
// the user: --end-of-options before revisions and `--` before paths, so no
// value (a forged record's `--output=...`) can be read as an option.
// `options` (checked by parse_diff_request) replace `--stat --patch`; our
// hardening follows them, so it wins; `paths` follow `--`.
std::vector<std::string> diff_args(const std::string& from, const std::string& to, bool for_terminal = false,
                                   const std::vector<std::string>& options = {},
                                   const std::vector<std::string>& paths = {});
std::vector<std::string> read_tree_args(const std::string& tree_ish);
// Creates `ref` at `commit` only if it does not exist yet (the zero old value
// is checked under the ref's lock).
std::vector<std::string> create_ref_args(const std::string& ref, const std::string& commit, const std::string& message);

// Runs `git <args>` and captures its output; throws when git cannot start or
// when SIGINT/SIGTERM stopped it.
util::CapturedRun run_git(const GitCliTarget& target, const std::vector<std::string>& args,
                          const std::string& input = {});
// Runs it with our stdout/stderr (for output meant for the user); with
// on_stdout, its stdout goes there instead, chunk by chunk as it comes.
util::ExitStatus run_git_passthrough(const GitCliTarget& target, const std::vector<std::string>& args,
                                     const std::function<void(std::string_view)>& on_stdout = {});

}  // namespace mullet::git
