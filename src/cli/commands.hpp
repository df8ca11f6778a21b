// One function per subcommand (each in its own cmd_<name>.cpp).
#pragma once

#include "cli/common.hpp"

namespace mullet::cli {

void add_run_command(CLI::App& app, Action& chosen);
void add_list_command(CLI::App& app, Action& chosen);
void add_show_command(CLI::App& app, Action& chosen);
void add_diff_command(CLI::App& app, Action& chosen);
void add_log_command(CLI::App& app, Action& chosen);
void add_merge_command(CLI::App& app, Action& chosen);
void add_discard_command(CLI::App& app, Action& chosen);
void add_config_command(CLI::App& app, Action& chosen);
void add_doctor_command(CLI::App& app, Action& chosen);
void add_resume_command(CLI::App& app, Action& chosen);
void add_wait_command(CLI::App& app, Action& chosen);
void add_stop_command(CLI::App& app, Action& chosen);
void add_shell_command(CLI::App& app, Action& chosen);
// `git mullet __run-dispatched ID` (hidden): what a scheduler's batch job
// runs on its node: the queued job ID, taken up as a local job.
int run_dispatched(const std::string& id);

}  // namespace mullet::cli
