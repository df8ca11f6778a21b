#include "sandbox/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include "sandbox/bwrap.hpp"
#include "sandbox/doctor.hpp"
#include "sandbox/staging.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

constexpr int wall_check_failed_code = 121;

struct ProcInfo {
  pid_t parent = 0;
  std::uint64_t rss_pages = 0;
  char state = '?';  // R, S, D, T (stopped), t (tracing stop), Z, ...
};

std::map<pid_t, ProcInfo> read_processes() {
  std::map<pid_t, ProcInfo> processes;
  // Processes come and go while /proc is read: what cannot be read is left out.
  util::DirectoryReader listing(AT_FDCWD, "/proc");
  while (const auto entry = listing.next()) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->name.c_str()));
    if (pid <= 0) continue;
    const auto stat = util::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) continue;
    // Fields after the command name, which may contain spaces and ')'.
    const auto close = stat->rfind(')');
    if (close == std::string::npos) continue;
    const auto fields = util::split(stat->substr(close + 2), ' ');
    if (fields.size() < 22) continue;
    processes[pid] = ProcInfo{static_cast<pid_t>(std::atoi(fields[1].c_str())),
                              std::strtoull(fields[21].c_str(), nullptr, 10), fields[0].empty() ? '?' : fields[0][0]};
  }
  return processes;
}

// `root` and all its descendants.
std::set<pid_t> process_tree(pid_t root, const std::map<pid_t, ProcInfo>& processes) {
  std::set<pid_t> in_tree = {root};
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, info] : processes) {
      if (in_tree.count(pid) == 0 && in_tree.count(info.parent) > 0) {
        in_tree.insert(pid);
        grew = true;
      }
    }
  }
  return in_tree;
}

// True when no process inside the sandbox can ever run again: every one
// below bwrap is stopped or a zombie, and at least one is stopped (all
// zombies is bwrap about to reap them and end). Only a process inside could
// continue a stopped one, so a worker that stopped the sandbox's init (by
// ptrace-attaching it, say) and exited would otherwise hold the job until a
// limit.
bool sandbox_stalled(pid_t bwrap) {
  const auto processes = read_processes();
  bool any_stopped = false;
  for (const pid_t pid : process_tree(bwrap, processes)) {
    if (pid == bwrap) continue;
    const auto found = processes.find(pid);
    if (found == processes.end()) continue;
    const char state = found->second.state;
    if (state == 'T' || state == 't') {
      any_stopped = true;
    } else if (state != 'Z' && state != 'X') {
      return false;
    }
  }
  return any_stopped;
}

// Resident memory of `root` and all its descendants, in bytes.
std::uint64_t tree_resident_bytes(pid_t root) {
  const auto processes = read_processes();
  const std::set<pid_t> in_tree = process_tree(root, processes);
  std::uint64_t pages = 0;
  for (const pid_t pid : in_tree) {
    if (const auto found = processes.find(pid); found != processes.end()) pages += found->second.rss_pages;
  }
  return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// RLIMIT_NPROC counts every process of the uid on the host, so the cap is on
// top of what that uid already runs.
unsigned long processes_of_uid(uid_t uid) {
  unsigned long count = 0;
  util::DirectoryReader listing(AT_FDCWD, "/proc");
  while (const auto entry = listing.next()) {
    if (std::atoi(entry->name.c_str()) <= 0) continue;
    const auto status = util::read_proc_file("/proc/" + entry->name + "/status");
    if (!status) continue;
    const auto at = status->find("\nUid:\t");
    if (at != std::string::npos && static_cast<uid_t>(std::atoi(status->c_str() + at + 6)) == uid) ++count;
  }
  return count;
}

// Shared memory in use on the host (tmpfs files, memfd, SysV/POSIX shm), in
// bytes: memory a sandbox can hold without any of it in a process's RSS.
std::uint64_t host_shared_memory_bytes() {
  const auto meminfo = util::read_proc_file("/proc/meminfo").value_or("");
  const auto at = meminfo.find("\nShmem:");
  if (at == std::string::npos) return 0;
  return std::strtoull(meminfo.c_str() + at + 8, nullptr, 10) * 1024ULL;
}

}  // namespace

std::string find_bwrap() {
#ifndef __linux__
  throw refused_error("git-mullet runs workers only on Linux, inside bubblewrap; this platform is not supported",
                      "run git-mullet on a Linux machine; there is no unsandboxed mode");
#endif
  const std::string found = util::find_in_path("bwrap", util::host_path());
  if (found.empty()) {
    throw refused_error("bubblewrap (bwrap) is not installed, so no sandbox can be built; nothing was run",
                        "install it: apt-get install bubblewrap (there is no unsandboxed mode)");
  }
  return found;
}

