#include "jobs/record.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "config/config.hpp"
#include "jobs/id.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

const std::vector<std::pair<JobState, const char*>>& state_names() {
  static const std::vector<std::pair<JobState, const char*>> names = {
      {JobState::running, "running"},         {JobState::succeeded, "succeeded"}, {JobState::no_changes, "no_changes"},
      {JobState::failed, "failed"},           {JobState::refused, "refused"},     {JobState::cancelled, "cancelled"},
      {JobState::interrupted, "interrupted"}, {JobState::queued, "queued"}};
  return names;
}

// Limits on what a record may hold. They are far above what git-mullet writes
// (output tails are cut to 4 KiB, logs live in their own blobs) and keep a
// forged record from making us hold or print gigabytes.
constexpr std::size_t max_name_bytes = 256;
constexpr std::size_t max_title_bytes = title_max_bytes;
constexpr std::size_t max_text_bytes = 64U << 10U;
constexpr std::size_t max_prompt_bytes = 8U << 20U;
constexpr std::size_t max_items = 10000;
constexpr std::int64_t max_duration_ms = std::int64_t{1} << 50;

// Worker output may be any bytes: stored as valid UTF-8, escapes and all.
std::string output(const std::string& value) {
  return util::valid_utf8(value.size() > max_text_bytes ? util::tail(value, max_text_bytes - 64) : value);
}

// What the reader (record_from_json) accepts: no NUL anywhere, and a line no
// line break. Anything else becomes '?', so we never write a record we would
// refuse to read. Other control characters are kept as they were (`--json`
// gives the bytes as they are); everything printed for a person goes through
// util::terminal_safe.
std::string cleaned(const std::string& value, bool free_text) {
  std::string out = util::valid_utf8(value);
  for (char& c : out) {
    if (c == '\0' || (!free_text && (c == '\n' || c == '\r'))) c = '?';
  }
  return out;
}
std::string text(const std::string& value) {
  return cleaned(value, true);
}
// The first max_bytes of a text at most, not cutting a UTF-8 sequence.
std::string cut_to(const std::string& value, std::size_t max_bytes, const std::string& marker) {
  if (value.size() <= max_bytes) return value;
  std::size_t cut = max_bytes - marker.size();
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0U) == 0x80U) --cut;
  return value.substr(0, cut) + marker;
}
// Text a worker or its run produced (errors, the worker's summary), cut to
// what the reader accepts.
std::string bounded(const std::string& value) {
  return text(cut_to(value, max_text_bytes, "\n[... cut ...]"));
}
std::string line(const std::string& value, std::size_t max_bytes = max_name_bytes) {
  return cleaned(cut_to(value, max_bytes, "..."), false);
}

nlohmann::json null_if_empty(const std::string& value, bool free_text = true) {
  return value.empty() ? nlohmann::json() : nlohmann::json(free_text ? bounded(value) : line(value));
}

// A reason's name; an unset one is written as the older records have it.
std::string stop_json(const std::optional<sandbox::StopReason>& reason) {
  return reason ? sandbox::stop_name(*reason) : std::string();
}

nlohmann::json upload_json(const std::optional<UploadRecord>& upload) {
  if (!upload) return nullptr;
  nlohmann::json bytes_up = nlohmann::json::object();
  for (const auto& [destination, count] : upload->bytes_up) {
    if (bytes_up.size() + 1 >= max_items) break;
    auto& entry = bytes_up[line(destination)];
    entry = (entry.is_null() ? 0 : entry.get<std::uint64_t>()) + count;
  }
  return {{"limit_bytes", upload->limit_bytes}, {"before_bytes", upload->before_bytes}, {"bytes_up", bytes_up}};
}

nlohmann::json report_json(const WorkerReport& report) {
  if (report.empty()) return nullptr;
  nlohmann::json denials = nlohmann::json::array();
  if (report.permission_denials.is_array()) {
    for (const auto& denial : report.permission_denials) {
      if (denials.size() == max_items) break;
      denials.push_back(denial);
    }
  }
  return {{"status", null_if_empty(report.status, false)},
          {"summary", null_if_empty(report.summary)},
          {"turns", report.turns},
          {"cost_usd", report.cost_usd},
          {"model", null_if_empty(report.model, false)},
          {"session_id", null_if_empty(report.session_id, false)},
          {"permission_denials", denials}};
}

nlohmann::json changes_json(const std::optional<ChangeStats>& changes) {
  if (!changes) return nullptr;
  return {{"files", changes->files}, {"insertions", changes->insertions}, {"deletions", changes->deletions}};
}

nlohmann::json progress_json(const std::optional<LiveProgress>& progress) {
  if (!progress) return nullptr;
  return {{"phase", line(progress->phase)},
          {"attempt", progress->attempt},
          {"attempts", progress->attempts},
          {"phase_started_at", line(progress->phase_started_at)}};
}

