#include "sandbox/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include "sandbox/bwrap.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/disk_image.hpp"
#include "sandbox/doctor.hpp"
#include "sandbox/fuse_overlay.hpp"
#include "sandbox/overlay.hpp"
#include "sandbox/staging.hpp"
#include "sandbox/syscall_filter.hpp"
#include "sandbox/watchdogs.hpp"
#include "util/clock.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/poll_loop.hpp"
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

// The wall check's report: "ok\n", or "fail: <why>".
constexpr std::size_t report_cap = 4096;
// The end of the output, kept to explain a sandbox that never became ready.
constexpr std::size_t recent_output_cap = 16384;
constexpr std::size_t recent_output_kept = 8192;

std::uint64_t disk_limit_bytes(const Plan& plan) {
  return static_cast<std::uint64_t>(plan.limits.disk_mb) * 1024ULL * 1024ULL;
}

// What the sandbox can write to on the host: an overlaid work tree's writes
// land in its upper dir (its mount point stays empty on the host).
std::vector<std::string> writable_binds(const Plan& plan) {
  std::vector<std::string> writable;
  for (const auto& mount : plan.mounts) {
    if (mount.kind != MountKind::writable_bind) continue;
    const bool overlaid = plan.work_tree_overlay && mount.destination == inside::work_tree;
    writable.push_back(overlaid ? plan.work_tree_overlay->upper : mount.source);
  }
  return writable;
}

// The pipes between us and bwrap.
struct SandboxPipes {
  Pipe report;  // the wall check's
  Pipe output;  // stdout, and stderr unless `errors` is open
  Pipe errors;  // only when the caller takes stderr apart
  Pipe input;
};

SandboxPipes make_sandbox_pipes(bool separate_errors) {
  SandboxPipes pipes;
  pipes.report = make_pipe();
  pipes.output = make_pipe();
  if (separate_errors) pipes.errors = make_pipe();
  pipes.input = make_pipe();
  return pipes;
}

// The index of the work tree's bind in plan.mounts.
std::size_t work_tree_mount(const Plan& plan) {
  for (std::size_t i = 0; i < plan.mounts.size(); ++i) {
    if (plan.mounts[i].kind == MountKind::writable_bind && plan.mounts[i].destination == inside::work_tree) return i;
  }
  throw failure("internal error: a plan with an overlay has no work tree bind");
}

// What the child mounts before bwrap starts; must outlive the spawn.
struct ChildMounts {
  Staging staging;
  std::optional<OverlayChild> overlay;
  std::optional<LoopMountChild> disk;
  FuseDaemon fuse;  // a fuse-overlayfs work tree's daemon, ended with the sandbox
};

