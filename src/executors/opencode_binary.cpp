#include "executors/opencode_binary.hpp"

#include <spdlog/spdlog.h>

#include "executors/binary_file.hpp"
#include "executors/claude_args.hpp"
#include "executors/opencode_args.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors::opencode {
namespace {

constexpr const char* cache_file_name = "opencode-probe.json";

util::CapturedRun ask(const std::string& binary, const std::vector<std::string>& arguments,
                      const std::string& scratch) {
  util::SpawnOptions options;
  options.argv = {binary};
  options.argv.insert(options.argv.end(), arguments.begin(), arguments.end());
  // Even --version creates its directories under the home it is given.
  options.env = quiet_environment(scratch);
  options.env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  options.cwd = scratch;
  options.die_with_parent = true;
  return util::run_capture(options, {}, {util::probe_deadline_seconds, true});
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
  if (auto cached = cached_probe(cache_dir, cache_file_name, real_path)) {
    return Binary{real_path, std::move(cached->version), std::move(cached->flags)};
  }
  util::CapturedRun version;
  util::CapturedRun help;
  {
    util::TempDir scratch("/tmp", "mullet-probe-");
    try {
      version = ask(real_path, {"--version"}, scratch.path());
      help = ask(real_path, {"run", "--help"}, scratch.path());
    } catch (const Error& error) {
      throw usage_error(
          "the opencode binary " + real_path + " does not answer --version and run --help: " + error.what(),
          "check the installation: run '" + real_path + " --version'");
    }
  }
  if (!version.status.success() || !help.status.success()) {
    throw usage_error("the opencode binary " + real_path + " does not answer --version and run --help (" +
                          (version.status.success() ? help : version).status.describe() + ")",
                      "check the installation: run '" + real_path + " --version'");
  }
  Binary binary{real_path, parse_version(version.out), claude::flags_from_help(help.out + help.err)};
  spdlog::debug("probed {}: version {}, {} run flags", real_path, binary.version, binary.run_flags.size());
  store_probe(cache_dir, cache_file_name, real_path, {binary.version, binary.run_flags});
  return binary;
}

}  // namespace mullet::executors::opencode
