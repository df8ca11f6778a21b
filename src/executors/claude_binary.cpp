#include "executors/claude_binary.hpp"

#include <map>

#include "executors/binary_file.hpp"
#include "util/strings.hpp"

namespace mullet::executors::claude {
namespace {

constexpr const char* cache_file_name = "claude-probe.json";

// Asked outside the sandbox (it is the user's own tool), with nothing of
// ours or the user's in its environment and every kind of traffic off.
std::map<std::string, std::string> probe_environment(const std::string& scratch) {
  return {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
          {"HOME", scratch},
          {"CLAUDE_CONFIG_DIR", scratch + "/.claude"},
          {"TMPDIR", scratch},
          {"DISABLE_AUTOUPDATER", "1"},
          {"DISABLE_TELEMETRY", "1"},
          {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"}};
}

}  // namespace

std::string parse_version(const std::string& version_output) {
  const std::string line = util::trim(util::first_line(version_output, 200));
  return line.substr(0, line.find(' '));
}

Result<std::string> resolve_binary(const std::string& configured, const std::string& path_value) {
  return resolve_executable(
      configured, path_value,
      {"Claude Code", "[claude] binary",
       "install Claude Code (npm install -g @anthropic-ai/claude-code) or set [claude] binary in your user config"});
}

Binary probe_binary(const std::string& real_path, const std::string& cache_dir) {
  auto probed = probe_binary_file(real_path, cache_dir,
                                  {"Claude Code", cache_file_name, {"--help"}, probe_environment, parse_version});
  return Binary{real_path, std::move(probed.version), std::move(probed.flags)};
}

}  // namespace mullet::executors::claude