// How bwrap is started. Run as root, the binds are staged for the sandbox's
// uid; an overlaid work tree is mounted in the child first (`mounts` is
// filled for the child).
util::SpawnOptions bwrap_options(const Plan& plan, const std::string& bwrap, OpenedBinds& binds,
                                 const SandboxPipes& pipes, const UniqueFd* terminal, ChildMounts& mounts,
                                 const UniqueFd& syscall_filter, const std::vector<int>& cgroup_procs_fds) {
  util::SpawnOptions options;
  if (plan.work_tree_overlay && plan.work_tree_overlay->fuse) {
    if (!plan.host_uid || !plan.host_gid) {
      throw refused_error("fuse-overlayfs serves a work tree only when git-mullet runs as root; nothing was run",
                          "set [sandbox] work_tree = \"auto\" or \"checkout\"");
    }
    mounts.fuse = start_fuse_overlay(*plan.work_tree_overlay, plan.mounts[work_tree_mount(plan)].source, *plan.host_uid,
                                     *plan.host_gid, cgroup_procs_fds);
    mounts.staging.join_mount_ns = mounts.fuse.mount_ns.get();
  } else if (plan.work_tree_overlay) {
    const std::size_t index = work_tree_mount(plan);
    mounts.overlay =
        prepare_overlay_child(*plan.work_tree_overlay, plan.mounts[index].source, /*user_namespace=*/!plan.host_uid);
    mounts.overlay->work_tree_fd = binds.sources[index].fd;
    if (!plan.host_uid) {
      options.child_setup = overlay_in_user_namespace_child;
      options.child_setup_data = &*mounts.overlay;
    }
  }
  if (plan.disk_image) {
    // Only the staging child (root) mounts the image.
    if (!plan.host_uid || !mounts.overlay) {
      throw failure("internal error: a disk image without root's staging and a kernel overlay");
    }
    mounts.disk.emplace(LoopMountChild{plan.disk_image->image, plan.disk_image->mount_point, {}});
    mounts.staging.disk = &*mounts.disk;
  }
  if (plan.host_uid) {
    prepare_staging_mountpoint();
    for (std::size_t i = 0; i < binds.sources.size(); ++i) {
      auto& source = binds.sources[i];
      if (source.fd < 0) continue;
      source.staged_path = staged_path(i);
      mounts.staging.binds.push_back({plan.mounts[i].source, source.staged_path, source.is_directory, -1});
    }
    if (mounts.overlay) mounts.staging.overlay = &*mounts.overlay;
    options.child_setup = stage_binds_in_child;
    options.child_setup_data = &mounts.staging;
  }
  options.argv = {bwrap};
  for (auto& word : bwrap_arguments(plan, binds.sources, pipes.report.write_end.get(), syscall_filter.get())) {
    options.argv.push_back(word);
  }
  options.env = plan.env;
  options.stdin_fd = plan.feeds_stdin ? pipes.input.read_end.get() : -1;
  options.stdout_fd = pipes.output.write_end.get();
  options.stderr_fd = pipes.errors.write_end ? pipes.errors.write_end.get() : pipes.output.write_end.get();
  if (plan.controlling_terminal && terminal != nullptr) {
    options.stdin_fd = options.stdout_fd = options.stderr_fd = terminal->get();
  }
  for (const auto& source : binds.sources) {
    if (source.fd >= 0 && source.staged_path.empty()) options.keep_fds.push_back(source.fd);
  }
  options.keep_fds.push_back(pipes.report.write_end.get());
  options.keep_fds.push_back(syscall_filter.get());
  options.die_with_parent = true;
  options.uid = plan.host_uid;
  options.gid = plan.host_gid;
  // RLIMIT_NPROC stays beside a cgroup's pids.max: the kernel checks it
  // early in fork, pids.max only after copying the parent's memory map, so
  // a fork bomb held by pids.max alone keeps that map's lock so busy that
  // reading its /proc files on the host (ps, pgrep) stalls for seconds.
  if (plan.limits.processes > 0) {
    const uid_t uid = plan.host_uid.value_or(::getuid());
    options.rlimits.emplace_back(RLIMIT_NPROC,
                                 processes_of_uid(uid) + static_cast<unsigned long>(plan.limits.processes));
  }
  options.rlimits.emplace_back(RLIMIT_CORE, 0UL);
  const std::uint64_t disk_bytes = disk_limit_bytes(plan);
  if (disk_bytes > 0) options.rlimits.emplace_back(RLIMIT_FSIZE, static_cast<unsigned long>(disk_bytes));
  return options;
}

// The watchdogs over the sandbox `bwrap` leads, in the order they are asked.
Watchdogs watchdogs_for(const Plan& plan, const RunIo& io, pid_t bwrap, std::int64_t started,
                        std::uint64_t shared_memory_at_start, const JobCgroup* cgroup, int image_root) {
  Watchdogs watchdogs;
  watchdogs.push_back(std::make_unique<CancelWatchdog>(util::cancel_requested));
  if (io.poll) watchdogs.push_back(std::make_unique<CallerWatchdog>(io.poll));
  watchdogs.push_back(std::make_unique<WallClockWatchdog>(started, plan.limits.wall_seconds));
  watchdogs.push_back(std::make_unique<InactivityWatchdog>(plan.limits.inactivity_seconds));
  // A cgroup's memory limit is the kernel's: nothing to poll, and the first
  // OOM kill its counter shows ends the sandbox, as the polling would.
  if (cgroup != nullptr) {
    watchdogs.push_back(std::make_unique<CallerWatchdog>([cgroup]() -> std::optional<StopReason> {
      if (cgroup->oom_kills() > 0) return StopReason::memory;
      return std::nullopt;
    }));
  }
  const std::int64_t polled_memory_mb = cgroup == nullptr ? plan.limits.memory_mb : 0;
  watchdogs.push_back(std::make_unique<MemoryWatchdog>(started, polled_memory_mb, [=] {
    // The growth of the host's shared memory counts too: a memfd or a file in
    // one of the sandbox's tmpfs mounts is memory no RSS shows.
    const std::uint64_t shared_now = host_shared_memory_bytes();
    const std::uint64_t shared_growth = shared_now > shared_memory_at_start ? shared_now - shared_memory_at_start : 0;
    return tree_resident_bytes(bwrap) + shared_growth;
  }));
  watchdogs.push_back(std::make_unique<StallWatchdog>(started, [bwrap] { return sandbox_stalled(bwrap); }));
  std::vector<std::string> writable = writable_binds(plan);
  // With a disk image they are below its mount point, which only the
  // staging namespace has mounted: the outer bwrap stays there, so its
  // /proc/<pid>/root reaches them (the walk still finds a tree deeper than
  // any of ours, which the image's own counts cannot see).
  if (image_root >= 0) {
    for (auto& path : writable) path = "/proc/" + std::to_string(bwrap) + "/root" + path;
  }
  const std::uint64_t disk_bytes = disk_limit_bytes(plan);
  DiskProbes disk;
  disk.free_bytes = [writable] {
    struct statvfs info {};
    if (writable.empty() || ::statvfs(writable.front().c_str(), &info) != 0) return std::uint64_t{0};
    return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  };
  disk.used_bytes = [&io, writable, disk_bytes] {
    std::uint64_t used = io.disk_bytes_outside ? io.disk_bytes_outside() : 0;
    for (const auto& path : writable) {
      const std::uint64_t here = util::disk_usage(path, disk_bytes);
      if (here > util::disk_usage_too_deep - used) return util::disk_usage_too_deep;
      used += here;
    }
    return used;
  };
  if (image_root >= 0) {
    // The kernel holds the image's size: its free space is exact, and a
    // full image (or inode table) is the limit reached. The exact count
    // stays the walk's.
    const std::uint64_t image_bytes = plan.disk_image->bytes;
    disk.free_bytes = [image_root, image_bytes] {
      const auto usage = image_usage(image_root, image_bytes);
      return usage ? usage->free_bytes : std::uint64_t{0};
    };
    disk.full = [image_root, image_bytes] {
      const auto usage = image_usage(image_root, image_bytes);
      return !usage || usage->full;
    };
  }
  disk.clock = util::monotonic_ms;
  watchdogs.push_back(std::make_unique<DiskWatchdog>(started, disk_bytes, std::move(disk)));
  return watchdogs;
}

