#include "git/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

std::string git_program() {
  std::string found = util::find_in_path("git", util::host_path());
  if (found.empty()) throw failure("git is not installed or not on PATH", "install git (apt-get install git)");
  return found;
}

}  // namespace

std::string alternates_value(const std::vector<std::string>& dirs) {
  std::vector<std::string> entries;
  for (const auto& dir : dirs) {
    // git splits the list on ':' and reads a C-quoted entry as one path.
    if (dir.find(':') == std::string::npos && (dir.empty() || dir[0] != '"')) {
      entries.push_back(dir);
      continue;
    }
    std::string quoted = "\"";
    for (const char c : dir) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    entries.push_back(quoted + "\"");
  }
  return util::join(entries, ":");
}

namespace {

void collect_borrowed(const std::string& objects_dir, int depth, std::vector<std::string>& found) {
  if (depth > 5) return;
  const auto text = util::read_file_if_exists(objects_dir + "/info/alternates");
  if (!text) return;
  for (auto line : util::split(*text, '\n')) {
    line = util::trim(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string path = line[0] == '/' ? line : objects_dir + "/" + line;
    if (!util::is_directory(path) && !util::exists(path)) continue;
    const std::string real = util::real_path(path);
    if (std::find(found.begin(), found.end(), real) != found.end()) continue;
    found.push_back(real);
    collect_borrowed(real, depth + 1, found);
  }
}

}  // namespace

std::vector<std::string> borrowed_object_dirs(const std::string& objects_dir) {
  std::vector<std::string> found;
  collect_borrowed(objects_dir, 1, found);
  return found;
}

std::vector<std::string> hardened_git_prefix() {
  return {"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
          "-c", "core.sshCommand=false",    "-c", "protocol.allow=never", "-c", "protocol.file.allow=always",
          "-c", "diff.external=",           "-c", "core.pager=cat"};
}

util::Environment hardened_git_environment(const GitCliTarget& target) {
  // Built by construction and emplace, not by assigning literals to
  // env[name]: GCC 12 at -O3 reports a false -Wrestrict inside the inlined
  // std::string assignment.
  util::Environment env = {{"PATH", util::host_path()},     {"LC_ALL", "C"},
                           {"GIT_CONFIG_NOSYSTEM", "1"},    {"GIT_CONFIG_GLOBAL", "/dev/null"},
                           {"GIT_ATTR_NOSYSTEM", "1"},      {"GIT_TERMINAL_PROMPT", "0"},
                           {"GIT_NO_REPLACE_OBJECTS", "1"}, {"GIT_DIR", target.git_dir}};
  if (target.work_tree) env.emplace("GIT_WORK_TREE", *target.work_tree);
  if (target.index_file) env.emplace("GIT_INDEX_FILE", *target.index_file);
  if (target.object_directory) env.emplace("GIT_OBJECT_DIRECTORY", *target.object_directory);
  if (target.user_config) {
    env.erase("GIT_CONFIG_NOSYSTEM");
    env.erase("GIT_CONFIG_GLOBAL");
    for (const char* name : {"GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_PARAMETERS",
                             "GIT_CONFIG_COUNT", "XDG_CONFIG_HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                             "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"}) {
      if (const char* value = std::getenv(name)) env.emplace(name, value);
    }
    // `git -c` as GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>.
    const char* count = std::getenv("GIT_CONFIG_COUNT");
    const long entries = count != nullptr ? std::strtol(count, nullptr, 10) : 0;
    for (long i = 0; i < std::min(entries, 1000L); ++i) {
      for (const char* prefix : {"GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}) {
        const std::string name = prefix + std::to_string(i);
        if (const char* value = std::getenv(name.c_str())) env.emplace(name, value);
      }
    }
  }
  if (!target.alternates.empty()) env.emplace("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates_value(target.alternates));
  // Keep colours and the terminal width for output the user reads.
  if (const char* term = std::getenv("TERM")) env.emplace("TERM", term);
  if (const char* home = std::getenv("HOME")) env.emplace("HOME", home);
  return env;
}

std::vector<std::string> diff_args(const std::string& from, const std::string& to, bool for_terminal,
                                   const std::vector<std::string>& options, const std::vector<std::string>& paths) {
  std::vector<std::string> args = {"diff"};
  if (options.empty()) {
    args.emplace_back("--stat");
    args.emplace_back("--patch");
  }
  args.insert(args.end(), options.begin(), options.end());
  // No external diff drivers or textconv: their commands would come from
  // attributes in a tree the worker wrote. After the user's options: the
  // last one wins.
  args.emplace_back("--no-ext-diff");
  args.emplace_back("--no-textconv");
  if (for_terminal) {
    // Our filter keeps only git's own colours; its one background colour
    // (whitespace errors) would be escaped.
    args.emplace_back("--color=always");
    args.emplace_back("--ws-error-highlight=none");
  }
  for (const auto& word : {std::string("--end-of-options"), from, to, std::string("--")}) args.push_back(word);
  args.insert(args.end(), paths.begin(), paths.end());
  return args;
}

std::vector<std::string> read_tree_args(const std::string& tree_ish) {
  // read-tree -u goes through git's parallel checkout (checkout.workers=0:
  // one worker per core), the fastest way to fill a work tree.
  return {"-c", "checkout.workers=0", "read-tree", "--reset", "-u", "--end-of-options", tree_ish};
}

std::vector<std::string> create_ref_args(const std::string& ref, const std::string& commit,
                                         const std::string& message) {
  // A concurrent creator holds the ref's lock only briefly: wait for it, so
  // the loser sees the ref exists instead of a lock error.
  return {"-c",
          "core.filesRefLockTimeout=10000",
          "update-ref",
          "-m",
          message,
          "--end-of-options",
          ref,
          commit,
          std::string(40, '0')};
}

util::CapturedRun run_git(const GitCliTarget& target, const std::vector<std::string>& args, const std::string& input) {
  util::SpawnOptions options;
  options.argv = {git_program()};
  for (auto& word : hardened_git_prefix()) options.argv.push_back(word);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = hardened_git_environment(target);
  if (target.work_tree) options.cwd = *target.work_tree;
  // No deadline: a checkout of a huge repository is legitimately slow. The
  // user can stop it, and the job then ends as cancelled.
  return util::run_capture(options, input, {0, true});
}

util::ExitStatus run_git_passthrough(const GitCliTarget& target, const std::vector<std::string>& args,
                                     const std::function<void(std::string_view)>& on_stdout) {
  util::SpawnOptions options;
  options.argv = {git_program()};
  for (auto& word : hardened_git_prefix()) options.argv.push_back(word);
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = hardened_git_environment(target);
  options.stdout_fd = 1;
  options.stderr_fd = 2;
  if (!on_stdout) return util::spawn(options).wait();
  Pipe output = make_pipe();
  options.stdout_fd = output.write_end.get();
  util::Child child = util::spawn(options);
  output.write_end.reset();
  char buffer[65536];
  while (true) {
    const ssize_t got = ::read(output.read_end.get(), buffer, sizeof buffer);
    if (got > 0) {
      on_stdout(std::string_view(buffer, static_cast<std::size_t>(got)));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  output.read_end.reset();
  return child.wait();
}

}  // namespace mullet::git
