#include "sandbox/wall_check.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "net/bridge.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

extern char** environ;

namespace mullet::sandbox {
namespace {

constexpr int failed_code = 121;

// The names in directory `path`, or what kept it from being read whole: a
// listing cut short must not pass for an empty directory.
struct Listing {
  std::vector<std::string> names;
  std::string problem;
};

Listing list_directory(const std::string& path) {
  Listing listing;
  util::DirectoryReader reader(AT_FDCWD, path);
  for (auto& entry : reader.read_all()) listing.names.push_back(std::move(entry.name));
  if (!reader.is_open()) {
    listing.problem = path + " is not there to hide what the host has";
  } else if (reader.error() != 0) {
    listing.problem = path + " cannot be listed: " + util::errno_text(reader.error());
  }
  return listing;
}

// A sealed directory can be neither listed nor given another mode (the
// chmod asks for the mode it must already have, so even a wall that failed
// this way changes nothing).
std::string check_sealed(const std::string& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return dir + " is not there";
  if ((info.st_mode & 07777) != 0111) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return dir + " has mode " + mode + ", not 0111";
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return dir + " can be listed";
  }
  if (::chmod(dir.c_str(), 0111) == 0) return dir + " can be given another mode";
  return {};
}

// Returns an empty string when the walls hold, else what is wrong.
std::string check_walls(const std::vector<std::string>& empty_dirs, const std::vector<std::string>& sealed_dirs,
                        const std::set<std::string>& allowed_env) {
  // The root is read-only.
  for (const char* probe : {"/.mullet-wall-probe", "/usr/.mullet-wall-probe", "/etc/.mullet-wall-probe"}) {
    if (::mkdir(probe, 0700) == 0) {
      ::rmdir(probe);
      return std::string("the root file system is writable (created ") + probe + ")";
    }
  }
  for (const auto& dir : empty_dirs) {
    const auto listing = list_directory(dir);
    if (!listing.problem.empty()) return listing.problem;
    if (!listing.names.empty()) return dir + " is not empty (" + listing.names.front() + " is visible)";
  }
  for (const auto& dir : sealed_dirs) {
    if (auto problem = check_sealed(dir); !problem.empty()) return problem;
  }
  const char* tmpdir = std::getenv("TMPDIR");
  const auto tmp_listing = list_directory("/tmp");
  if (!tmp_listing.problem.empty()) return tmp_listing.problem;
  const std::string tmp_prefix = "/tmp/";
  const std::string tmpdir_value = tmpdir != nullptr ? tmpdir : "";
  const std::string own_tmp =
      tmpdir_value.rfind(tmp_prefix, 0) == 0 ? tmpdir_value.substr(tmp_prefix.size()) : std::string();
  for (const auto& name : tmp_listing.names) {
    if (name != own_tmp) return "/tmp shows the host's " + name;
  }
  // No capabilities, and no way to gain any.
  const auto status = util::read_file_if_exists("/proc/self/status").value_or("");
  for (const char* field : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
    const auto at = status.find(field);
    if (at == std::string::npos) return std::string("cannot read ") + field + " from /proc/self/status";
    const auto value =
        util::trim(status.substr(at + std::strlen(field), status.find('\n', at) - at - std::strlen(field)));
    if (value.find_first_not_of('0') != std::string::npos) return std::string(field) + " is " + value + ", not 0";
  }
  if (status.find("NoNewPrivs:\t1") == std::string::npos) return "no_new_privs is not set";
  // Not the host's root: a file only root may read stays unreadable.
  const int shadow = ::open("/etc/shadow", O_RDONLY | O_CLOEXEC);
  if (shadow >= 0) {
    ::close(shadow);
    return "/etc/shadow is readable: the sandbox runs with root's file access";
  }
  // No network interface but loopback.
  const auto devices = util::read_file_if_exists("/proc/net/dev").value_or("");
  const auto lines = util::split(devices, '\n');
  for (std::size_t i = 2; i < lines.size(); ++i) {
    const auto name = util::trim(lines[i].substr(0, lines[i].find(':')));
    if (!name.empty() && name != "lo") return "network interface " + name + " is present";
  }
  // Only the environment we built.
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string pair = *entry;
    const std::string name = pair.substr(0, pair.find('='));
    if (allowed_env.count(name) == 0) return "environment variable " + name + " was not in the plan";
  }
  return {};
}

