#include "executors/opencode_binary.hpp"

#include <map>

#include "executors/binary_file.hpp"
#include "executors/opencode_args.hpp"
#include "util/strings.hpp"

namespace mullet::executors::opencode {
namespace {

constexpr const char* cache_file_name = "opencode-probe.json";

// Even --version creates its directories under the home it is given.
std::map<std::string, std::string> probe_environment(const std::string& scratch) {
  auto environment = quiet_environment(scratch);
  environment["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  return environment;
}

}  // namespace

std::string parse_version(const std::string& version_output) {
  std::string line = util::trim(util::first_line(version_output, 200));
  if (const auto space = line.rfind(' '); space != std::string::npos) line.erase(0, space + 1);
  return line;
}

Result<std::string> resolve_binary(const std::string& configured, const std::string& path_value) {
  return resolve_executable(
      configured, path_value,
      {"opencode", "[opencode] binary",
       "install opencode (npm install -g opencode-ai) or set [opencode] binary in your user config"});
}

Binary probe_binary(const std::string& real_path, const std::string& cache_dir) {
  auto probed = probe_binary_file(real_path, cache_dir,
                                  {"opencode", cache_file_name, {"run", "--help"}, probe_environment, parse_version});
  return Binary{real_path, std::move(probed.version), std::move(probed.flags)};
}

}  // namespace mullet::executors::opencode
