#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/liveness.hpp"
#include "jobs/store.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

int list(bool json) {
  const git::Repository repo = open_repository();
  // Listing only reads our own summaries; checking every object's hash costs
  // a quarter of the time and guards nothing here.
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
  auto jobs = jobs::JobStore(repo).summaries();
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return a.record.created_at != b.record.created_at ? a.record.created_at > b.record.created_at : a.id < b.id;
  });
  if (json) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& job : jobs) {
      if (!job.damage.empty()) {
        array.push_back({{"id", job.id}, {"state", "damaged"}, {"error", job.damage}});
        continue;
      }
      nlohmann::json item = jobs::summary_json(job.record);
      item["state"] = jobs::state_name(jobs::effective_state(job.record));
      array.push_back(item);
    }
    std::cout << array.dump(2) << "\n";
    return 0;
  }
  std::string out;
  for (const auto& job : jobs) {
    const auto& record = job.record;
    std::string state = job.damage.empty() ? jobs::state_name(jobs::effective_state(record)) : "damaged";
    state.resize(std::max<std::size_t>(state.size(), 11), ' ');
    const std::string when = job.damage.empty() ? record.created_at : std::string(20, '-');
    out += job.id + "  " + state + "  " + when + "  " +
           (job.damage.empty() ? util::first_line(record.title, 60) : job.damage) + "\n";
  }
  // Titles are the job's (a fetched record's: anyone's).
  std::cout << util::terminal_safe(out);
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, Action& chosen) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("list", "List jobs, newest first");
  sub->add_flag("--json", *json, "Print a JSON array");
  sub->callback([json, &chosen] { chosen = [json] { return list(*json); }; });
}

}  // namespace mullet::cli
