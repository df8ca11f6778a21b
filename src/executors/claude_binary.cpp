#include "executors/claude_binary.hpp"

#include <spdlog/spdlog.h>

#include "executors/binary_file.hpp"
#include "executors/claude_args.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors::claude {
namespace {

constexpr const char* cache_file_name = "claude-probe.json";

util::CapturedRun ask(const std::string& binary, const std::string& flag, const std::string& scratch) {
  util::SpawnOptions options;
  options.argv = {binary, flag};
  options.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                 {"HOME", scratch},
                 {"CLAUDE_CONFIG_DIR", scratch + "/.claude"},
                 {"TMPDIR", scratch},
                 {"DISABLE_AUTOUPDATER", "1"},
                 {"DISABLE_TELEMETRY", "1"},
                 {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"}};
  options.cwd = scratch;
  options.die_with_parent = true;
  return util::run_capture(options, {}, {util::probe_deadline_seconds, true});
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
  if (auto cached = cached_probe(cache_dir, cache_file_name, real_path)) {
    return Binary{real_path, std::move(cached->version), std::move(cached->flags)};
  }

  util::CapturedRun version;
  util::CapturedRun help;
  {
    util::TempDir scratch("/tmp", "mullet-probe-");
    try {
      version = ask(real_path, "--version", scratch.path());
      help = ask(real_path, "--help", scratch.path());
    } catch (const Error& error) {
      throw usage_error(
          "the Claude Code binary " + real_path + " does not answer --version and --help: " + error.what(),
          "check the installation: run '" + real_path + " --version'");
    }
  }
  if (!version.status.success() || !help.status.success()) {
    throw usage_error("the Claude Code binary " + real_path + " does not answer --version and --help (" +
                          (version.status.success() ? help : version).status.describe() + ")",
                      "check the installation: run '" + real_path + " --version'");
  }
  Binary binary{real_path, parse_version(version.out), flags_from_help(help.out + help.err)};
  spdlog::debug("probed {}: version {}, {} flags", real_path, binary.version, binary.flags.size());
  store_probe(cache_dir, cache_file_name, real_path, {binary.version, binary.flags});
  return binary;
}

}  // namespace mullet::executors::claude
