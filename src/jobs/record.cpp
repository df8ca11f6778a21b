#include "jobs/record.hpp"

#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

const std::vector<std::pair<JobState, const char*>>& state_names() {
  static const std::vector<std::pair<JobState, const char*>> names = {
      {JobState::running, "running"},        {JobState::succeeded, "succeeded"}, {JobState::no_changes, "no_changes"},
      {JobState::failed, "failed"},          {JobState::refused, "refused"},     {JobState::cancelled, "cancelled"},
      {JobState::interrupted, "interrupted"}};
  return names;
}

// Free text (prompts, worker output, errors) may be any bytes.
std::string text(const std::string& value) {
  return util::valid_utf8(value);
}

nlohmann::json null_if_empty(const std::string& value) {
  return value.empty() ? nlohmann::json() : nlohmann::json(text(value));
}

template <typename Integer>
Integer integer_or(const nlohmann::json& json, const char* key, Integer fallback) {
  const auto found = json.find(key);
  return found != json.end() && found->is_number_integer() ? found->get<Integer>() : fallback;
}

std::string string_or_empty(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  return found != json.end() && found->is_string() ? found->get<std::string>() : std::string();
}

nlohmann::json report_json(const WorkerReport& report) {
  if (report.empty()) return nullptr;
  return {{"status", null_if_empty(report.status)},
          {"summary", null_if_empty(report.summary)},
          {"turns", report.turns},
          {"cost_usd", report.cost_usd},
          {"model", null_if_empty(report.model)},
          {"session_id", null_if_empty(report.session_id)},
          {"permission_denials",
           report.permission_denials.is_array() ? report.permission_denials : nlohmann::json::array()}};
}

WorkerReport report_from_json(const nlohmann::json& json) {
  WorkerReport report;
  if (!json.is_object()) return report;
  report.status = string_or_empty(json, "status");
  report.summary = string_or_empty(json, "summary");
  report.turns = integer_or(json, "turns", std::int64_t{0});
  if (const auto cost = json.find("cost_usd"); cost != json.end() && cost->is_number()) {
    report.cost_usd = cost->get<double>();
  }
  report.model = string_or_empty(json, "model");
  report.session_id = string_or_empty(json, "session_id");
  if (const auto denials = json.find("permission_denials"); denials != json.end() && denials->is_array()) {
    report.permission_denials = *denials;
  }
  return report;
}

nlohmann::json attempts_json(const std::vector<AttemptRecord>& attempts) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& attempt : attempts) {
    nlohmann::json gates = nlohmann::json::array();
    for (const auto& gate : attempt.gates) {
      gates.push_back({{"name", text(gate.name)},
                       {"command", text(gate.command)},
                       {"commit", gate.commit},
                       {"passed", gate.passed},
                       {"exit_code", gate.exit_code},
                       {"ended_by", gate.ended_by},
                       {"duration_ms", gate.duration_ms},
                       {"output_tail", text(gate.output_tail)}});
    }
    array.push_back({{"number", attempt.number},
                     {"result", null_if_empty(attempt.result)},
                     {"error", null_if_empty(attempt.error)},
                     {"gates", gates}});
  }
  return array;
}

std::vector<AttemptRecord> attempts_from_json(const nlohmann::json& json) {
  std::vector<AttemptRecord> attempts;
  if (!json.is_array()) return attempts;
  for (const auto& item : json) {
    if (!item.is_object()) continue;
    AttemptRecord attempt;
    attempt.number = integer_or(item, "number", 0);
    attempt.result = string_or_empty(item, "result");
    attempt.error = string_or_empty(item, "error");
    if (const auto gates = item.find("gates"); gates != item.end() && gates->is_array()) {
      for (const auto& entry : *gates) {
        if (!entry.is_object()) continue;
        GateRecord gate;
        gate.name = string_or_empty(entry, "name");
        gate.command = string_or_empty(entry, "command");
        gate.commit = string_or_empty(entry, "commit");
        const auto passed = entry.find("passed");
        gate.passed = passed != entry.end() && passed->is_boolean() && passed->get<bool>();
        gate.exit_code = integer_or(entry, "exit_code", -1);
        gate.ended_by = string_or_empty(entry, "ended_by");
        gate.duration_ms = integer_or(entry, "duration_ms", std::int64_t{0});
        gate.output_tail = string_or_empty(entry, "output_tail");
        attempt.gates.push_back(gate);
      }
    }
    attempts.push_back(attempt);
  }
  return attempts;
}

}  // namespace

std::string state_name(JobState state) {
  for (const auto& [value, name] : state_names()) {
    if (value == state) return name;
  }
  return "unknown";
}

std::optional<JobState> parse_state(const std::string& name) {
  for (const auto& [value, known] : state_names()) {
    if (name == known) return value;
  }
  return std::nullopt;
}

bool is_final(JobState state) {
  return state != JobState::running;
}

