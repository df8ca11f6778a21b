#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "git/cli.hpp"
#include "git/diff_options.hpp"
#include "jobs/store.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

struct DiffOptions {
  std::string job;
  std::vector<std::string> passed;  // git diff's options and paths, as given
};

int diff(const DiffOptions& options) {
  const auto request = value_or_throw(git::parse_diff_request(options.passed));
  const git::Repository repo = open_repository();
  const auto job = find_addressed(jobs::JobStore(repo), options.job);
  if (job.record.result.empty()) {
    std::cerr << "job " << job.label << " has no changes\n";
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
  const auto status = git::run_git_passthrough(
      {repo.git_dir(), std::nullopt, {}},
      git::diff_args(job.record.base, job.record.result, terminal, request.options, request.paths),
      terminal ? std::function<void(std::string_view)>(show) : nullptr);
  std::cout << shown.finish() << std::flush;
  return status.success() ? 0 : 1;
}

}  // namespace

void add_diff_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Show what a job changed against its base; git diff options and -- paths after JOB are passed to it");
  sub->add_option("JOB", options->job, "Job id or unique prefix; JOB/N for node N of a job of several")->required();
  // Everything after JOB is git diff's, checked by parse_diff_request.
  // CLI11 leaves the options it does not know (in their order) and takes
  // the words that are not options, and those after `--`, as PATHS (hidden:
  // the help names them in the description).
  auto paths = std::make_shared<std::vector<std::string>>();
  sub->add_option("PATHS", *paths, "git diff paths")->group("");
  sub->prefix_command();
  sub->callback([options, paths, sub, &chosen] {
    for (auto& word : sub->remaining()) {
      if (word != "--") options->passed.push_back(word);
    }
    options->passed.emplace_back("--");
    options->passed.insert(options->passed.end(), paths->begin(), paths->end());
    chosen = [options] { return diff(*options); };
  });
}

}  // namespace mullet::cli