// What the runner saw while the sandbox ran.
struct Watched {
  std::string report_text;
  std::string recent_output;
  std::optional<StopReason> kill_reason;  // the first watchdog's reason, when one stopped it
};

// Relays the sandbox's output and feeds its input until bwrap and everything
// inside have closed their pipes; after every wake-up (at least every watch_tick_ms)
// asks the watchdogs, and kills the sandbox on the first reason.
Watched watch_sandbox(const Plan& plan, const RunIo& io, SandboxPipes& pipes, const util::Child& bwrap,
                      Watchdogs& watchdogs, std::int64_t started) {
  Watched watched;
  bool wrote_since_last_wake = false;
  std::int64_t last_output = started;
  const auto relay_to = [&](const std::function<void(std::string_view)>& deliver) {
    return [&, deliver](std::string_view chunk) {
      wrote_since_last_wake = true;
      watched.recent_output.append(chunk);
      if (watched.recent_output.size() > recent_output_cap) {
        watched.recent_output.erase(0, watched.recent_output.size() - recent_output_kept);
      }
      if (deliver) deliver(chunk);
      return util::PollLoop::Next::keep_going;
    };
  };
  util::PollLoop loop;
  loop.read(pipes.output.read_end, relay_to(io.on_output));
  loop.read(pipes.errors.read_end, relay_to(io.on_error_output));
  loop.read(pipes.report.read_end, [&](std::string_view chunk) {
    if (watched.report_text.size() < report_cap) watched.report_text.append(chunk);
    return util::PollLoop::Next::keep_going;
  });
  if (io.stdin_source != nullptr && *io.stdin_source && plan.feeds_stdin) {
    loop.relay(*io.stdin_source, pipes.input.write_end, /*close_at_end=*/true);
  } else {
    loop.write(pipes.input.write_end, plan.feeds_stdin ? std::string_view(io.stdin_data) : std::string_view());
  }
  if (io.watch) io.watch(loop);
  loop.on_wake(
      [&](const util::PollLoop::Wake& wake) {
        if (wrote_since_last_wake) last_output = wake.now_ms;
        wrote_since_last_wake = false;
        const auto reason = first_stop_reason(watchdogs, {wake.now_ms, last_output});
        if (reason && !watched.kill_reason) {
          watched.kill_reason = *reason;
          bwrap.kill(SIGKILL);
        }
        return util::PollLoop::Next::keep_going;
      },
      watch_tick_ms);
  loop.run();
  return watched;
}

// The sandbox's cgroup, when the host offers one and the plan limits memory
// or processes.
bool wants_cgroup(const Plan& plan) {
  return plan.limits.cgroup.version != CgroupVersion::none && !plan.limits.cgroup_name.empty() &&
         (plan.limits.memory_mb > 0 || plan.limits.processes > 0);
}