nlohmann::json attempts_json(const std::vector<AttemptRecord>& attempts) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& attempt : attempts) {
    nlohmann::json gates = nlohmann::json::array();
    for (const auto& gate : attempt.gates) {
      gates.push_back({{"name", line(gate.name)},
                       {"command", bounded(gate.command)},
                       {"commit", gate.commit},
                       {"passed", gate.passed},
                       {"exit_code", gate.exit_code},
                       {"ended_by", stop_json(gate.ended_by)},
                       {"duration_ms", gate.duration_ms},
                       {"output_tail", output(gate.output_tail)}});
    }
    array.push_back(
        {{"number", attempt.number},
         {"kind", attempt.kind == AttemptKind::shell ? "shell" : "worker"},
         {"result", null_if_empty(attempt.result)},
         {"error", null_if_empty(attempt.error)},
         {"gates", gates},
         {"instruction", attempt.instruction.empty() ? nlohmann::json() : nlohmann::json(text(attempt.instruction))}});
  }
  return array;
}

// Reads one JSON object of a record, naming the field in every complaint.
class Reader {
 public:
  Reader(const nlohmann::json& json, std::string path, const std::string& job)
      : m_json(json), m_path(std::move(path)), m_job(job) {
    if (!json.is_object()) damaged("", "is not an object");
  }

  [[noreturn]] void damaged(const std::string& key, const std::string& problem) const {
    throw DamagedRecord(m_job, field(key), problem);
  }
  std::string field(const std::string& key) const {
    if (key.empty()) return m_path.empty() ? "job.json" : m_path;
    return m_path.empty() ? key : m_path + "." + key;
  }
  const nlohmann::json* find(const std::string& key) const {
    const auto found = m_json.find(key);
    return found == m_json.end() || found->is_null() ? nullptr : &*found;
  }
  const nlohmann::json& required(const std::string& key) const {
    const auto* value = find(key);
    if (value == nullptr) damaged(key, "is missing");
    return *value;
  }

  // One line of text: no line break, no NUL. Other control characters are
  // neutralised where a person sees them (util::terminal_safe), not here:
  // `--json` gives the record as it is.
  std::string line(const std::string& key, std::size_t max_bytes) const {
    return checked_string(key, max_bytes, false);
  }
  // Free text: any text but NUL.
  std::string text(const std::string& key, std::size_t max_bytes) const { return checked_string(key, max_bytes, true); }
  std::string object_id(const std::string& key) const {
    const auto* value = find(key);
    if (value == nullptr) return {};
    if (!value->is_string() || !is_object_id(value->get<std::string>())) {
      damaged(key, "is not a full object id (40 lowercase hex digits)");
    }
    return value->get<std::string>();
  }
  // Bounds are int64 and high is never negative: a huge unsigned JSON number
  // is compared as unsigned, so it cannot wrap into range.
  template <typename Integer>
  Integer integer(const std::string& key, Integer fallback, std::int64_t low, std::int64_t high) const {
    const auto* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number_integer()) damaged(key, "is not an integer");
    const bool in_range = value->is_number_unsigned()
                              ? value->get<std::uint64_t>() <= static_cast<std::uint64_t>(high) &&
                                    static_cast<std::int64_t>(value->get<std::uint64_t>()) >= low
                              : value->get<std::int64_t>() >= low && value->get<std::int64_t>() <= high;
    if (!in_range) {
      damaged(key, "is out of range (" + std::to_string(low) + " to " + std::to_string(high) + ")");
    }
    return static_cast<Integer>(value->get<std::int64_t>());
  }
  double number(const std::string& key, double high) const {
    const auto* value = find(key);
    if (value == nullptr) return 0;
    if (!value->is_number()) damaged(key, "is not a number");
    const double found = value->get<double>();
    if (!std::isfinite(found) || found < 0 || found > high) damaged(key, "is out of range");
    return found;
  }
  bool boolean(const std::string& key) const {
    const auto* value = find(key);
    if (value == nullptr) return false;
    if (!value->is_boolean()) damaged(key, "is not true or false");
    return value->get<bool>();
  }
  // An array of at most max_items; each item handed to `each` with its field name.
  template <typename Each>
  void array(const std::string& key, Each each) const {
    const auto* value = find(key);
    if (value == nullptr) return;
    if (!value->is_array()) damaged(key, "is not an array");
    if (value->size() > max_items) damaged(key, "has more than " + std::to_string(max_items) + " items");
    for (std::size_t i = 0; i < value->size(); ++i) each((*value)[i], field(key) + "[" + std::to_string(i) + "]");
  }
  std::vector<std::string> lines(const std::string& key, std::size_t max_bytes, bool free_text) const {
    std::vector<std::string> found;
    array(key, [&](const nlohmann::json& item, const std::string& name) {
      found.push_back(check_string(item, name, max_bytes, free_text));
    });
    return found;
  }

  std::string check_string(const nlohmann::json& value, const std::string& name, std::size_t max_bytes,
                           bool free_text) const {
    if (!value.is_string()) throw DamagedRecord(m_job, name, "is not a string");
    const auto& content = value.get_ref<const std::string&>();
    if (content.size() > max_bytes) {
      throw DamagedRecord(m_job, name, "is longer than " + std::to_string(max_bytes) + " bytes");
    }
    for (const char c : content) {
      if (c == '\0') throw DamagedRecord(m_job, name, "holds a NUL byte");
      if (!free_text && (c == '\n' || c == '\r')) throw DamagedRecord(m_job, name, "holds a line break");
    }
    return content;
  }

 private:
  std::string checked_string(const std::string& key, std::size_t max_bytes, bool free_text) const {
    const auto* value = find(key);
    return value == nullptr ? std::string() : check_string(*value, field(key), max_bytes, free_text);
  }

  const nlohmann::json& m_json;
  std::string m_path;
  const std::string& m_job;
};

