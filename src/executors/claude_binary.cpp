#include "executors/claude_binary.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "executors/claude_args.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors::claude {
namespace {

constexpr const char* cache_file_name = "claude-probe.json";

std::string identity_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {};
  return std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino) + ":" + std::to_string(info.st_size) + ":" +
         std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec);
}

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
  const std::string hint =
      "install Claude Code (npm install -g @anthropic-ai/claude-code) or set [claude] binary in your user config";
  if (configured.empty()) return fail(usage_error("[claude] binary is empty", hint));
  std::string found = configured;
  if (configured.find('/') == std::string::npos) {
    found = util::find_in_path(configured, path_value);
    if (found.empty()) return fail(usage_error("Claude Code ('" + configured + "') is not on PATH", hint));
  }
  std::string real;
  try {
    real = util::real_path(found);
  } catch (const Error&) {
    return fail(usage_error("the Claude Code binary " + found + " does not exist", hint));
  }
  struct stat info {};
  if (::stat(real.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || ::access(real.c_str(), X_OK) != 0) {
    return fail(usage_error("the Claude Code binary " + real + " is not an executable file", hint));
  }
  return real;
}

Binary probe_binary(const std::string& real_path, const std::string& cache_dir) {
  const std::string identity = identity_of(real_path);
  const std::string cache_path = cache_dir.empty() ? std::string() : cache_dir + "/" + cache_file_name;
  nlohmann::json cache = nlohmann::json::object();
  if (const auto text = cache_path.empty() ? std::nullopt : util::read_file_if_exists(cache_path)) {
    cache = nlohmann::json::parse(*text, nullptr, false);
    if (!cache.is_object()) cache = nlohmann::json::object();
  }
  if (const auto entry = cache.find(real_path); entry != cache.end() && entry->is_object() &&
                                                entry->value("identity", "") == identity && entry->contains("flags") &&
                                                (*entry)["flags"].is_array()) {
    Binary binary{real_path, entry->value("version", ""), {}};
    for (const auto& flag : (*entry)["flags"]) {
      if (flag.is_string()) binary.flags.insert(flag.get<std::string>());
    }
    return binary;
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
  cache[real_path] = {{"identity", identity}, {"version", binary.version}, {"flags", binary.flags}};
  try {
    // Only where our directory already exists: asking must not create it.
    if (!cache_path.empty() && util::is_directory(cache_dir)) {
      util::write_file_atomic(cache_path, cache.dump(1) + "\n", 0644);
    }
  } catch (const Error& error) {
    spdlog::debug("cannot cache the probe of {}: {}", real_path, error.what());
  }
  return binary;
}

}  // namespace mullet::executors::claude