nlohmann::json to_json(const JobRecord& record) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& phase : record.phases) {
    std::vector<std::string> command;
    for (const auto& word : phase.command) command.push_back(text(word));
    phases.push_back({{"name", text(phase.name)},
                      {"command", command},
                      {"exit_code", phase.exit_code},
                      {"ended_by", text(phase.ended_by)},
                      {"duration_ms", phase.duration_ms},
                      {"output_tail", text(phase.output_tail)},
                      {"grants", phase.grants},
                      {"network", phase.network}});
  }
  std::vector<std::string> warnings;
  for (const auto& warning : record.snapshot_warnings) warnings.push_back(text(warning));
  return {
      {"format", record.format},
      {"id", record.id},
      {"title", text(record.title)},
      {"prompt", text(record.prompt)},
      {"state", state_name(record.state)},
      {"base", record.base},
      {"result", null_if_empty(record.result)},
      {"executor", record.executor.name},
      {"executor_command", null_if_empty(record.executor.command)},
      {"executor_version", null_if_empty(record.executor.version)},
      {"created_at", record.created_at},
      {"finished_at", null_if_empty(record.finished_at)},
      {"error", null_if_empty(record.error)},
      {"phases", phases},
      {"snapshot_warnings", warnings},
      {"runner",
       {{"pid", record.runner.pid}, {"start_ticks", record.runner.start_ticks}, {"boot_id", record.runner.boot_id}}},
      {"sandbox_uid", record.sandbox_uid ? nlohmann::json(*record.sandbox_uid) : nlohmann::json()},
      {"report", report_json(record.report)},
      {"attempts", attempts_json(record.attempts)},
      {"run_flags", record.run_flags.is_object() ? record.run_flags : nlohmann::json::object()}};
}

JobRecord record_from_json(const nlohmann::json& json) {
  JobRecord record;
  if (!json.is_object()) return record;
  record.format = integer_or(json, "format", 1);
  record.id = string_or_empty(json, "id");
  record.title = string_or_empty(json, "title");
  record.prompt = string_or_empty(json, "prompt");
  record.state = parse_state(string_or_empty(json, "state")).value_or(JobState::failed);
  record.base = string_or_empty(json, "base");
  record.result = string_or_empty(json, "result");
  record.created_at = string_or_empty(json, "created_at");
  record.finished_at = string_or_empty(json, "finished_at");
  record.error = string_or_empty(json, "error");
  record.executor.name = string_or_empty(json, "executor");
  record.executor.command = string_or_empty(json, "executor_command");
  record.executor.version = string_or_empty(json, "executor_version");
  if (const auto phases = json.find("phases"); phases != json.end() && phases->is_array()) {
    for (const auto& item : *phases) {
      if (!item.is_object()) continue;
      PhaseRecord phase;
      phase.name = string_or_empty(item, "name");
      if (const auto command = item.find("command"); command != item.end() && command->is_array()) {
        for (const auto& word : *command) {
          if (word.is_string()) phase.command.push_back(word.get<std::string>());
        }
      }
      phase.exit_code = integer_or(item, "exit_code", -1);
      phase.ended_by = string_or_empty(item, "ended_by");
      phase.duration_ms = integer_or(item, "duration_ms", std::int64_t{0});
      phase.output_tail = string_or_empty(item, "output_tail");
      if (const auto grants = item.find("grants"); grants != item.end() && grants->is_array()) {
        for (const auto& grant : *grants) {
          if (grant.is_string()) phase.grants.push_back(grant.get<std::string>());
        }
      }
      if (const auto network = item.find("network"); network != item.end() && network->is_array()) {
        phase.network = *network;
      }
      record.phases.push_back(phase);
    }
  }
  if (const auto warnings = json.find("snapshot_warnings"); warnings != json.end() && warnings->is_array()) {
    for (const auto& item : *warnings) {
      if (item.is_string()) record.snapshot_warnings.push_back(item.get<std::string>());
    }
  }
  if (const auto runner = json.find("runner"); runner != json.end() && runner->is_object()) {
    record.runner.pid = integer_or(*runner, "pid", 0);
    record.runner.start_ticks = integer_or(*runner, "start_ticks", std::uint64_t{0});
    record.runner.boot_id = string_or_empty(*runner, "boot_id");
  }
  if (const auto uid = json.find("sandbox_uid"); uid != json.end() && uid->is_number_integer()) {
    record.sandbox_uid = uid->get<std::int64_t>();
  }
  if (const auto report = json.find("report"); report != json.end()) record.report = report_from_json(*report);
  if (const auto flags = json.find("run_flags"); flags != json.end() && flags->is_object()) record.run_flags = *flags;
  if (const auto attempts = json.find("attempts"); attempts != json.end()) {
    record.attempts = attempts_from_json(*attempts);
  }
  return record;
}

nlohmann::json summary_json(const JobRecord& record) {
  nlohmann::json full = to_json(record);
  nlohmann::json summary;
  for (const char* key : {"format", "id", "title", "state", "base", "result", "executor", "created_at", "finished_at",
                          "error", "runner"}) {
    summary[key] = full[key];
  }
  return summary;
}

}  // namespace mullet::jobs
