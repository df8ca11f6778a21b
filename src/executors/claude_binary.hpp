// Finding the Claude Code binary, and learning what it can do.
//
// It usually lives under the user's home (npm's prefix, ~/.local/bin), which
// the walls hide, and npm's .bin/claude is a symlink: so we resolve it to the
// real file here, and that file is bound read-only into the sandbox.
#pragma once

#include <set>
#include <string>

#include "util/error.hpp"

namespace mullet::executors::claude {

struct Binary {
  std::string path;     // real path: no symlink anywhere in it
  std::string version;  // "2.1.197"
  std::set<std::string> flags;
};

// `configured` is [claude] binary: a name searched on `path_value`, or a path.
// A usage error when there is no such executable file.
Result<std::string> resolve_binary(const std::string& configured, const std::string& path_value);

// Its version and the flags its --help lists. The answers are cached in
// cache_dir per binary file (path, inode, size, mtime), so each installed
// version is asked once; the binary runs with an empty environment and a
// throwaway home, outside the sandbox (it is the user's own tool).
Binary probe_binary(const std::string& real_path, const std::string& cache_dir);

// "2.1.197 (Claude Code)" -> "2.1.197"
std::string parse_version(const std::string& version_output);

}  // namespace mullet::executors::claude
