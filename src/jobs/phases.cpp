#include "jobs/phases.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include <spdlog/spdlog.h>

#include "git/cli.hpp"
#include "jobs/disk_cap.hpp"
#include "net/egress_proxy.hpp"
#include "sandbox/disk_image.hpp"
#include "sandbox/host.hpp"
#include "sandbox/policy.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

constexpr std::size_t phase_tail_bytes = 4096;

UniqueFd open_log(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw failure("cannot write " + path + ": " + util::errno_text(errno));
  return fd;
}

}  // namespace

BoundedLog::BoundedLog(const std::string& path, std::uint64_t cap) : m_fd(open_log(path)), m_cap(cap) {
  // A resumed job appends to the log of its earlier runs.
  struct stat info {};
  if (::fstat(m_fd.get(), &info) == 0) m_size = static_cast<std::uint64_t>(info.st_size);
}

void BoundedLog::append(std::string_view text) {
  while (!text.empty()) {
    const ssize_t put = ::write(m_fd.get(), text.data(), text.size());
    if (put < 0 && errno == EINTR) continue;
    // A full disk: the log is lost, the job goes on (the disk limit ends it).
    if (put <= 0) return;
    m_size += static_cast<std::uint64_t>(put);
    m_at_line_start = text[static_cast<std::size_t>(put) - 1] == '\n';
    text.remove_prefix(static_cast<std::size_t>(put));
  }
}

void BoundedLog::write(std::string_view chunk) {
  if (m_left_out == 0 && m_tail.empty() && m_size < m_cap) {
    const auto room = static_cast<std::size_t>(std::min<std::uint64_t>(m_cap - m_size, chunk.size()));
    append(chunk.substr(0, room));
    chunk.remove_prefix(room);
  }
  if (chunk.empty()) return;
  m_tail.append(chunk);
  if (m_tail.size() > 2 * log_tail_kept) {
    const std::size_t drop = m_tail.size() - log_tail_kept;
    m_left_out += drop;
    m_tail.erase(0, drop);
  }
}

void BoundedLog::end_phase() {
  if (m_tail.size() > log_tail_kept) {
    m_left_out += m_tail.size() - log_tail_kept;
    m_tail.erase(0, m_tail.size() - log_tail_kept);
  }
  if (m_left_out > 0) {
    append((m_at_line_start ? "" : "\n") + std::string("[git-mullet: ") + std::to_string(m_left_out) +
           " bytes of output left out]\n");
  }
  append(m_tail);
  m_tail.clear();
  m_left_out = 0;
}

PhaseSpec setup_phase(const config::Settings& settings) {
  PhaseSpec phase;
  phase.name = "setup";
  phase.command = {"/bin/sh", "-c", settings.run.setup};
  phase.grants = settings.network.setup;
  phase.wall_limit = settings.limits.timeout;
  return phase;
}

PhaseSpec worker_phase(const config::Settings& settings, const JobPaths& paths, const executors::WorkerSpec& spec) {
  PhaseSpec phase;
  phase.name = "worker";
  phase.command = spec.command;
  phase.env = spec.env;
  phase.mounts = spec.mounts;
  phase.stdin_data = spec.stdin_data;
  phase.grants = settings.network.worker;
  if (!spec.files.empty()) {
    phase.mounts.push_back({sandbox::MountKind::read_only_bind, paths.executor_files, executors::files_inside});
  }
  phase.structured_stdout = spec.structured_stdout;
  phase.nested_sandbox = spec.nested_sandbox;
  phase.wall_limit = settings.limits.timeout;
  return phase;
}

PhaseSpec gate_phase(const config::Settings& settings, const config::Gate& gate) {
  std::chrono::seconds wall_limit = settings.limits.gate_timeout;
  // A gate's own timeout may only lower the configured one.
  if (gate.timeout_seconds > 0) wall_limit = std::min(wall_limit, std::chrono::seconds(gate.timeout_seconds));
  PhaseSpec phase;
  phase.name = "gate:" + gate.name;
  phase.command = {"/bin/sh", "-c", gate.command};
  // A gate runs code the worker wrote: never any network.
  phase.wall_limit = wall_limit;
  return phase;
}