// How the sandbox ended, once bwrap was reaped; `oom_killed`: the kernel's
// OOM killer fired in the sandbox's cgroup (its counter, not a guess from
// SIGKILL).
StopReason ended_by(const RunResult& result, const Watched& watched, bool oom_killed) {
  if (watched.kill_reason) return *watched.kill_reason;
  if (oom_killed) return StopReason::memory;
  if (result.status.exited() && result.status.code == wall_check_failed_code && watched.report_text != "ok\n") {
    return StopReason::refused;
  }
  if (result.status.signal == SIGXFSZ || result.status.code == 128 + SIGXFSZ) return StopReason::disk;
  return result.status.exited() ? StopReason::exit : StopReason::signal;
}

}  // namespace

std::string find_bwrap() {
#ifndef __linux__
  throw refused_error("git-mullet runs workers only on Linux, inside bubblewrap; this platform is not supported",
                      "run git-mullet on a Linux machine; there is no unsandboxed mode");
#endif
  std::string found = util::find_in_path("bwrap", util::host_path());
  if (found.empty()) {
    throw refused_error("bubblewrap (bwrap) is not installed, so no sandbox can be built; nothing was run",
                        "install it: apt-get install bubblewrap (there is no unsandboxed mode)");
  }
  return found;
}

RunResult run_sandboxed(const Plan& plan, const RunIo& io) {
  const std::string bwrap = find_bwrap();
  OpenedBinds binds = open_bind_sources(plan);
  SandboxPipes pipes = make_sandbox_pipes(static_cast<bool>(io.on_error_output));
  ChildMounts mounts;
  if (plan.controlling_terminal && (io.terminal == nullptr || !*io.terminal)) {
    throw failure("internal error: a sandbox with a terminal was given none");
  }
  const UniqueFd syscall_filter = compile_syscall_filter(plan.syscall_filter);
  std::optional<JobCgroup> cgroup;
  if (wants_cgroup(plan)) {
    cgroup.emplace(plan.limits.cgroup, plan.limits.cgroup_name, plan.limits.memory_mb, plan.limits.processes);
  }
  const std::vector<int> cgroup_procs_fds = cgroup ? cgroup->procs_fds() : std::vector<int>{};
  util::SpawnOptions options =
      bwrap_options(plan, bwrap, binds, pipes, io.terminal, mounts, syscall_filter, cgroup_procs_fds);
  options.cgroup_procs_fds = cgroup_procs_fds;

  const std::uint64_t shared_memory_at_start = host_shared_memory_bytes();
  const std::int64_t started = util::monotonic_ms();
  util::Child child = util::spawn(options);
  // bwrap holds its own copies now.
  pipes.report.write_end.reset();
  pipes.output.write_end.reset();
  pipes.errors.write_end.reset();
  pipes.input.read_end.reset();
  if (io.terminal != nullptr) io.terminal->reset();
  binds.owned.clear();

  // The image as bwrap's namespace has it mounted: the watch reads it, and
  // the end's check after the namespace is gone.
  UniqueFd image_root;
  if (plan.disk_image) {
    image_root = open_mounted_image(child.pid(), *plan.disk_image);
    if (!image_root) {
      throw refused_error("the disk image " + plan.disk_image->image + " was not mounted for the " + plan.phase +
                          " phase, so nothing ran");
    }
  }
  Watchdogs watchdogs = watchdogs_for(plan, io, child.pid(), started, shared_memory_at_start,
                                      cgroup ? &*cgroup : nullptr, image_root ? image_root.get() : -1);
  const Watched watched = watch_sandbox(plan, io, pipes, child, watchdogs, started);
  pipes.input.write_end.reset();
  RunResult result;
  result.status = child.wait();
  result.duration_ms = util::monotonic_ms() - started;
  const bool oom_killed = cgroup && cgroup->oom_kills() > 0;
  // Whatever bwrap left (nothing, its pid namespace gone with it) dies now.
  if (cgroup) {
    cgroup->kill_all();
    if (const std::uint64_t peak = cgroup->peak_memory_bytes(); peak > 0) result.memory_peak_bytes = peak;
  }

  if (watched.report_text.rfind("ok\n", 0) != 0 && !watched.kill_reason) {
    std::string why =
        util::trim(watched.report_text.rfind("fail: ", 0) == 0 ? watched.report_text.substr(6) : watched.recent_output);
    if (why.empty()) why = "bubblewrap ended (" + result.status.describe() + ") before the sandbox was ready";
    throw refused_error("the sandbox for the " + plan.phase + " phase could not be set up, so nothing ran: " + why,
                        diagnose_bwrap_failure(why));
  }
  result.ended_by = ended_by(result, watched, oom_killed);
  // A worker that filled the image and ended (a write failed with ENOSPC)
  // before the watch glanced at it was stopped by the disk limit too.
  if (image_root && ended_by_itself(result.ended_by)) {
    const auto usage = image_usage(image_root.get(), plan.disk_image->bytes);
    if (usage && usage->full) result.ended_by = StopReason::disk;
  }
  return result;
}

}  // namespace mullet::sandbox
