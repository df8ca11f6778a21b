#include "executors/binary_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::executors {
namespace {

std::string identity_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {};
  return std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino) + ":" + std::to_string(info.st_size) + ":" +
         std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec);
}

nlohmann::json read_cache(const std::string& cache_path) {
  nlohmann::json cache = nlohmann::json::object();
  if (const auto text = cache_path.empty() ? std::nullopt : util::read_file_if_exists(cache_path)) {
    cache = nlohmann::json::parse(*text, nullptr, false);
    if (!cache.is_object()) cache = nlohmann::json::object();
  }
  return cache;
}

std::string cache_path_of(const std::string& cache_dir, const std::string& cache_name) {
  return cache_dir.empty() ? std::string() : cache_dir + "/" + cache_name;
}

}  // namespace

Result<std::string> resolve_executable(const std::string& configured, const std::string& path_value,
                                       const BinaryNaming& naming) {
  if (configured.empty()) return fail(usage_error(naming.setting + " is empty", naming.install_hint));
  std::string found = configured;
  if (configured.find('/') == std::string::npos) {
    found = util::find_in_path(configured, path_value);
    if (found.empty()) {
      return fail(usage_error(naming.product + " ('" + configured + "') is not on PATH", naming.install_hint));
    }
  }
  std::string real;
  try {
    real = util::real_path(found);
  } catch (const Error&) {
    return fail(usage_error("the " + naming.product + " binary " + found + " does not exist", naming.install_hint));
  }
  struct stat info {};
  if (::stat(real.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || ::access(real.c_str(), X_OK) != 0) {
    return fail(
        usage_error("the " + naming.product + " binary " + real + " is not an executable file", naming.install_hint));
  }
  return real;
}

std::optional<ProbedBinary> cached_probe(const std::string& cache_dir, const std::string& cache_name,
                                         const std::string& real_path) {
  const nlohmann::json cache = read_cache(cache_path_of(cache_dir, cache_name));
  const auto entry = cache.find(real_path);
  if (entry == cache.end() || !entry->is_object() || entry->value("identity", "") != identity_of(real_path) ||
      !entry->contains("flags") || !(*entry)["flags"].is_array()) {
    return std::nullopt;
  }
  ProbedBinary probed{entry->value("version", ""), {}};
  for (const auto& flag : (*entry)["flags"]) {
    if (flag.is_string()) probed.flags.insert(flag.get<std::string>());
  }
  return probed;
}

void store_probe(const std::string& cache_dir, const std::string& cache_name, const std::string& real_path,
                 const ProbedBinary& probed) {
  const std::string cache_path = cache_path_of(cache_dir, cache_name);
  if (cache_path.empty()) return;
  nlohmann::json cache = read_cache(cache_path);
  cache[real_path] = {{"identity", identity_of(real_path)}, {"version", probed.version}, {"flags", probed.flags}};
  try {
    if (util::is_directory(cache_dir)) util::write_file_atomic(cache_path, cache.dump(1) + "\n", 0644);
  } catch (const Error& error) {
    spdlog::debug("cannot cache the probe of {}: {}", real_path, error.what());
  }
}

std::set<std::string> flags_from_help(std::string_view help) {
  std::set<std::string> flags;
  for (std::size_t at = help.find("--"); at != std::string_view::npos; at = help.find("--", at + 2)) {
    if (at > 0 && !std::isspace(static_cast<unsigned char>(help[at - 1])) && help[at - 1] != ',') continue;
    std::size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-')) ++end;
    if (end > at + 2 && std::isalpha(static_cast<unsigned char>(help[at + 2]))) {
      flags.insert(std::string(help.substr(at, end - at)));
    }
  }
  return flags;
}

namespace {

ProbedBinary probe_uncached(const std::string& real_path, const std::string& cache_dir,
                            const ProbeQuestions& questions) {
  if (auto cached = cached_probe(cache_dir, questions.cache_name, real_path)) return std::move(*cached);
  const auto ask = [&](const std::vector<std::string>& arguments, const std::string& scratch) {
    util::SpawnOptions options;
    options.argv = {real_path};
    options.argv.insert(options.argv.end(), arguments.begin(), arguments.end());
    options.env = questions.environment(scratch);
    options.cwd = scratch;
    options.die_with_parent = true;
    return util::run_capture(options, {}, {util::probe_deadline_seconds, true});
  };
  const std::string asked = "--version and " + util::join(questions.help_arguments, " ");
  const std::string hint = "check the installation: run '" + real_path + " --version'";
  util::CapturedRun version;
  util::CapturedRun help;
  {
    util::TempDir scratch("/tmp", "mullet-probe-");
    try {
      version = ask({"--version"}, scratch.path());
      help = ask(questions.help_arguments, scratch.path());
    } catch (const Error& error) {
      throw usage_error(
          "the " + questions.product + " binary " + real_path + " does not answer " + asked + ": " + error.what(),
          hint);
    }
  }
  if (!version.status.success() || !help.status.success()) {
    throw usage_error("the " + questions.product + " binary " + real_path + " does not answer " + asked + " (" +
                          (version.status.success() ? help : version).status.describe() + ")",
                      hint);
  }
  ProbedBinary probed{questions.parse_version(version.out), flags_from_help(help.out + help.err)};
  spdlog::debug("probed {}: version {}, {} flags", real_path, probed.version, probed.flags.size());
  store_probe(cache_dir, questions.cache_name, real_path, probed);
  return probed;
}

}  // namespace

ProbedBinary probe_binary_file(const std::string& real_path, const std::string& cache_dir,
                               const ProbeQuestions& questions) {
  // A run asks more than once (the plan, then each attempt and node), and
  // a repository's first job has no jobs directory to cache the answer in
  // yet: each start of the binary costs seconds. Kept for the process too.
  static std::mutex remembered_lock;
  static std::map<std::string, ProbedBinary> remembered;
  const std::string key = questions.cache_name + "\n" + real_path + "\n" + identity_of(real_path);
  std::optional<ProbedBinary> known;
  {
    const std::lock_guard<std::mutex> hold(remembered_lock);
    if (const auto found = remembered.find(key); found != remembered.end()) known = found->second;
  }
  if (known) {
    // The jobs directory may exist by now: the next process finds it there.
    if (!cached_probe(cache_dir, questions.cache_name, real_path)) {
      store_probe(cache_dir, questions.cache_name, real_path, *known);
    }
    return std::move(*known);
  }
  ProbedBinary probed = probe_uncached(real_path, cache_dir, questions);
  const std::lock_guard<std::mutex> hold(remembered_lock);
  remembered.insert_or_assign(key, probed);
  return probed;
}

}  // namespace mullet::executors
