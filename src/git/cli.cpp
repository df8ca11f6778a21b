#include "git/cli.hpp"

#include <cstdlib>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

std::string git_program() {
  const char* path = std::getenv("PATH");
  std::string found = util::find_in_path("git", path != nullptr ? path : "/usr/bin:/bin");
  if (found.empty()) throw failure("git is not installed or not on PATH", "install git (apt-get install git)");
  return found;
}

}  // namespace

std::vector<std::string> hardened_git_prefix() {
  return {"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
          "-c", "core.sshCommand=false", "-c", "protocol.allow=never", "-c", "protocol.file.allow=always",
          "-c", "diff.external=", "-c", "core.pager=cat"};
}

util::Environment hardened_git_environment(const GitCliTarget& target) {
  util::Environment env;
  const char* path = std::getenv("PATH");
  env["PATH"] = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  env["LC_ALL"] = "C";
  env["GIT_CONFIG_NOSYSTEM"] = "1";
  env["GIT_CONFIG_GLOBAL"] = "/dev/null";
  env["GIT_ATTR_NOSYSTEM"] = "1";
  env["GIT_TERMINAL_PROMPT"] = "0";
  env["GIT_NO_REPLACE_OBJECTS"] = "1";
  env["GIT_DIR"] = target.git_dir;
  if (target.work_tree) env["GIT_WORK_TREE"] = *target.work_tree;
  if (!target.alternates.empty()) env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = util::join(target.alternates, ":");
  // Keep colours and the terminal width for output the user reads.
  if (const char* term = std::getenv("TERM")) env["TERM"] = term;
  if (const char* home = std::getenv("HOME")) env["HOME"] = home;
  return env;
}

util::CapturedRun run_git(const GitCliTarget& target, const std::vector<std::string>& args, const std::string& input) {
  util::SpawnOptions options;
  options.argv = {git_program()};
  for (auto& word : hardened_git_prefix()) options.argv.push_back(word);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = hardened_git_environment(target);
  if (target.work_tree) options.cwd = *target.work_tree;
  return util::run_capture(options, input);
}

util::ExitStatus run_git_passthrough(const GitCliTarget& target, const std::vector<std::string>& args) {
  util::SpawnOptions options;
  options.argv = {git_program()};
  for (auto& word : hardened_git_prefix()) options.argv.push_back(word);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = hardened_git_environment(target);
  options.stdout_fd = 1;
  options.stderr_fd = 2;
  return util::wait_for(util::spawn(options));
}

}  // namespace mullet::git
