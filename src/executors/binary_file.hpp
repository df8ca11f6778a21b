// What the agent executors share about their CLI's binary: finding the file
// that really runs (npm installs symlinks), and remembering what it answered
// when asked its version and flags, per file, so that each installed version
// is asked once.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// Every long option (--name) a `--help` text mentions.
std::set<std::string> flags_from_help(std::string_view help);

// How to ask one agent's binary its version and flags.
struct ProbeQuestions {
  std::string product;                      // "Claude Code", for messages
  std::string cache_name;                   // its cache file in cache_dir
  std::vector<std::string> help_arguments;  // {"--help"}, {"run", "--help"}
  // The environment it is asked in, given a throwaway home.
  std::function<std::map<std::string, std::string>(const std::string& home)> environment;
  std::function<std::string(const std::string& version_output)> parse_version;
};

// The binary's version and the flags its help lists: cached_probe(), else
// asked (`--version`, then the help) outside the sandbox in a throwaway home,
// with a deadline, and store_probe()d. A usage error when it does not answer.
ProbedBinary probe_binary_file(const std::string& real_path, const std::string& cache_dir,
                               const ProbeQuestions& questions);

}  // namespace mullet::executors