// Free-form JSON kept in a record (the proxy's decisions, refused tool uses)
// is copied and printed recursively: a forged one must not be nested deep
// enough to overflow the stack.
bool shallow(const nlohmann::json& value, int depth = 0) {
  if (depth > 64) return false;
  if (!value.is_structured()) return true;
  return std::all_of(value.begin(), value.end(), [&](const nlohmann::json& item) { return shallow(item, depth + 1); });
}

// Output a worker printed may hold any bytes, escape sequences included; it
// is stored as it came and only bounded here.
std::string output_tail(const Reader& in, const std::string& key) {
  const auto* value = in.find(key);
  if (value == nullptr) return {};
  if (!value->is_string()) in.damaged(key, "is not a string");
  if (value->get_ref<const std::string&>().size() > max_text_bytes) in.damaged(key, "is too long");
  return value->get<std::string>();
}

std::string one_of(const Reader& in, const std::string& key, const std::vector<std::string>& known) {
  std::string value = in.line(key, max_name_bytes);
  if (!value.empty() && std::find(known.begin(), known.end(), value) == known.end()) {
    in.damaged(key, "is not one of " + util::join(known, ", "));
  }
  return value;
}

std::optional<sandbox::StopReason> stop_reason(const Reader& in, const std::string& key) {
  const std::string name = in.line(key, max_name_bytes);
  if (name.empty()) return std::nullopt;
  if (const auto reason = sandbox::parse_stop_reason(name)) return reason;
  // Before stop reasons were a type, an executor's refusal was recorded as
  // "stopped: " and what it saw.
  if (name.rfind("stopped: ", 0) == 0) return sandbox::StopReason::worker_refused;
  in.damaged(key, "is not one of " + util::join(sandbox::stop_names(), ", "));
}

WorkerReport report_from_json(const Reader& in) {
  WorkerReport report;
  report.status = in.line("status", max_name_bytes);
  report.summary = in.text("summary", max_text_bytes);
  report.turns = in.integer<std::int64_t>("turns", 0, 0, std::int64_t{1} << 50);
  report.cost_usd = in.number("cost_usd", 1e9);
  report.model = in.line("model", max_name_bytes);
  report.session_id = in.line("session_id", max_name_bytes);
  if (const auto* denials = in.find("permission_denials")) {
    if (!denials->is_array()) in.damaged("permission_denials", "is not an array");
    if (denials->size() > max_items) in.damaged("permission_denials", "has too many items");
    if (!shallow(*denials)) in.damaged("permission_denials", "is nested too deep");
    report.permission_denials = *denials;
  }
  return report;
}

GateRecord gate_from_json(const Reader& in) {
  GateRecord gate;
  gate.name = in.line("name", max_name_bytes);
  gate.command = in.text("command", max_text_bytes);
  gate.commit = in.object_id("commit");
  gate.passed = in.boolean("passed");
  gate.exit_code = in.integer("exit_code", -1, -255, 65535);
  gate.ended_by = stop_reason(in, "ended_by");
  gate.duration_ms = in.integer<std::int64_t>("duration_ms", 0, 0, max_duration_ms);
  gate.output_tail = output_tail(in, "output_tail");
  return gate;
}

AttemptRecord attempt_from_json(const Reader& in, const std::string& job) {
  AttemptRecord attempt;
  attempt.number = in.integer("number", 0, 0, 1000000);
  // Absent in records that predate it: the worker's.
  const std::string kind = in.line("kind", 16);
  if (kind == "shell") {
    attempt.kind = AttemptKind::shell;
  } else if (!kind.empty() && kind != "worker") {
    in.damaged("kind", "is neither worker nor shell");
  }
  attempt.result = in.object_id("result");
  attempt.error = in.text("error", max_text_bytes);
  attempt.instruction = in.text("instruction", max_prompt_bytes);
  in.array("gates", [&](const nlohmann::json& item, const std::string& name) {
    attempt.gates.push_back(gate_from_json(Reader(item, name, job)));
  });
  return attempt;
}

