#include "jobs/summary_cache.hpp"

#include <charconv>
#include <cstdint>
#include <system_error>

#include "util/fs.hpp"

namespace mullet::jobs {
namespace {

// Changing what a line holds changes this line, so an older file is read as empty.
constexpr std::string_view header = "git-mullet summary cache 2\n";
constexpr std::size_t max_cache_bytes = 256U << 20U;

void append_field(std::string& line, std::string_view text) {
  line.push_back('\t');
  for (const char c : text) {
    if (c == '\\') {
      line += "\\\\";
    } else if (c == '\t') {
      line += "\\t";
    } else if (c == '\n') {
      line += "\\n";
    } else {
      line.push_back(c);
    }
  }
}

template <typename Number>
void append_number(std::string& line, Number value) {
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  append_field(line, error == std::errc() ? std::string_view(buffer, end - buffer) : std::string_view());
}

// Fields of one line, in order.
class FieldReader {
 public:
  explicit FieldReader(std::string_view line) : m_rest(line) {}

  // The next field as written (escaped).
  std::optional<std::string_view> raw() {
    if (m_rest.empty() || m_rest.front() != '\t') return std::nullopt;
    m_rest.remove_prefix(1);
    const std::string_view field = m_rest.substr(0, m_rest.find('\t'));
    m_rest.remove_prefix(field.size());
    return field;
  }