// Forks the bridge to the egress proxy and waits until it listens, so the
// command never starts before its way out exists. It lives until the sandbox's
// pid namespace ends with the command.
std::string start_bridge(int port, const std::string& socket_path, int report_fd) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return "cannot start the network bridge: " + util::errno_text(errno);
  const pid_t pid = ::fork();
  if (pid < 0) return "cannot start the network bridge: " + util::errno_text(errno);
  if (pid == 0) {
    ::close(ready[0]);
    ::close(report_fd);
    ::_exit(net::run_bridge(port, socket_path, [&] {
      [[maybe_unused]] auto ignored = ::write(ready[1], "r", 1);
      ::close(ready[1]);
    }));
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  if (got != 1) return "the network bridge did not start";
  return {};
}

}  // namespace

int wall_check_main(const std::vector<std::string>& args) {
  int report_fd = -1;
  std::vector<std::string> empty_dirs;
  std::vector<std::string> sealed_dirs;
  std::set<std::string> allowed_env;
  std::vector<std::string> bridges;  // "PORT:SOCKET" each
  bool terminal = false;
  std::size_t index = 0;
  for (; index < args.size(); ++index) {
    const std::string& arg = args[index];
    if (arg == "--") {
      ++index;
      break;
    }
    if (arg == "--terminal") {
      terminal = true;
      continue;
    }
    if (index + 1 >= args.size()) break;
    if (arg == "--report-fd")
      report_fd = std::atoi(args[++index].c_str());
    else if (arg == "--empty")
      empty_dirs.push_back(args[++index]);
    else if (arg == "--sealed")
      sealed_dirs.push_back(args[++index]);
    else if (arg == "--env")
      allowed_env.insert(args[++index]);
    else if (arg == "--bridge")
      bridges.push_back(args[++index]);
  }
  std::vector<std::string> command(args.begin() + static_cast<std::ptrdiff_t>(std::min(index, args.size())),
                                   args.end());
  auto report = [&](const std::string& text) {
    if (report_fd < 0) return;
    [[maybe_unused]] auto ignored = ::write(report_fd, text.data(), text.size());
  };
  std::string problem = report_fd < 0 ? "no report descriptor" : check_walls(empty_dirs, sealed_dirs, allowed_env);
  if (problem.empty() && command.empty()) problem = "no command to run";
  // An interactive shell's terminal: the pty the host gave as stdin becomes
  // the controlling terminal of a session of our own (bwrap's --new-session
  // session is led by its init, pid 1), so job control works and /dev/tty is
  // that pty.
  if (problem.empty() && terminal && (::setsid() < 0 || ::ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0)) {
    problem = "cannot make the terminal it was given its own: " + util::errno_text(errno);
  }
  if (!problem.empty()) {
    report("fail: wall check: " + problem + "\n");
    std::fprintf(stderr, "git-mullet wall check failed: %s\n", problem.c_str());
    return failed_code;
  }
  for (const auto& bridge : bridges) {
    const auto colon = bridge.find(':');
    problem = start_bridge(std::atoi(bridge.substr(0, colon).c_str()), bridge.substr(colon + 1), report_fd);
    if (!problem.empty()) {
      report("fail: " + problem + "\n");
      std::fprintf(stderr, "git-mullet: %s\n", problem.c_str());
      return failed_code;
    }
  }
  report("ok\n");
  // Nothing of ours reaches the command: not the report pipe, not any
  // descriptor bubblewrap may have left open.
  ::close_range(3, ~0U, 0);
  std::vector<char*> argv;
  for (auto& word : command) argv.push_back(word.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "git-mullet: cannot run %s: %s\n", argv[0], std::strerror(errno));
  return 127;
}

}  // namespace mullet::sandbox
