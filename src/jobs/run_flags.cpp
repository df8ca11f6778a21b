#include "jobs/run_flags.hpp"

#include <variant>

#include "jobs/layout.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"

namespace mullet::jobs {
namespace {

constexpr const char* local_run_flags_file = "run-flags.json";
constexpr std::size_t local_run_flags_max_bytes = 1U << 20U;

// Whether a recorded flag's value is what the configuration already holds.
bool same_value(const nlohmann::json& recorded, const config::Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return recorded.is_string() && recorded == *text;
  if (const auto* number = std::get_if<std::int64_t>(&value)) {
    return recorded.is_number_integer() && recorded.get<std::int64_t>() == *number;
  }
  return false;
}

// Whether a recorded number is above what the configuration holds.
bool raises(const nlohmann::json& recorded, const config::Value& value) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) {
    return recorded.is_number_integer() && recorded.get<std::int64_t>() > *number;
  }
  if (const auto* number = std::get_if<double>(&value)) return recorded.is_number() && recorded.get<double>() > *number;
  return false;
}

}  // namespace

nlohmann::json run_flags_json(const config::Config& config, const std::vector<config::Gate>& gates) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, entry] : config.entries()) {
    if (entry.source != config::Source::flag) continue;
    if (const auto* text = std::get_if<std::string>(&entry.value)) values[key] = *text;
    if (const auto* number = std::get_if<std::int64_t>(&entry.value)) values[key] = *number;
  }
  nlohmann::json gate_list = nlohmann::json::array();
  for (const auto& gate : gates) {
    gate_list.push_back({{"name", gate.name}, {"command", gate.command}, {"timeout", gate.timeout_seconds}});
  }
  return {{"config", values}, {"gates", gate_list}};
}

namespace {

// Recorded flags `values` applied to `config`, each checked against what
// this machine recorded (`local_values`) when only the user may set it.
void apply_recorded(const nlohmann::json& values, const nlohmann::json& local_values, config::Config& config,
                    const std::string& id) {
  const std::string origin = "the command line of job " + id;
  for (const auto& [key, value] : values.items()) {
    if (config.entries().count(key) == 0) continue;
    // The record may come from a fetch: like a repository's .mullet.toml it
    // may not choose what only the user's own configuration chooses.
    const bool started_here_with_it = local_values.is_object() && local_values.value(key, nlohmann::json()) == value;
    if (config::is_user_only(key) && !started_here_with_it && !same_value(value, config.entry(key).value)) {
      throw usage_error(
          "job " + id + "'s record asks resume to set " + key + ", which only your own configuration may set",
          "if you started it with that " + key + ", set it in your config file and resume again");
    }
    // Nor raise what a repository may only lower (run.attempts: each one
    // a worker run on your credential).
    if (config::is_lower_only(key) && !started_here_with_it && raises(value, config.entry(key).value)) {
      throw usage_error("job " + id + "'s record asks resume to raise " + key + " to " + value.dump() +
                            ", above your configuration's; a record this machine did not start with it may only "
                            "lower it",
                        "if you started it with that " + key + ", set it in your config file and resume again");
    }
    if (value.is_string()) config.set_from_flag(key, value.get<std::string>(), origin);
    if (value.is_number_integer()) config.set_from_flag(key, value.get<std::int64_t>(), origin);
  }
}

}  // namespace

std::vector<config::Config> restore_node_flags(const JobRecord& record, const config::Config& config,
                                               const std::optional<nlohmann::json>& local_run_flags) {
  std::vector<config::Config> nodes(record.nodes.size(), config);
  const auto recorded = record.run_flags.find("nodes");
  if (recorded == record.run_flags.end() || !recorded->is_array()) return nodes;
  const nlohmann::json local = local_run_flags ? local_run_flags->value("nodes", nlohmann::json()) : nlohmann::json();
  for (std::size_t n = 0; n < nodes.size() && n < recorded->size(); ++n) {
    const nlohmann::json local_node = local.is_array() && n < local.size() ? local[n] : nlohmann::json();
    apply_recorded((*recorded)[n], local_node, nodes[n], record.id);
  }
  return nodes;
}

std::vector<config::Gate> restore_run_flags(const JobRecord& record, config::Config& config,
                                            const std::optional<nlohmann::json>& local_run_flags) {
  const auto& flags = record.run_flags;
  if (const auto values = flags.find("config"); values != flags.end() && values->is_object()) {
    apply_recorded(*values, local_run_flags ? local_run_flags->value("config", nlohmann::json()) : nlohmann::json(),
                   config, record.id);
  }
  std::vector<config::Gate> gates;
  if (const auto list = flags.find("gates"); list != flags.end() && list->is_array()) {
    for (const auto& gate : *list) {
      if (!gate.is_object() || !gate.contains("command") || !gate["command"].is_string()) continue;
      const bool named = gate.contains("name") && gate["name"].is_string();
      const bool timed = gate.contains("timeout") && gate["timeout"].is_number_integer();
      gates.push_back({named ? gate["name"].get<std::string>() : "gate", gate["command"].get<std::string>(),
                       timed ? gate["timeout"].get<std::int64_t>() : 0, "--gate"});
    }
  }
  return gates;
}

void save_local_run_flags(const git::Repository& repo, const std::string& id, const nlohmann::json& run_flags) {
  util::write_file(job_paths(repo, id).root + "/" + local_run_flags_file, run_flags.dump(), 0600);
}

std::optional<nlohmann::json> local_run_flags(const git::Repository& repo, const std::string& id) {
  try {
    const auto text = util::read_regular_file_if_exists(job_paths(repo, id).root + "/" + local_run_flags_file,
                                                        local_run_flags_max_bytes);
    if (!text) return std::nullopt;
    auto parsed = nlohmann::json::parse(*text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
    return parsed;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace mullet::jobs