sandbox::Plan plan_for(const config::Settings& settings, const JobPaths& paths, const SandboxDirs& dirs,
                       const SandboxObjects& objects, const PhaseSpec& phase, const std::string& proxy_socket,
                       const std::string& api_socket, const std::optional<UidRange>& uids) {
  sandbox::PolicyInputs in;
  in.phase = phase.name;
  in.work_tree = dirs.work_tree;
  in.work_tree_overlay = dirs.overlay;
  in.clone_git_dir = dirs.git_dir;
  in.objects_dir = objects.objects_dir;
  in.history = std::string(config::history_name(objects.history));
  // The base's pack is self-contained; only the user's whole store may
  // borrow from other object directories.
  if (objects.history == config::History::all) {
    in.borrowed_objects = git::borrowed_object_dirs(in.objects_dir);
    for (const auto& dir : in.borrowed_objects) {
      if (util::exists(dir + "/info/alternates")) in.dirs_with_alternates.push_back(dir);
    }
    if (util::exists(in.objects_dir + "/info/alternates")) in.dirs_with_alternates.push_back(in.objects_dir);
  }
  in.home_dir = dirs.home;
  // disk_mb held by the kernel where it can be (an ext4 image below the
  // overlay's layers and the home), else by the watch.
  const sandbox::DiskCapChoice disk = disk_cap_choice(settings, uids.has_value(),
                                                      !dirs.overlay        ? sandbox::DiskCapWorkTree::checkout
                                                      : dirs.overlay->fuse ? sandbox::DiskCapWorkTree::fuse_overlay
                                                                           : sandbox::DiskCapWorkTree::kernel_overlay);
  if (disk.kernel) {
    in.work_tree_overlay = image_overlay(paths, *dirs.overlay);
    in.home_dir = image_home(paths);
  }
  in.helper_binary = util::self_executable();
  in.empty_file = paths.empty_file;
  in.tmp_name = "mullet-" + util::random_hex(4);
  in.root_entries = sandbox::scan_host_root();
  in.host_env = util::current_environment();
  in.extra_env_names = settings.sandbox.env;
  in.executor_env = phase.env;
  in.executor_mounts = phase.mounts;
  in.command = phase.command;
  const config::LimitsSettings& limits = settings.limits;
  in.limits.wall_seconds = phase.wall_limit.count();
  in.limits.inactivity_seconds = limits.inactivity.count();
  in.limits.memory_mb = static_cast<std::int64_t>(limits.memory_mb.count());
  in.limits.processes = limits.processes;
  in.limits.disk_mb = static_cast<std::int64_t>(limits.disk_mb.count());
  in.limits.cgroup = sandbox::detect_host_cgroups(settings.sandbox.cgroup);
  in.limits.cgroup_name = paths.cgroup_name;
  in.network.grants = phase.grants;
  in.network.proxy_socket = proxy_socket;
  if (phase.api) {
    in.network.api_socket = api_socket;
    in.network.api_upstream = phase.api->upstream.to_string();
  }
  in.feeds_stdin = !phase.stdin_data.empty();
  in.nested_sandbox = phase.nested_sandbox;
  if (uids) {
    in.host_uid = uids->first;
    in.host_gid = static_cast<gid_t>(uids->first);
  }
  sandbox::Plan plan = sandbox::build_plan(in);
  if (uids) plan.host_uid_choices = uids->count;
  plan.disk_note = sandbox::describe_disk_cap(disk, static_cast<std::int64_t>(settings.limits.disk_mb.count()));
  if (disk.kernel) {
    plan.disk_image = sandbox::DiskImage{paths.disk_image, paths.disk_mount, settings.limits.disk_mb.bytes()};
  }
  return plan;
}

namespace {

// What the credential endpoint saw in one phase: the record keeps it (the
// requests, their usage and cost; never the credential or the sentinel).
nlohmann::json api_record(const net::CredentialEndpointOptions& options, const net::CredentialEndpoint& endpoint) {
  return {{"upstream", options.upstream.to_string()},
          {"budget_usd", options.budget_usd},
          {"totals", net::to_json(endpoint.totals())},
          {"requests", endpoint.records_json()}};
}

}  // namespace

PhaseRunner::PhaseRunner(const config::Settings& settings, const JobPaths& paths, const SandboxObjects& objects,
                         bool echo, std::optional<uid_t> sandbox_uid)
    : m_settings(settings),
      m_paths(paths),
      m_objects(objects),
      m_echo(echo),
      m_sandbox_uid(sandbox_uid),
      m_log(paths.worker_log, worker_log_cap) {}

namespace {

// "[12s] attempt 2/3 · gate tests · running", redrawn in place on a terminal
// while a phase without an executor session of its own (setup, a command
// worker, a gate) runs; cleared before output is echoed and when it ends.
class PhaseStatusLine {
 public:
  PhaseStatusLine(bool enabled, const PhaseSpec& phase)
      : m_enabled(enabled && !phase.label.empty()), m_label(phase.label), m_started(phase.job_started_ms) {}
  PhaseStatusLine(const PhaseStatusLine&) = delete;
  PhaseStatusLine& operator=(const PhaseStatusLine&) = delete;
  ~PhaseStatusLine() { clear(); }