RunResult run_sandboxed(const Plan& plan, const RunIo& io) {
  const std::string bwrap = find_bwrap();
  OpenedBinds binds = open_bind_sources(plan);
  Pipe report = make_pipe();
  Pipe output = make_pipe();
  const bool separate_errors = static_cast<bool>(io.on_error_output);
  Pipe errors = separate_errors ? make_pipe() : Pipe{};
  Pipe input = make_pipe();

  util::SpawnOptions options;
  std::vector<StagedBind> staged;
  if (plan.host_uid) {
    prepare_staging_mountpoint();
    for (std::size_t i = 0; i < binds.sources.size(); ++i) {
      auto& source = binds.sources[i];
      if (source.fd < 0) continue;
      source.staged_path = staged_path(i);
      staged.push_back({plan.mounts[i].source, source.staged_path, source.is_directory, -1});
    }
    options.child_setup = stage_binds_in_child;
    options.child_setup_data = &staged;
  }
  options.argv = {bwrap};
  for (auto& word : bwrap_arguments(plan, binds.sources, report.write_end.get())) options.argv.push_back(word);
  options.env = plan.env;
  options.stdin_fd = plan.feeds_stdin ? input.read_end.get() : -1;
  options.stdout_fd = output.write_end.get();
  options.stderr_fd = separate_errors ? errors.write_end.get() : output.write_end.get();
  for (const auto& source : binds.sources) {
    if (source.fd >= 0 && source.staged_path.empty()) options.keep_fds.push_back(source.fd);
  }
  options.keep_fds.push_back(report.write_end.get());
  options.die_with_parent = true;
  options.uid = plan.host_uid;
  options.gid = plan.host_gid;
  if (plan.limits.processes > 0) {
    const uid_t uid = plan.host_uid.value_or(::getuid());
    options.rlimits.emplace_back(RLIMIT_NPROC,
                                 processes_of_uid(uid) + static_cast<unsigned long>(plan.limits.processes));
  }
  options.rlimits.emplace_back(RLIMIT_CORE, 0UL);
  const std::uint64_t disk_bytes = static_cast<std::uint64_t>(plan.limits.disk_mb) * 1024ULL * 1024ULL;
  if (disk_bytes > 0) options.rlimits.emplace_back(RLIMIT_FSIZE, static_cast<unsigned long>(disk_bytes));
  std::vector<std::string> writable;
  for (const auto& mount : plan.mounts) {
    if (mount.kind == MountKind::writable_bind) writable.push_back(mount.source);
  }

  const std::uint64_t shared_memory_at_start = host_shared_memory_bytes();
  const std::int64_t started = util::monotonic_ms();
  util::Child child = util::spawn(options);
  const pid_t pid = child.pid();
  report.write_end.reset();
  output.write_end.reset();
  errors.write_end.reset();
  input.read_end.reset();
  binds.owned.clear();
  if (!plan.feeds_stdin || io.stdin_data.empty()) input.write_end.reset();
  if (input.write_end) ::fcntl(input.write_end.get(), F_SETFL, O_NONBLOCK);

  RunResult result;
  std::string report_text;
  std::string recent_output;
  std::size_t stdin_written = 0;
  std::int64_t last_activity = started;
  std::int64_t last_memory_check = started;
  std::int64_t last_stall_check = started;
  int stalled_checks = 0;
  std::int64_t last_disk_walk = started;
  // The exact walk runs as often as it stays cheap: every 250 ms for a small
  // tree, less often for a large one (at most ~5% of one core).
  std::int64_t disk_walk_interval = 250;
  std::int64_t last_disk_glance = started;
  // Free space of the file system holding the clone, as the job starts: a
  // cheap, frequent glance that also sees files unlinked while still open.
  const auto free_bytes = [&]() -> std::uint64_t {
    struct statvfs info {};
    if (writable.empty() || ::statvfs(writable.front().c_str(), &info) != 0) return 0;
    return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  };
  const std::uint64_t free_at_start = free_bytes();
  std::string kill_reason;
  char buffer[65536];
  auto kill_sandbox = [&](const std::string& reason) {
    if (kill_reason.empty()) {
      kill_reason = reason;
      child.kill(SIGKILL);
    }
  };

  while (output.read_end || errors.read_end || report.read_end) {
    pollfd fds[4];
    nfds_t count = 0;
    int output_index = -1;
    int errors_index = -1;
    int report_index = -1;
    int input_index = -1;
    if (output.read_end) {
      output_index = static_cast<int>(count);
      fds[count++] = {output.read_end.get(), POLLIN, 0};
    }
    if (errors.read_end) {
      errors_index = static_cast<int>(count);
      fds[count++] = {errors.read_end.get(), POLLIN, 0};
    }
    if (report.read_end) {
      report_index = static_cast<int>(count);
      fds[count++] = {report.read_end.get(), POLLIN, 0};
    }
    if (input.write_end) {
      input_index = static_cast<int>(count);
      fds[count++] = {input.write_end.get(), POLLOUT, 0};
    }
    const int ready = ::poll(fds, count, 250);
    if (ready < 0 && errno != EINTR) throw failure("poll failed: " + util::errno_text(errno));
    const std::int64_t now = util::monotonic_ms();
    if (ready > 0) {
      const auto drain = [&](UniqueFd& fd, const std::function<void(std::string_view)>& deliver) {
        const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
        if (got > 0) {
          const std::string_view chunk(buffer, static_cast<std::size_t>(got));
          last_activity = now;
          recent_output.append(chunk);
          if (recent_output.size() > 16384) recent_output.erase(0, recent_output.size() - 8192);
          if (deliver) deliver(chunk);
        } else if (got == 0 || errno != EINTR) {
          fd.reset();
        }
      };
      if (output_index >= 0 && fds[output_index].revents != 0) drain(output.read_end, io.on_output);
      if (errors_index >= 0 && fds[errors_index].revents != 0) drain(errors.read_end, io.on_error_output);
      if (report_index >= 0 && fds[report_index].revents != 0) {
        const ssize_t got = ::read(report.read_end.get(), buffer, sizeof buffer);
        if (got > 0 && report_text.size() < 4096) {
          report_text.append(buffer, static_cast<std::size_t>(got));
        } else if (got == 0 || (got < 0 && errno != EINTR)) {
          report.read_end.reset();
        }
      }
      if (input_index >= 0 && fds[input_index].revents != 0) {
        const ssize_t put =
            ::write(input.write_end.get(), io.stdin_data.data() + stdin_written, io.stdin_data.size() - stdin_written);
        if (put > 0) stdin_written += static_cast<std::size_t>(put);
        if ((put < 0 && errno != EAGAIN && errno != EINTR) || stdin_written >= io.stdin_data.size()) {
          input.write_end.reset();
        }
      }
    }
    if (util::cancel_requested()) kill_sandbox("cancelled");
    if (io.poll) {
      if (const std::string reason = io.poll(); !reason.empty()) kill_sandbox(reason);
    }
    if (plan.limits.wall_seconds > 0 && now - started > plan.limits.wall_seconds * 1000) kill_sandbox("timeout");
    if (plan.limits.inactivity_seconds > 0 && now - last_activity > plan.limits.inactivity_seconds * 1000) {
      kill_sandbox("inactivity");
    }
    if (plan.limits.memory_mb > 0 && now - last_memory_check >= 500) {
      last_memory_check = now;
      // The growth of the host's shared memory counts too: a memfd or a file in
      // one of the sandbox's tmpfs mounts is memory no RSS shows.
      const std::uint64_t shared_now = host_shared_memory_bytes();
      const std::uint64_t shared_growth = shared_now > shared_memory_at_start ? shared_now - shared_memory_at_start : 0;
      if (tree_resident_bytes(pid) + shared_growth >
          static_cast<std::uint64_t>(plan.limits.memory_mb) * 1024ULL * 1024ULL) {
        kill_sandbox("memory");
      }
    }
    if (now - last_stall_check >= 500) {
      last_stall_check = now;
      // Twice in a row: /proc is read one process at a time, not at once.
      stalled_checks = sandbox_stalled(pid) ? stalled_checks + 1 : 0;
      if (stalled_checks >= 2) kill_sandbox("stalled");
    }
    if (disk_bytes > 0 && now - last_disk_glance >= 250) {
      last_disk_glance = now;
      const std::uint64_t free_now = free_bytes();
      const std::uint64_t consumed = free_at_start > free_now ? free_at_start - free_now : 0;
      // Other writers share the file system, so the glance alone only ends a
      // job at twice the limit; past the limit it brings the exact walk forward.
      if (consumed > 2 * disk_bytes) kill_sandbox("disk");
      if (consumed > disk_bytes || now - last_disk_walk >= disk_walk_interval) {
        last_disk_walk = now;
        std::uint64_t used = io.disk_bytes_outside ? io.disk_bytes_outside() : 0;
        for (const auto& path : writable) used += util::disk_usage(path, disk_bytes);
        if (used > disk_bytes) kill_sandbox("disk");
        disk_walk_interval = std::clamp<std::int64_t>(20 * (util::monotonic_ms() - now), 250, 5000);
      }
    }
  }
  input.write_end.reset();
  result.status = child.wait();
  result.duration_ms = util::monotonic_ms() - started;

  if (report_text.rfind("ok\n", 0) != 0 && kill_reason.empty()) {
    std::string why = util::trim(report_text.rfind("fail: ", 0) == 0 ? report_text.substr(6) : recent_output);
    if (why.empty()) why = "bubblewrap ended (" + result.status.describe() + ") before the sandbox was ready";
    throw refused_error("the sandbox for the " + plan.phase + " phase could not be set up, so nothing ran: " + why,
                        diagnose_bwrap_failure(why));
  }
  if (!kill_reason.empty()) {
    result.ended_by = kill_reason;
  } else if (result.status.exited() && result.status.code == wall_check_failed_code && report_text != "ok\n") {
    result.ended_by = "refused";
  } else if (result.status.signal == SIGXFSZ || result.status.code == 128 + SIGXFSZ) {
    result.ended_by = "disk";
  } else {
    result.ended_by = result.status.exited() ? "exit" : "signal";
  }
  return result;
}

}  // namespace mullet::sandbox