ChangeStats changes_from_json(const Reader& in) {
  constexpr std::int64_t most = std::int64_t{1} << 50;
  return {in.integer<std::int64_t>("files", 0, 0, most), in.integer<std::int64_t>("insertions", 0, 0, most),
          in.integer<std::int64_t>("deletions", 0, 0, most)};
}

LiveProgress progress_from_json(const Reader& in) {
  LiveProgress progress;
  progress.phase = in.line("phase", max_name_bytes);
  progress.attempt = in.integer("attempt", 0, 0, 1000000);
  progress.attempts = in.integer("attempts", 0, 0, 1000000);
  progress.phase_started_at = in.line("phase_started_at", max_name_bytes);
  return progress;
}

UploadRecord upload_from_json(const Reader& in) {
  constexpr auto max_bytes = std::numeric_limits<std::int64_t>::max();
  UploadRecord upload;
  upload.limit_bytes = in.integer<std::uint64_t>("limit_bytes", 0, 0, max_bytes);
  upload.before_bytes = in.integer<std::uint64_t>("before_bytes", 0, 0, max_bytes);
  if (const auto* bytes_up = in.find("bytes_up")) {
    if (!bytes_up->is_object()) in.damaged("bytes_up", "is not an object");
    if (bytes_up->size() > max_items) in.damaged("bytes_up", "has too many destinations");
    for (const auto& [destination, count] : bytes_up->items()) {
      if (destination.size() > max_name_bytes ||
          destination.find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
        in.damaged("bytes_up",
                   "names a destination that is not one line of at most " + std::to_string(max_name_bytes) + " bytes");
      }
      if (!count.is_number_unsigned() && !(count.is_number_integer() && count.get<std::int64_t>() >= 0)) {
        in.damaged("bytes_up", "holds a count that is not a whole number of bytes");
      }
      upload.bytes_up[destination] = count.get<std::uint64_t>();
    }
  }
  return upload;
}

PhaseRecord phase_from_json(const Reader& in, const std::string& job) {
  PhaseRecord phase;
  phase.name = in.line("name", max_name_bytes);
  phase.command = in.lines("command", max_text_bytes, true);
  phase.exit_code = in.integer("exit_code", -1, -255, 65535);
  phase.ended_by = stop_reason(in, "ended_by");
  phase.duration_ms = in.integer<std::int64_t>("duration_ms", 0, 0, max_duration_ms);
  phase.output_tail = output_tail(in, "output_tail");
  phase.grants = in.lines("grants", max_name_bytes, false);
  if (const auto* network = in.find("network")) {
    if (!network->is_array()) in.damaged("network", "is not an array");
    if (network->size() > max_items) in.damaged("network", "has too many items");
    if (!shallow(*network)) in.damaged("network", "is nested too deep");
    phase.network = *network;
  }
  if (const auto* api = in.find("api"); api != nullptr && !api->is_null()) {
    if (!api->is_object()) in.damaged("api", "is not an object");
    if (!shallow(*api)) in.damaged("api", "is nested too deep");
    if (const auto requests = api->find("requests"); requests != api->end()) {
      if (!requests->is_array()) in.damaged("api", "has requests that are not an array");
      if (requests->size() > max_items) in.damaged("api", "has too many requests");
    }
    phase.api = *api;
  }
  if (const auto* upload = in.find("upload")) phase.upload = upload_from_json(Reader(*upload, in.field("upload"), job));
  if (const auto* peak = in.find("memory_peak_bytes"); peak != nullptr && !peak->is_null()) {
    phase.memory_peak_bytes = in.integer<std::uint64_t>("memory_peak_bytes", 0, 0, std::int64_t{1} << 62);
  }
  return phase;
}

// Only what `run` records, with values of the right type: resume replays it,
// and config::Config::set_from_flag validates the values again.
nlohmann::json run_flags_from_json(const Reader& in, const std::string& job) {
  nlohmann::json flags = nlohmann::json::object();
  const Reader run_flags(in.required("run_flags"), in.field("run_flags"), job);
  for (const auto& [key, value] : in.required("run_flags").items()) {
    if (key != "config" && key != "gates" && key != "nodes") run_flags.damaged(key, "is not a known key");
  }
  const auto config_flags = [&](const Reader& values, const nlohmann::json& config) {
    nlohmann::json kept = nlohmann::json::object();
    for (const auto& [key, value] : config.items()) {
      const auto& known = replayable_run_flags();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        values.damaged(key, "is not a key run records (known: " + util::join(known, ", ") + ")");
      }
      if (key == "run.attempts") {
        kept[key] = values.integer<std::int64_t>(key, 1, 1, 1000);
      } else if (key == "claude.model" || key == "opencode.model") {
        kept[key] = values.line(key, config::max_model_bytes);
      } else {
        kept[key] = values.text(key, max_text_bytes);
      }
    }
    return kept;
  };
  if (const auto* config = run_flags.find("config")) {
    flags["config"] = config_flags(Reader(*config, run_flags.field("config"), job), *config);
  }
  // `--node EXECUTOR[:MODEL]`: each node's flags (run.executor, a model).
  if (const auto* nodes = run_flags.find("nodes")) {
    if (!nodes->is_array() || nodes->size() > static_cast<std::size_t>(max_nodes)) {
      run_flags.damaged("nodes", "is not an array of at most " + std::to_string(max_nodes) + " nodes");
    }
    nlohmann::json kept = nlohmann::json::array();
    run_flags.array("nodes", [&](const nlohmann::json& item, const std::string& name) {
      kept.push_back(config_flags(Reader(item, name, job), item));
    });
    flags["nodes"] = kept;
  }
  nlohmann::json gates = nlohmann::json::array();
  run_flags.array("gates", [&](const nlohmann::json& item, const std::string& name) {
    const Reader gate(item, name, job);
    const std::string command = gate.text("command", max_text_bytes);
    if (command.empty()) gate.damaged("command", "is missing");
    gates.push_back({{"name", gate.text("name", max_name_bytes)},
                     {"command", command},
                     {"timeout", gate.integer<std::int64_t>("timeout", 0, 0, 1000000000)}});
  });
  flags["gates"] = gates;
  return flags;
}