  void tick() {
    if (!m_enabled) return;
    const std::string text =
        "[" + util::format_elapsed(util::monotonic_ms() - m_started) + "] " + m_label + " · running";
    if (m_shown && text == m_text) return;
    m_text = text;
    // The label holds a gate's name, from the configuration.
    std::cerr << "\r\033[K" << util::first_line(util::terminal_safe(text), 150) << std::flush;
    m_shown = true;
  }
  void clear() {
    if (!m_shown) return;
    std::cerr << "\r\033[K" << std::flush;
    m_shown = false;
  }

 private:
  bool m_enabled;
  std::string m_label;
  std::int64_t m_started;
  std::string m_text;
  bool m_shown = false;
};

// The host-side servers a phase's sandbox reaches: the egress proxy for its
// grants and the credential endpoint for its model API, with the upload cap
// they share.
struct PhaseServers {
  // Declared first, so that on unwinding the servers stop before it goes.
  util::TempDir sockets_dir;
  std::shared_ptr<net::UploadCap> upload_cap;
  std::string proxy_socket;
  std::unique_ptr<net::EgressProxy> proxy;
  std::string api_socket;
  std::unique_ptr<net::CredentialEndpoint> endpoint;

  PhaseServers(const PhaseSpec& phase, const config::Settings& settings) {
    if (phase.grants.empty() && !phase.api) return;
    // A short path of our own: unix socket paths are limited to 107 bytes.
    sockets_dir = util::TempDir("/tmp", "mullet-proxy-");
    // One cap for what leaves through the proxy and the endpoint together.
    upload_cap = std::make_shared<net::UploadCap>(settings.limits.egress_mb.bytes(), phase.uploaded_before);
    if (!phase.grants.empty()) {
      proxy_socket = sockets_dir.path() + "/proxy.sock";
      net::ProxyOptions proxy_options;
      proxy_options.upload_cap = upload_cap;
      proxy = std::make_unique<net::EgressProxy>(phase.grants, proxy_socket, proxy_options);
      proxy->start();
    }
    if (phase.api) {
      api_socket = sockets_dir.path() + "/api.sock";
      auto api_options = *phase.api;
      api_options.upload_cap = upload_cap;
      endpoint = std::make_unique<net::CredentialEndpoint>(api_socket, std::move(api_options));
      endpoint->start();
    }
  }

  void stop() {
    if (proxy) proxy->stop();
    if (endpoint) endpoint->stop();
    sockets_dir.remove();
  }

  // What the servers saw goes into the phase's record; a worker that gave up
  // on its own once refused was ended by the limit that refused it.
  void settle(const PhaseSpec& phase, sandbox::RunResult& result, PhaseRecord& record) {
    if (proxy) {
      proxy->stop();
      record.network = proxy->decisions_json();
    }
    if (endpoint) {
      // Once stopped, the sentinel opens nothing.
      endpoint->stop();
      record.api = api_record(*phase.api, *endpoint);
      if (endpoint->budget_exhausted() && sandbox::ended_by_itself(result.ended_by)) {
        result.ended_by = sandbox::StopReason::budget;
      }
    }
    if (upload_cap) {
      record.upload = UploadRecord{upload_cap->limit_bytes(), upload_cap->spent_before(), upload_cap->bytes_up()};
      if (upload_cap->exhausted() && sandbox::ended_by_itself(result.ended_by)) {
        result.ended_by = sandbox::StopReason::egress;
      }
    }
    record.ended_by = result.ended_by;
  }
};

}  // namespace

