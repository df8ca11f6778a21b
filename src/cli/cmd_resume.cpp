#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "jobs/run_job.hpp"
#include "jobs/store.hpp"

namespace mullet::cli {
namespace {

struct ResumeOptions {
  std::string job;
  bool json = false;
  bool quiet = false;
};

int resume(const ResumeOptions& options) {
  const git::Repository repo = open_repository();
  const auto job = jobs::JobStore(repo).find(options.job);
  const git_oid base = git::oid_from_string(job.record.base);
  // The configuration as a new job from the same base would have it, plus
  // what the job's own command line added (its command, setup, gates...).
  config::Config config = load_config(&repo, base);
  jobs::RunRequest request;
  const auto& flags = job.record.run_flags;
  if (const auto values = flags.find("config"); values != flags.end() && values->is_object()) {
    for (const auto& [key, value] : values->items()) {
      if (config.entries().count(key) == 0) continue;
      const std::string origin = "the command line of job " + job.record.id;
      if (value.is_string()) config.set_from_flag(key, value.get<std::string>(), origin);
      if (value.is_number_integer()) config.set_from_flag(key, value.get<std::int64_t>(), origin);
    }
  }
  if (const auto gates = flags.find("gates"); gates != flags.end() && gates->is_array()) {
    for (const auto& gate : *gates) {
      if (!gate.is_object() || !gate.contains("command") || !gate["command"].is_string()) continue;
      const bool named = gate.contains("name") && gate["name"].is_string();
      request.gates.push_back(
          {named ? gate["name"].get<std::string>() : "gate", gate["command"].get<std::string>(),
           gate.contains("timeout") && gate["timeout"].is_number_integer() ? gate["timeout"].get<std::int64_t>() : 0,
           "--gate"});
    }
  }
  request.show_worker_output = !options.quiet && !options.json;
  const auto outcome = jobs::resume_job(repo, config, job.record.id, request);
  print_run_outcome(outcome, options.json);
  return static_cast<int>(outcome.exit_code);
}

}  // namespace

void add_resume_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* sub =
      app.add_subcommand("resume", "Continue an interrupted, failed or cancelled job from its last snapshot");
  sub->add_option("JOB", options->job, "Job id or unique prefix")->required();
  sub->add_flag("--json", options->json, "Print the job record as one JSON object");
  sub->add_flag("-q,--quiet", options->quiet, "Do not echo the worker's output");
  sub->callback([options, &chosen] { chosen = [options] { return resume(*options); }; });
}

}  // namespace mullet::cli