DispatchRecord dispatch_from_json(const Reader& in) {
  DispatchRecord dispatch;
  dispatch.engine = one_of(in, "engine", {"slurm"});
  if (dispatch.engine.empty()) in.damaged("engine", "is missing");
  dispatch.scheduler_id = in.line("scheduler_id", max_name_bytes);
  if (!is_scheduler_id(dispatch.scheduler_id)) in.damaged("scheduler_id", "is not a scheduler's job id");
  dispatch.node = in.line("node", max_name_bytes);
  if (!is_host_name(dispatch.node)) in.damaged("node", "is not a host name");
  dispatch.reason = in.line("reason", max_name_bytes);
  return dispatch;
}

NodeRecord node_from_json(const Reader& in, const std::string& job) {
  NodeRecord node;
  node.number = in.integer("number", 0, 1, max_nodes);
  node.executor.name = one_of(in, "executor", {"claude", "opencode", "command"});
  node.executor.command = in.text("executor_command", max_text_bytes);
  node.executor.version = in.line("executor_version", max_name_bytes);
  node.executor.model = in.line("executor_model", config::max_model_bytes);
  const auto state = parse_state(in.line("state", max_name_bytes));
  if (!state) in.damaged("state", "is not a known state");
  node.state = *state;
  node.result = in.object_id("result");
  node.error = in.text("error", max_text_bytes);
  node.started_at = in.line("started_at", max_name_bytes);
  node.finished_at = in.line("finished_at", max_name_bytes);
  in.array("phases", [&](const nlohmann::json& item, const std::string& name) {
    node.phases.push_back(phase_from_json(Reader(item, name, job), job));
  });
  node.snapshot_warnings = in.lines("snapshot_warnings", max_text_bytes, true);
  if (in.find("cost_usd") != nullptr) node.cost_usd = in.number("cost_usd", 1e9);
  if (const auto* report = in.find("report")) node.report = report_from_json(Reader(*report, in.field("report"), job));
  in.array("attempts", [&](const nlohmann::json& item, const std::string& name) {
    node.attempts.push_back(attempt_from_json(Reader(item, name, job), job));
  });
  if (const auto* changes = in.find("changes")) {
    node.changes = changes_from_json(Reader(*changes, in.field("changes"), job));
  }
  if (const auto* progress = in.find("progress")) {
    node.progress = progress_from_json(Reader(*progress, in.field("progress"), job));
  }
  if (const auto* dispatch = in.find("dispatch")) {
    node.dispatch = dispatch_from_json(Reader(*dispatch, in.field("dispatch"), job));
  }
  return node;
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

bool is_scheduler_id(const std::string& text) {
  // Empty until the scheduler answered; else digits, and `_N` for an array task.
  if (text.size() > 40) return false;
  const auto underscore = text.find('_');
  const auto digits = [](const std::string& part) {
    return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
  };
  if (underscore == std::string::npos) return text.empty() || digits(text);
  return digits(text.substr(0, underscore)) && digits(text.substr(underscore + 1));
}

bool is_host_name(const std::string& text) {
  return text.size() <= 253 &&
         text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") ==
             std::string::npos;
}

void overwrite_keeping_dispatch(JobRecord& stored, const JobRecord& now) {
  auto dispatch = std::move(stored.dispatch);
  stored = now;
  if (!dispatch) return;
  stored.dispatch = std::move(dispatch);
  if (stored.state != JobState::cancelled || stored.dispatch->reason == stop_requested_reason) return;
  stored.state = JobState::interrupted;
  stored.dispatch->reason = "SIGTERM from the scheduler";
  stored.error = "the scheduler ended " + stored.dispatch->engine + " job " + stored.dispatch->scheduler_id +
                 " before the job ended (scancel, time limit, preemption or shutdown)";
}

bool is_active(JobState state) {
  return state == JobState::running || state == JobState::queued;
}

int exit_code_for(JobState state) {
  switch (state) {
    case JobState::succeeded:
    case JobState::no_changes:
    case JobState::queued:
    case JobState::running: return static_cast<int>(ExitCode::ok);
    case JobState::refused: return static_cast<int>(ExitCode::refused);
    case JobState::failed:
    case JobState::cancelled:
    case JobState::interrupted: return static_cast<int>(ExitCode::job_failed);
  }
  return static_cast<int>(ExitCode::job_failed);
}

std::uint64_t UploadRecord::total() const {
  std::uint64_t sum = 0;
  for (const auto& [destination, count] : bytes_up) sum += count;
  return sum;
}

JobState state_after(sandbox::StopReason reason) {
  switch (reason) {
    case sandbox::StopReason::cancelled: return JobState::cancelled;
    case sandbox::StopReason::refused:
    case sandbox::StopReason::worker_refused: return JobState::refused;
    case sandbox::StopReason::exit:
    case sandbox::StopReason::signal:
    case sandbox::StopReason::timeout:
    case sandbox::StopReason::job_timeout:
    case sandbox::StopReason::inactivity:
    case sandbox::StopReason::memory:
    case sandbox::StopReason::disk:
    case sandbox::StopReason::stalled:
    case sandbox::StopReason::turns:
    case sandbox::StopReason::cost:
    case sandbox::StopReason::budget:
    case sandbox::StopReason::egress:
    case sandbox::StopReason::api_down: return JobState::failed;
  }
  return JobState::failed;
}

namespace {

nlohmann::json phases_json(const std::vector<PhaseRecord>& records) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& phase : records) {
    std::vector<std::string> command;
    for (const auto& word : phase.command) command.push_back(bounded(word));
    std::vector<std::string> grants;
    for (const auto& grant : phase.grants) grants.push_back(line(grant));
    phases.push_back(
        {{"name", line(phase.name)},
         {"command", command},
         {"exit_code", phase.exit_code},
         {"ended_by", stop_json(phase.ended_by)},
         {"duration_ms", phase.duration_ms},
         {"output_tail", output(phase.output_tail)},
         {"grants", grants},
         {"network", phase.network},
         {"api", phase.api},
         {"upload", upload_json(phase.upload)},
         {"memory_peak_bytes", phase.memory_peak_bytes ? nlohmann::json(*phase.memory_peak_bytes) : nlohmann::json()}});
  }
  return phases;
}