  std::optional<std::string> text() {
    const auto field = raw();
    if (!field) return std::nullopt;
    if (field->find('\\') == std::string_view::npos) return std::string(*field);
    std::string out;
    for (std::size_t i = 0; i < field->size(); ++i) {
      const char c = (*field)[i];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (++i == field->size()) return std::nullopt;
      const char escaped = (*field)[i];
      if (escaped == '\\') {
        out.push_back('\\');
      } else if (escaped == 't') {
        out.push_back('\t');
      } else if (escaped == 'n') {
        out.push_back('\n');
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  // Numbers are never escaped.
  template <typename Number>
  std::optional<Number> number() {
    const auto field = raw();
    if (!field) return std::nullopt;
    Number value{};
    const auto [end, error] = std::from_chars(field->data(), field->data() + field->size(), value);
    if (error != std::errc() || end != field->data() + field->size()) return std::nullopt;
    return value;
  }

  bool at_end() const { return m_rest.empty(); }

 private:
  std::string_view m_rest;
};

// The dispatch fields encode_summary appended, checked as a record's are.
bool decode_dispatch(FieldReader& fields, RecordSummary& summary) {
  const auto dispatched = fields.text();
  if (!dispatched) return false;
  summary.dispatch.reset();
  if (dispatched->empty()) return true;
  auto engine = fields.text();
  auto scheduler_id = fields.text();
  auto node = fields.text();
  auto reason = fields.text();
  if (!engine || !scheduler_id || !node || !reason || *engine != "slurm" || !is_scheduler_id(*scheduler_id) ||
      !is_host_name(*node)) {
    return false;
  }
  summary.dispatch = DispatchRecord{std::move(*engine), std::move(*scheduler_id), std::move(*node), std::move(*reason)};
  return true;
}

}  // namespace

std::string encode_summary(const std::string& record_commit_hex, const RecordSummary& summary) {
  std::string line = record_commit_hex;
  append_field(line, summary.id);
  append_number(line, summary.format);
  append_field(line, summary.title);
  append_field(line, state_name(summary.state));
  append_field(line, summary.base);
  append_field(line, summary.result);
  append_field(line, summary.executor);
  append_number(line, summary.sequence);
  append_field(line, summary.created_at);
  append_field(line, summary.finished_at);
  append_field(line, summary.error);
  append_number(line, summary.runner.pid);
  append_number(line, summary.runner.start_ticks);
  append_field(line, summary.runner.boot_id);
  if (summary.cost_usd) {
    append_number(line, *summary.cost_usd);
  } else {
    append_field(line, "");
  }
  append_field(line, summary.changes ? "1" : "");
  if (summary.changes) {
    append_number(line, summary.changes->files);
    append_number(line, summary.changes->insertions);
    append_number(line, summary.changes->deletions);
  }
  // Before the nodes: a line cut short never ends in free text.
  append_field(line, summary.dispatch ? "1" : "");
  if (summary.dispatch) {
    append_field(line, summary.dispatch->engine);
    append_field(line, summary.dispatch->scheduler_id);
    append_field(line, summary.dispatch->node);
    append_field(line, summary.dispatch->reason);
  }
  append_number(line, summary.nodes.size());
  for (const auto& node : summary.nodes) {
    append_number(line, node.number);
    append_field(line, state_name(node.state));
    append_field(line, node.result);
  }
  return line;
}

bool decode_summary(std::string_view line, std::string_view record_commit_hex, RecordSummary& summary) {
  if (line.substr(0, record_commit_hex.size()) != record_commit_hex) return false;
  FieldReader fields(line.substr(record_commit_hex.size()));
  auto id = fields.text();
  auto format = fields.number<int>();
  auto title = fields.text();
  auto state_text = fields.text();
  auto base = fields.text();
  auto result = fields.text();
  auto executor = fields.text();
  auto sequence = fields.number<std::int64_t>();
  auto created_at = fields.text();
  auto finished_at = fields.text();
  auto error = fields.text();
  auto pid = fields.number<int>();
  auto start_ticks = fields.number<std::uint64_t>();
  auto boot_id = fields.text();
  auto cost = fields.raw();
  auto has_changes = fields.text();
  if (!id || !format || !title || !state_text || !base || !result || !executor || !sequence || !created_at ||
      !finished_at || !error || !pid || !start_ticks || !boot_id || !cost || !has_changes) {
    return false;
  }
  const auto state = parse_state(*state_text);
  if (!state) return false;
  summary.id = std::move(*id);
  summary.format = *format;
  summary.title = std::move(*title);
  summary.state = *state;
  summary.base = std::move(*base);
  summary.result = std::move(*result);
  summary.executor = std::move(*executor);
  summary.sequence = *sequence;
  summary.created_at = std::move(*created_at);
  summary.finished_at = std::move(*finished_at);
  summary.error = std::move(*error);
  summary.runner.pid = *pid;
  summary.runner.start_ticks = *start_ticks;
  summary.runner.boot_id = std::move(*boot_id);
  if (!cost->empty()) {
    double value = 0;
    const auto [end, problem] = std::from_chars(cost->data(), cost->data() + cost->size(), value);
    if (problem != std::errc() || end != cost->data() + cost->size()) return false;
    summary.cost_usd = value;
  }
  if (!has_changes->empty()) {
    const auto files = fields.number<std::int64_t>();
    const auto insertions = fields.number<std::int64_t>();
    const auto deletions = fields.number<std::int64_t>();
    if (!files || !insertions || !deletions) return false;
    summary.changes = ChangeStats{*files, *insertions, *deletions};
  }
  if (!decode_dispatch(fields, summary)) return false;
  const auto node_count = fields.number<std::size_t>();
  if (!node_count || *node_count > static_cast<std::size_t>(max_nodes)) return false;
  summary.nodes.clear();
  for (std::size_t i = 0; i < *node_count; ++i) {
    auto& node = summary.nodes.emplace_back();
    const auto number = fields.number<int>();
    const auto node_state_text = fields.text();
    auto node_result = fields.text();
    if (!number || !node_state_text || !node_result) return false;
    const auto node_state = parse_state(*node_state_text);
    if (!node_state) return false;
    node.number = *number;
    node.state = *node_state;
    node.result = std::move(*node_result);
  }
  if (!fields.at_end()) return false;
  return true;
}

SummaryCache::SummaryCache(std::string path) : m_path(std::move(path)) {
  std::optional<std::string> content;
  try {
    content = util::read_regular_file_if_exists(m_path, max_cache_bytes);
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): unreadable is empty: every job is read
  }
  if (!content || content->substr(0, header.size()) != header) return;
  m_content = std::move(*content);
  std::string_view rest(m_content);
  rest.remove_prefix(header.size());
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    if (end == std::string_view::npos) break;  // a line cut short is not trusted
    m_lines.push_back(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
}

// Jobs are looked up in the order of their refs, which is the order the
// file was written in: the next line is almost always the one, and the
// index is built only when it is not.
std::optional<std::string_view> SummaryCache::line_for(const std::string& record_commit_hex) {
  const auto starts_line = [&](std::string_view line) {
    return line.size() > record_commit_hex.size() && line.substr(0, record_commit_hex.size()) == record_commit_hex &&
           line[record_commit_hex.size()] == '\t';
  };
  if (m_next_line < m_lines.size() && starts_line(m_lines[m_next_line])) return m_lines[m_next_line++];
  if (m_index.empty()) {
    for (const auto line : m_lines) {
      const auto tab = line.find('\t');
      if (tab != std::string_view::npos) m_index.emplace(line.substr(0, tab), line);
    }
  }
  const auto found = m_index.find(record_commit_hex);
  if (found == m_index.end()) return std::nullopt;
  return found->second;
}

bool SummaryCache::find(const std::string& record_commit_hex, RecordSummary& summary) {
  const auto line = line_for(record_commit_hex);
  if (!line || !decode_summary(*line, record_commit_hex, summary)) return false;
  m_kept.push_back(*line);
  ++m_loaded_kept;
  return true;
}

void SummaryCache::remember(const std::string& record_commit_hex, const RecordSummary& summary) {
  m_kept.push_back(m_added.emplace_back(encode_summary(record_commit_hex, summary)));
}

void SummaryCache::save() const {
  if (m_added.empty() && m_loaded_kept == m_lines.size()) return;
  std::string content(header);
  for (const auto line : m_kept) {
    content += line;
    content += '\n';
  }
  try {
    util::write_file_atomic(m_path, content, 0600);
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): a cache not saved is read again next time
  }
}

}  // namespace mullet::jobs
