#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "git/cli.hpp"
#include "jobs/store.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

int diff(const std::string& job_name) {
  const git::Repository repo = open_repository();
  const auto job = jobs::JobStore(repo).find(job_name);
  if (job.record.result.empty()) {
    std::cerr << "job " << job.record.id << " has no changes\n";
    return 0;
  }
  // The patch is the worker's file content. Into a pipe or a file it goes as
  // it is (it may be applied); on a terminal every control sequence is
  // neutralised but git's own colours. The store checked that both are
  // commits; diff_args keeps them from being read as options all the same.
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  util::TerminalSafeStream shown(/*keep_colours=*/true);
  const auto show = [&](std::string_view chunk) {
    const std::string text = shown.feed(chunk);
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  };
  const auto status = git::run_git_passthrough({repo.git_dir(), std::nullopt, {}},
                                               git::diff_args(job.record.base, job.record.result, terminal),
                                               terminal ? std::function<void(std::string_view)>(show) : nullptr);
  std::cout << shown.finish() << std::flush;
  return status.success() ? 0 : 1;
}

}  // namespace

void add_diff_command(CLI::App& app, Action& chosen) {
  auto job = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("diff", "Show what a job changed against its base");
  sub->add_option("JOB", *job, "Job id or unique prefix")->required();
  sub->callback([job, &chosen] { chosen = [job] { return diff(*job); }; });
}

}  // namespace mullet::cli