std::vector<std::string> warnings_json(const std::vector<std::string>& snapshot_warnings) {
  std::vector<std::string> warnings;
  for (const auto& warning : snapshot_warnings) {
    if (warnings.size() + 1 == max_items) {
      warnings.push_back("... and " + std::to_string(snapshot_warnings.size() - warnings.size()) + " more");
      break;
    }
    warnings.push_back(bounded(warning));
  }
  return warnings;
}

nlohmann::json runner_json(const RunnerRecord& runner) {
  nlohmann::json json{{"pid", runner.pid}, {"start_ticks", runner.start_ticks}, {"boot_id", runner.boot_id}};
  if (!runner.repository.empty()) json["repository"] = runner.repository;
  return json;
}

nlohmann::json cost_json(const std::optional<double>& cost) {
  return cost ? nlohmann::json(*cost) : nlohmann::json();
}

nlohmann::json dispatch_json(const DispatchRecord& dispatch) {
  return {{"engine", dispatch.engine},
          {"scheduler_id", dispatch.scheduler_id},
          {"node", dispatch.node},
          {"reason", line(dispatch.reason, max_name_bytes)}};
}

nlohmann::json nodes_json(const std::vector<NodeRecord>& nodes) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& node : nodes) {
    if (array.size() == static_cast<std::size_t>(max_nodes)) break;
    array.push_back({{"number", node.number},
                     {"executor", node.executor.name},
                     {"executor_command", null_if_empty(node.executor.command)},
                     {"executor_version", null_if_empty(node.executor.version, false)},
                     {"executor_model", null_if_empty(node.executor.model, false)},
                     {"state", state_name(node.state)},
                     {"result", null_if_empty(node.result)},
                     {"error", null_if_empty(node.error)},
                     {"started_at", null_if_empty(node.started_at, false)},
                     {"finished_at", null_if_empty(node.finished_at, false)},
                     {"phases", phases_json(node.phases)},
                     {"snapshot_warnings", warnings_json(node.snapshot_warnings)},
                     {"cost_usd", cost_json(node.cost_usd)},
                     {"report", report_json(node.report)},
                     {"attempts", attempts_json(node.attempts)},
                     {"changes", changes_json(node.changes)},
                     {"progress", progress_json(node.progress)}});
    if (node.dispatch) array.back()["dispatch"] = dispatch_json(*node.dispatch);
  }
  return array;
}

}  // namespace

