#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
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

// `scheduler`: the scheduler's answer for all dispatched jobs, asked once.
std::string shown_state(const jobs::JobSummary& job, const jobs::SchedulerTable& scheduler) {
  return job.damage.empty() ? jobs::state_name(jobs::effective_state(job.record, &scheduler)) : damaged_state;
}

// A job in the list's order, with its creation time (every job's is needed
// to order them, and the shown ones' again for their age).
struct Listed {
  const jobs::JobSummary* job = nullptr;
  std::optional<std::int64_t> created_ms;  // unset for a damaged record, whose times are not trusted
};

// Newest first: by creation time to the millisecond, then by the
// repository's sequence (two jobs in one tick), then by id; damaged records
// last. The order is of pointers into `jobs`: summaries are large, and ten
// thousand of them are not moved to be listed.
std::vector<Listed> newest_first(const std::vector<jobs::JobSummary>& jobs) {
  struct Keyed {
    bool trusted;
    std::int64_t created_ms;
    std::int64_t sequence;
    Listed listed;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(jobs.size());
  for (const auto& job : jobs) {
    const bool trusted = job.damage.empty();
    const auto created = trusted ? job.created_ms : std::nullopt;
    keyed.push_back(Keyed{trusted, created.value_or(0), job.record.sequence, Listed{&job, created}});
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    const auto key = [](const Keyed& k) { return std::tie(k.trusted, k.created_ms, k.sequence); };
    return key(a) != key(b) ? key(a) > key(b) : a.listed.job->id < b.listed.job->id;
  });
  std::vector<Listed> order;
  order.reserve(keyed.size());
  for (const auto& entry : keyed) order.push_back(entry.listed);
  return order;
}

std::vector<std::string> wanted_states(const std::vector<std::string>& given) {
  std::vector<std::string> known;
  for (int state = 0; state <= static_cast<int>(jobs::JobState::queued); ++state) {
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

constexpr std::size_t table_columns = 7;

// "+12 -3", made without temporaries (ten thousand rows).
std::string change_counts(const jobs::ChangeStats& changes) {
  char insertions[24];
  char deletions[24];
  char* insertions_end = std::to_chars(std::begin(insertions), std::end(insertions), changes.insertions).ptr;
  char* deletions_end = std::to_chars(std::begin(deletions), std::end(deletions), changes.deletions).ptr;
  std::string text;
  text.reserve(static_cast<std::size_t>(insertions_end - insertions + deletions_end - deletions) + 3);
  text += '+';
  text.append(std::begin(insertions), insertions_end);
  text += " -";
  text.append(std::begin(deletions), deletions_end);
  return text;
}

// Appends the job's row: id, state, age, duration, cost, changes and title
// (or what is damaged). Only the last cell is the job's own text (a fetched
// record's: anyone's): it is made safe here, before it is measured; the
// others are ours.
void append_row(std::vector<std::string>& cells, const Listed& listed, std::int64_t now_ms,
                const jobs::SchedulerTable& scheduler) {
  const auto& job = *listed.job;
  const auto& record = job.record;
  if (!job.damage.empty()) {
    for (const char* cell : {"", damaged_state, "-", "-", "-", "-"}) cells.emplace_back(cell);
    cells[cells.size() - 6] = job.id;
    cells.push_back(util::terminal_safe(job.damage));
    return;
  }
  const auto& created = listed.created_ms;
  const auto finished = util::parse_utc_ms(record.finished_at);
  const jobs::JobState state = jobs::effective_state(record, &scheduler);
  cells.push_back(job.id);
  cells.push_back(jobs::state_name(state));
  cells.push_back(created ? util::format_elapsed(now_ms - *created) : "-");
  if (created && state == jobs::JobState::running) {
    cells.push_back(util::format_elapsed(now_ms - *created));
  } else if (created && finished) {
    cells.push_back(util::format_elapsed(*finished - *created));
  } else {
    cells.emplace_back("-");
  }
  cells.push_back(record.cost_usd ? "$" + util::format_decimal(*record.cost_usd, 2) : "-");
  cells.push_back(record.changes ? change_counts(*record.changes) : "-");
  // A job of several nodes is one line, its title led by how its nodes did.
  cells.push_back(util::terminal_safe(
      record.nodes.empty() ? record.title : "[" + jobs::nodes_summary(record, &scheduler) + "] " + record.title));
}

// One line per job; on a terminal a header and titles cut to the width.
// Piped, no header, so every line is a job.
std::string table(const std::vector<Listed>& jobs, const jobs::SchedulerTable& scheduler) {
  const std::size_t columns = terminal_columns();
  std::vector<std::string> cells;
  cells.reserve((jobs.size() + 1) * table_columns);
  if (columns > 0) {
    for (const char* heading : {"ID", "STATE", "AGE", "DURATION", "COST", "CHANGES", "TITLE"}) {
      cells.emplace_back(heading);
    }
  }
  const std::int64_t now = util::epoch_ms();
  for (const auto& listed : jobs) append_row(cells, listed, now, scheduler);
  std::vector<std::size_t> widths(table_columns - 1, 0);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::size_t column = i % table_columns;
    if (column + 1 < table_columns) widths[column] = std::max(widths[column], display_width(cells[i]));
  }
  std::size_t used = 0;
  for (const auto width : widths) used += width + 2;
  constexpr std::size_t least_title = 12;
  const std::size_t title_room = columns > used + least_title ? columns - used : least_title;
  std::string out;
  out.reserve(cells.size() / table_columns * (used + 64));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::size_t column = i % table_columns;
    if (column + 1 == table_columns) {
      out += columns > 0 ? cut_to_width(cells[i], title_room) : cells[i];
      out += '\n';
      continue;
    }
    out += cells[i];
    out.append(widths[column] - display_width(cells[i]) + 2, ' ');
  }
  return out;
}

int list(const ListOptions& options) {
  const auto states = wanted_states(options.states);
  const git::Repository repo = open_repository();
  // Listing only reads our own summaries; checking every object's hash costs
  // a quarter of the time and guards nothing here.
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
  const auto summaries = jobs::JobStore(repo).summaries();
  const bool none_at_all = summaries.empty();
  // The scheduler is asked once for every dispatched job (and each node of
  // a job array), never once per job.
  std::vector<const jobs::RecordSummary*> trusted;
  for (const auto& job : summaries) {
    if (job.damage.empty()) trusted.push_back(&job.record);
  }
  const jobs::SchedulerTable scheduler = jobs::ask_scheduler(trusted);
  auto jobs = newest_first(summaries);
  if (!states.empty()) {
    std::erase_if(jobs, [&](const Listed& listed) {
      return std::find(states.begin(), states.end(), shown_state(*listed.job, scheduler)) == states.end();
    });
  }
  if (options.count > 0 && jobs.size() > static_cast<std::size_t>(options.count)) {
    jobs.resize(static_cast<std::size_t>(options.count));
  }
  if (options.json) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& listed : jobs) {
      const auto& job = *listed.job;
      if (!job.damage.empty()) {
        array.push_back({{"id", job.id}, {"state", damaged_state}, {"error", job.damage}});
        continue;
      }
      nlohmann::json item = jobs::summary_json(job.record);
      item["state"] = shown_state(job, scheduler);
      for (std::size_t n = 0; n < job.record.nodes.size() && item.contains("nodes"); ++n) {
        item["nodes"][n]["state"] =
            jobs::state_name(jobs::effective_node_state(job.record, job.record.nodes[n], &scheduler));
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
  std::cout << table(jobs, scheduler);
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
