#include "executors/binary_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "util/fs.hpp"
#include "util/process.hpp"

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

}  // namespace mullet::executors