nlohmann::json to_json(const JobRecord& record) {
  const nlohmann::json phases = phases_json(record.phases);
  const std::vector<std::string> warnings = warnings_json(record.snapshot_warnings);
  nlohmann::json json = {{"format", record.format},
                         {"id", record.id},
                         {"title", line(record.title, max_title_bytes)},
                         {"prompt", text(record.prompt)},
                         {"state", state_name(record.state)},
                         {"base", record.base},
                         {"base_uncommitted", record.base_uncommitted},
                         {"base_head", null_if_empty(record.base_head)},
                         {"result", null_if_empty(record.result)},
                         {"executor", record.executor.name},
                         {"executor_command", null_if_empty(record.executor.command)},
                         {"executor_version", null_if_empty(record.executor.version, false)},
                         {"executor_model", null_if_empty(record.executor.model, false)},
                         {"sequence", record.sequence},
                         {"created_at", record.created_at},
                         {"finished_at", null_if_empty(record.finished_at)},
                         {"error", null_if_empty(record.error)},
                         {"phases", phases},
                         {"snapshot_warnings", warnings},
                         {"runner", runner_json(record.runner)},
                         {"sandbox_uid", record.sandbox_uid ? nlohmann::json(*record.sandbox_uid) : nlohmann::json()},
                         {"cost_usd", cost_json(record.cost_usd)},
                         {"report", report_json(record.report)},
                         {"attempts", attempts_json(record.attempts)},
                         {"changes", changes_json(record.changes)},
                         {"progress", progress_json(record.progress)},
                         {"run_flags", record.run_flags.is_object() ? record.run_flags : nlohmann::json::object()}};
  // A job of one node has no `nodes`: its JSON is what it always was.
  if (!record.nodes.empty()) json["nodes"] = nodes_json(record.nodes);
  // A job run where it was started has no `dispatch`.
  if (record.dispatch) json["dispatch"] = dispatch_json(*record.dispatch);
  return json;
}

namespace {

// A field's name may hold a key from the record: shown cut and without
// control characters.
std::string printable_field(const std::string& field) {
  std::string shown;
  for (const char c : field.substr(0, 120)) {
    const auto byte = static_cast<unsigned char>(c);
    shown += byte < 0x20U || byte == 0x7fU ? '?' : c;
  }
  return shown;
}

}  // namespace

DamagedRecord::DamagedRecord(std::string job, const std::string& field, std::string problem)
    : DamagedRecord(std::move(job), printable_field(field), std::move(problem), 0) {}

DamagedRecord::DamagedRecord(std::string job, std::string field, std::string problem, int)
    : Error(ExitCode::usage,
            (job.empty() ? std::string("a job record") : "job " + job) + " is damaged: " + field + " " + problem,
            job.empty() ? std::string("it was not written by git-mullet as it is now")
                        : "it was not written by git-mullet as it is now (fetched from elsewhere?); remove it with "
                          "`git mullet discard " +
                              job + "`"),
      m_job(std::move(job)),
      m_field(std::move(field)),
      m_problem(std::move(problem)) {}

const std::vector<std::string>& replayable_run_flags() {
  static const std::vector<std::string> keys = {"run.command",  "run.executor", "run.setup",
                                                "run.attempts", "claude.model", "opencode.model"};
  return keys;
}

