#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <tuple>

#include "cli/commands.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/store.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct ListOptions {
  bool json = false;
  std::vector<std::string> states;
  std::int64_t count = 0;  // 0: all
};

constexpr const char* damaged_state = "damaged";

std::string shown_state(const jobs::JobSummary& job) {
  return job.damage.empty() ? jobs::state_name(jobs::effective_state(job.record)) : damaged_state;
}

// Newest first: by creation time to the millisecond, then by the
// repository's sequence (two jobs in one tick), then by id; damaged records,
// whose times are not trusted, last.
void sort_newest_first(std::vector<jobs::JobSummary>& jobs) {
  // Each key once: parsing a time costs more than comparing.
  using Key = std::tuple<bool, std::int64_t, std::int64_t>;
  std::vector<std::pair<Key, jobs::JobSummary>> keyed;
  keyed.reserve(jobs.size());
  for (auto& job : jobs) {
    const auto created = job.damage.empty() ? util::parse_utc_ms(job.record.created_at) : std::nullopt;
    keyed.emplace_back(Key{job.damage.empty(), created.value_or(0), job.record.sequence}, std::move(job));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.id < b.second.id;
  });
  jobs.clear();
  for (auto& [key, job] : keyed) jobs.push_back(std::move(job));
}

std::vector<std::string> wanted_states(const std::vector<std::string>& given) {
  std::vector<std::string> known;
  for (int state = 0; state <= static_cast<int>(jobs::JobState::interrupted); ++state) {
    known.push_back(jobs::state_name(static_cast<jobs::JobState>(state)));
  }
  known.emplace_back(damaged_state);
  for (const auto& state : given) {
    if (std::find(known.begin(), known.end(), state) == known.end()) {
      throw usage_error("'" + state + "' is not a job state", "the states are: " + util::join(known, ", "));
    }
  }
  return given;
}

// The terminal's width, or 0 when stdout is not a terminal (or says none).
std::size_t terminal_columns() {
  if (::isatty(STDOUT_FILENO) == 0) return 0;
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

// Characters as a terminal counts them (a UTF-8 sequence is one).
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U; }));
}

std::string cut_to_width(const std::string& text, std::size_t width) {
  if (display_width(text) <= width) return text;
  if (width == 0) return {};
  std::size_t kept = 0;
  std::size_t end = 0;
  while (end < text.size()) {
    std::size_t next = end + 1;
    while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0U) == 0x80U) ++next;
    if (kept + 1 == width) break;
    ++kept;
    end = next;
  }
  return text.substr(0, end) + "…";
}

std::string pad(std::string text, std::size_t width) {
  const std::size_t shown = display_width(text);
  if (shown < width) text.append(width - shown, ' ');
  return text;
}

std::vector<std::string> row_of(const jobs::JobSummary& job, std::int64_t now_ms) {
  const auto& record = job.record;
  if (!job.damage.empty()) return {job.id, damaged_state, "-", "-", "-", "-", job.damage};
  const auto created = util::parse_utc_ms(record.created_at);
  const auto finished = util::parse_utc_ms(record.finished_at);
  const jobs::JobState state = jobs::effective_state(record);
  std::string age = created ? util::format_elapsed(now_ms - *created) : "-";
  std::string duration = "-";
  if (created && finished) duration = util::format_elapsed(*finished - *created);
  if (created && state == jobs::JobState::running) duration = util::format_elapsed(now_ms - *created);
  const std::string cost = record.cost_usd ? "$" + util::format_decimal(*record.cost_usd, 2) : "-";
  const std::string changes = record.changes ? "+" + std::to_string(record.changes->insertions) + " -" +
                                                   std::to_string(record.changes->deletions)
                                             : "-";
  // A job of several nodes is one line, its title led by how its nodes did.
  const std::string title =
      record.nodes.empty() ? record.title : "[" + jobs::nodes_summary(record) + "] " + record.title;
  return {job.id, jobs::state_name(state), age, duration, cost, changes, title};
}

// One line per job; on a terminal a header and titles cut to the width.
// Piped, no header, so every line is a job.
std::string table(const std::vector<jobs::JobSummary>& jobs) {
  const std::size_t columns = terminal_columns();
  std::vector<std::vector<std::string>> rows;
  if (columns > 0) rows.push_back({"ID", "STATE", "AGE", "DURATION", "COST", "CHANGES", "TITLE"});
  const std::int64_t now = util::epoch_ms();
  // Titles and damage are the job's (a fetched record's: anyone's): made
  // safe before they are measured.
  for (const auto& job : jobs) {
    auto row = row_of(job, now);
    for (auto& cell : row) cell = util::terminal_safe(cell);
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> widths(rows.empty() ? 0 : rows.front().size() - 1, 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < widths.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  std::size_t used = 0;
  for (const auto width : widths) used += width + 2;
  constexpr std::size_t least_title = 12;
  const std::size_t title_room = columns > used + least_title ? columns - used : least_title;
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) line += pad(row[i], widths[i]) + "  ";
    line += columns > 0 ? cut_to_width(row.back(), title_room) : row.back();
    out += line + "\n";
  }
  return out;
}

int list(const ListOptions& options) {
  const auto states = wanted_states(options.states);
  const git::Repository repo = open_repository();
  // Listing only reads our own summaries; checking every object's hash costs
  // a quarter of the time and guards nothing here.
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
  auto jobs = jobs::JobStore(repo).summaries();
  const bool none_at_all = jobs.empty();
  sort_newest_first(jobs);
  if (!states.empty()) {
    std::erase_if(jobs, [&](const auto& job) {
      return std::find(states.begin(), states.end(), shown_state(job)) == states.end();
    });
  }
  if (options.count > 0 && jobs.size() > static_cast<std::size_t>(options.count)) {
    jobs.resize(static_cast<std::size_t>(options.count));
  }
  if (options.json) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& job : jobs) {
      if (!job.damage.empty()) {
        array.push_back({{"id", job.id}, {"state", damaged_state}, {"error", job.damage}});
        continue;
      }
      nlohmann::json item = jobs::summary_json(job.record);
      item["state"] = shown_state(job);
      for (std::size_t n = 0; n < job.record.nodes.size() && item.contains("nodes"); ++n) {
        item["nodes"][n]["state"] = jobs::state_name(jobs::effective_node_state(job.record, job.record.nodes[n]));
      }
      array.push_back(item);
    }
    std::cout << array.dump(2) << "\n";
    return 0;
  }
  if (none_at_all) {
    std::cerr << "no jobs yet; start one with: git mullet run -m \"TASK\"\n";
    return 0;
  }
  if (jobs.empty()) {
    std::cerr << "no job is " << util::join(states, " or ") << "\n";
    return 0;
  }
  std::cout << table(jobs);
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* sub = app.add_subcommand("list", "List jobs, newest first");
  sub->add_flag("--json", options->json, "Print a JSON array");
  sub->add_option("--state", options->states,
                  "Only jobs in STATE (running, succeeded, no_changes, failed, refused, cancelled, interrupted, "
                  "damaged); repeat it or give a comma list")
      ->delimiter(',')
      ->type_name("STATE");
  sub->add_option("-n,--max-count", options->count, "Only the newest N jobs")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  sub->callback([options, &chosen] { chosen = [options] { return list(*options); }; });
}

}  // namespace mullet::cli