std::pair<sandbox::RunResult, PhaseRecord> PhaseRunner::run(const PhaseSpec& phase, const SandboxDirs& dirs) {
  PhaseServers servers(phase, m_settings);
  const auto& endpoint = servers.endpoint;
  const auto& upload_cap = servers.upload_cap;
  const std::optional<UidRange> uid =
      m_sandbox_uid ? std::optional<UidRange>(UidRange{*m_sandbox_uid, 1}) : std::nullopt;
  const sandbox::Plan plan =
      plan_for(m_settings, m_paths, dirs, m_objects, phase, servers.proxy_socket, servers.api_socket, uid);
  // Which the phase got (run --dry-run and doctor say which it will).
  spdlog::info("{} phase: disk: {}", phase.name, plan.disk_note);
  std::string output;
  sandbox::RunIo io;
  io.stdin_data = phase.stdin_data;
  const auto to_log = [&](std::string_view chunk) {
    m_log.write(chunk);
    output.append(chunk);
    // Only the tail goes into the phase record; the log file keeps more.
    if (output.size() > 2 * phase_tail_bytes) output = util::tail(output, phase_tail_bytes);
  };
  std::optional<BoundedLog> events;
  util::TerminalSafeStream echo;
  const bool plain = phase.session == nullptr || phase.session->wants_status_line();
  PhaseStatusLine status(m_echo && plain && ::isatty(STDERR_FILENO) != 0, phase);
  const auto echo_text = [&status](const std::string& text) {
    if (text.empty()) return;
    status.clear();
    std::cerr.write(text.data(), static_cast<std::streamsize>(text.size())).flush();
  };
  if (phase.header) {
    const std::string header = "── " + phase.label + " ──\n";
    m_log.write(header);
    if (m_echo) echo_text(util::terminal_safe(header));
  }
  if (phase.captured_stdout != nullptr) {
    io.on_output = [&](std::string_view chunk) {
      std::string& captured = *phase.captured_stdout;
      captured.append(chunk.substr(0, captured_stdout_cap - std::min(captured.size(), captured_stdout_cap)));
    };
    io.on_error_output = to_log;
  } else if (phase.session == nullptr) {
    io.on_output = [&](std::string_view chunk) {
      to_log(chunk);
      if (m_echo) echo_text(echo.feed(chunk));
    };
  } else if (!phase.structured_stdout) {
    io.on_output = [&](std::string_view chunk) {
      to_log(chunk);
      // The session echoes it: the status line makes room first.
      status.clear();
      phase.session->on_stdout(chunk);
    };
  } else {
    events.emplace(m_paths.events_log, events_log_cap);
    io.on_output = [&](std::string_view chunk) {
      events->write(chunk);
      phase.session->on_stdout(chunk);
    };
    io.on_error_output = [&](std::string_view chunk) {
      to_log(chunk);
      phase.session->on_stderr(chunk);
    };
  }
  if (phase.session != nullptr || endpoint || upload_cap || (m_echo && plain)) {
    io.poll = [&]() -> std::optional<sandbox::StopReason> {
      status.tick();
      // The metered cost, not the worker's own estimate, is the budget.
      if (endpoint && endpoint->budget_exhausted()) return sandbox::StopReason::budget;
      if (endpoint && endpoint->upstream_down()) return sandbox::StopReason::api_down;
      if (upload_cap && upload_cap->exhausted()) return sandbox::StopReason::egress;
      return phase.session != nullptr ? phase.session->poll() : std::nullopt;
    };
  }
  io.disk_bytes_outside = [&] { return m_log.size() + (events ? events->size() : 0); };
  auto cleanup = [&] {
    m_log.end_phase();
    if (events) events->end_phase();
    if (m_echo && phase.session == nullptr) echo_text(echo.finish());
    status.clear();
    servers.stop();
  };
  // The sandbox's processes died with it, so nothing adds a bit back. On the
  // host, nosuid does not apply: a setuid copy of a shell would let any user
  // who reaches the file become the sandbox's uid.
  const auto strip = [&] {
    util::strip_unsafe_modes(written_tree(dirs));
    util::strip_unsafe_modes(dirs.home);
  };
  sandbox::RunResult result;
  try {
    // The image is made and filled only now: nothing above can fail after.
    std::optional<PhaseDisk> disk;
    if (plan.disk_image) disk.emplace(m_paths, *plan.disk_image, dirs);
    result = sandbox::run_sandboxed(plan, io);
    if (disk) {
      // A descriptor the worker passed to a server of ours (SCM_RIGHTS on a
      // socket it reaches) would keep the image busy: sessions go first.
      servers.stop();
      if (const std::size_t dropped = disk->drain(); dropped > 0) {
        to_log("git-mullet: " + std::to_string(dropped) +
               " entries under paths longer than the host can copy were dropped from the disk image\n");
      }
    }
  } catch (...) {
    cleanup();
    strip();
    throw;
  }
  strip();
  if (result.ended_by == sandbox::StopReason::timeout && phase.wall_is_job_limit) {
    result.ended_by = sandbox::StopReason::job_timeout;
  }
  PhaseRecord record{phase.name,         plan.command,
                     result.status.code, result.ended_by,
                     result.duration_ms, util::tail(output, phase_tail_bytes),
                     phase.grants,       nlohmann::json::array(),
                     nlohmann::json(),   std::nullopt};
  record.memory_peak_bytes = result.memory_peak_bytes;
  servers.settle(phase, result, record);
  cleanup();
  return {result, record};
}

}  // namespace mullet::jobs