bool is_object_id(const std::string& text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

JobRecord record_from_json(const nlohmann::json& json, const std::string& job) {
  const Reader in(json, "", job);
  JobRecord record;
  record.format = in.integer("format", 1, 1, 1);
  record.id = in.line("id", max_name_bytes);
  if (!is_valid_job_id(record.id))
    in.damaged("id", "is not a job id (" + std::to_string(job_id_length) + " hex digits)");
  if (!job.empty() && record.id != job) in.damaged("id", "is not the id its ref names");
  record.title = in.line("title", max_title_bytes);
  record.prompt = in.text("prompt", max_prompt_bytes);
  const auto state = parse_state(in.line("state", max_name_bytes));
  if (!state) in.damaged("state", "is not a known state");
  record.state = *state;
  record.base = in.object_id("base");
  if (record.base.empty()) in.damaged("base", "is missing");
  record.base_uncommitted = in.boolean("base_uncommitted");
  record.base_head = in.object_id("base_head");
  if (record.base_uncommitted != !record.base_head.empty()) {
    in.damaged("base_head", "is set without base_uncommitted, or missing with it");
  }
  record.result = in.object_id("result");
  record.sequence = in.integer<std::int64_t>("sequence", 0, 0, std::int64_t{1} << 50);
  record.created_at = in.line("created_at", max_name_bytes);
  record.finished_at = in.line("finished_at", max_name_bytes);
  record.error = in.text("error", max_text_bytes);
  record.executor.name = one_of(in, "executor", {"claude", "opencode", "command"});
  record.executor.command = in.text("executor_command", max_text_bytes);
  record.executor.version = in.line("executor_version", max_name_bytes);
  record.executor.model = in.line("executor_model", config::max_model_bytes);
  in.array("phases", [&](const nlohmann::json& item, const std::string& name) {
    record.phases.push_back(phase_from_json(Reader(item, name, job), job));
  });
  record.snapshot_warnings = in.lines("snapshot_warnings", max_text_bytes, true);
  if (const auto* runner = in.find("runner")) {
    const Reader fields(*runner, "runner", job);
    record.runner.pid = fields.integer("pid", 0, 0, 1 << 22);
    record.runner.start_ticks =
        fields.integer<std::uint64_t>("start_ticks", 0, 0, std::numeric_limits<std::int64_t>::max());
    record.runner.boot_id = fields.line("boot_id", max_name_bytes);
    if (fields.find("repository") != nullptr) {
      record.runner.repository = fields.line("repository", max_name_bytes);
      if (!is_repository_key(record.runner.repository)) fields.damaged("repository", "is not a repository key");
    }
  }
  if (const auto* cost = in.find("cost_usd"); cost != nullptr && !cost->is_null()) {
    record.cost_usd = in.number("cost_usd", 1e9);
  }
  if (in.find("sandbox_uid") != nullptr) {
    record.sandbox_uid = in.integer<std::int64_t>("sandbox_uid", 0, 1, 4294967294LL);
  }
  if (const auto* report = in.find("report")) record.report = report_from_json(Reader(*report, "report", job));
  if (in.find("run_flags") != nullptr) record.run_flags = run_flags_from_json(in, job);
  in.array("attempts", [&](const nlohmann::json& item, const std::string& name) {
    record.attempts.push_back(attempt_from_json(Reader(item, name, job), job));
  });
  if (const auto* changes = in.find("changes")) record.changes = changes_from_json(Reader(*changes, "changes", job));
  if (const auto* progress = in.find("progress")) {
    record.progress = progress_from_json(Reader(*progress, "progress", job));
  }
  if (const auto* dispatch = in.find("dispatch")) {
    record.dispatch = dispatch_from_json(Reader(*dispatch, "dispatch", job));
  }
  if (const auto* nodes = in.find("nodes")) {
    // Two to max_nodes, numbered 1, 2, ... in order; a job of one has none.
    if (!nodes->is_array() || nodes->size() < 2 || nodes->size() > static_cast<std::size_t>(max_nodes)) {
      in.damaged("nodes", "is not an array of 2 to " + std::to_string(max_nodes) + " nodes");
    }
    in.array("nodes", [&](const nlohmann::json& item, const std::string& name) {
      record.nodes.push_back(node_from_json(Reader(item, name, job), job));
      if (record.nodes.back().number != static_cast<int>(record.nodes.size())) {
        throw DamagedRecord(job, name + ".number", "is not its place in nodes (1, 2, ...)");
      }
    });
    // The job's result is its chosen node's.
    if (!record.result.empty() && std::none_of(record.nodes.begin(), record.nodes.end(),
                                               [&](const NodeRecord& node) { return node.result == record.result; })) {
      in.damaged("result", "is not the result of one of its nodes");
    }
  }
  return record;
}

RecordSummary summary_of(const JobRecord& record) {
  RecordSummary summary{record.format,     record.id,          record.title,         record.state,
                        record.base,       record.result,      record.executor.name, record.sequence,
                        record.created_at, record.finished_at, record.error,         record.runner,
                        record.cost_usd,   record.changes,     record.dispatch,      {}};
  summary.nodes.reserve(record.nodes.size());
  for (const auto& node : record.nodes) summary.nodes.push_back({node.number, node.state, node.result});
  return summary;
}

// Written as to_json writes the same fields: a summary read back from a
// commit message is read by record_from_json.
nlohmann::json summary_json(const RecordSummary& summary) {
  nlohmann::json json = {
      {"format", summary.format},
      {"id", summary.id},
      {"title", line(summary.title, max_title_bytes)},
      {"state", state_name(summary.state)},
      {"base", summary.base},
      {"result", null_if_empty(summary.result)},
      {"executor", summary.executor},
      {"sequence", summary.sequence},
      {"created_at", summary.created_at},
      {"finished_at", null_if_empty(summary.finished_at)},
      {"error", null_if_empty(summary.error)},
      {"runner",
       {{"pid", summary.runner.pid}, {"start_ticks", summary.runner.start_ticks}, {"boot_id", summary.runner.boot_id}}},
      {"cost_usd", cost_json(summary.cost_usd)},
      {"changes", changes_json(summary.changes)}};
  // `list` shows a job of several nodes as "3/4 passed".
  if (!summary.nodes.empty()) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& node : summary.nodes) {
      if (nodes.size() == static_cast<std::size_t>(max_nodes)) break;
      nodes.push_back(
          {{"number", node.number}, {"state", state_name(node.state)}, {"result", null_if_empty(node.result)}});
    }
    json["nodes"] = nodes;
  }
  if (summary.dispatch) json["dispatch"] = dispatch_json(*summary.dispatch);
  return json;
}

nlohmann::json summary_json(const JobRecord& record) {
  return summary_json(summary_of(record));
}

}  // namespace mullet::jobs
