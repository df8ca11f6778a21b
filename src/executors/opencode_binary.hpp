// Finding the opencode binary, and learning what it can do.
//
// npm's opencode-ai package links node_modules/.bin/opencode to
// opencode-ai/bin/opencode.exe, over which its postinstall hard-links the
// native binary of the platform package that suits the CPU: resolving the
// symlinks finds that ELF, which is bound read-only into the sandbox.
#pragma once

#include <set>
#include <string>

#include "util/error.hpp"

namespace mullet::executors::opencode {

struct Binary {
  std::string path;                 // real path: no symlink anywhere in it
  std::string version;              // "1.18.33"
  std::set<std::string> run_flags;  // what `opencode run --help` lists
};

// `configured` is [opencode] binary: a name searched on `path_value`, or a
// path. A usage error when there is no such executable file.
Result<std::string> resolve_binary(const std::string& configured, const std::string& path_value);

// Its version and the flags of its `run` subcommand, cached in cache_dir per
// binary file; asked with an empty environment, a throwaway home and no
// network access of its own (npm offline), outside the sandbox.
Binary probe_binary(const std::string& real_path, const std::string& cache_dir);

// "1.18.33\n" -> "1.18.33"; "opencode 1.18.33" -> "1.18.33".
std::string parse_version(const std::string& version_output);

}  // namespace mullet::executors::opencode
