// What the agent executors share about their CLI's binary: finding the file
// that really runs (npm installs symlinks), and remembering what it answered
// when asked its version and flags, per file, so that each installed version
// is asked once.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "util/error.hpp"

namespace mullet::executors {

// How a binary is named in messages: "Claude Code", "[claude] binary", and
// how to install it.
struct BinaryNaming {
  std::string product;
  std::string setting;
  std::string install_hint;
};

// `configured`: a name searched on `path_value`, or a path. The real path
// (no symlink anywhere in it) of an executable regular file, or a usage error.
Result<std::string> resolve_executable(const std::string& configured, const std::string& path_value,
                                       const BinaryNaming& naming);

struct ProbedBinary {
  std::string version;
  std::set<std::string> flags;
};

// The answers cached for this file in cache_dir/cache_name, when the file
// (device, inode, size, mtime) has not changed since.
std::optional<ProbedBinary> cached_probe(const std::string& cache_dir, const std::string& cache_name,
                                         const std::string& real_path);

// Remembers the answers; only where cache_dir already exists (asking must not
// create it), and a failure to write is only logged.
void store_probe(const std::string& cache_dir, const std::string& cache_name, const std::string& real_path,
                 const ProbedBinary& probed);

}  // namespace mullet::executors
