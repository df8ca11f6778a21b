#include "sandbox/cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>

#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

constexpr std::uint64_t mebibyte = 1024ULL * 1024ULL;
// How long the end of a sandbox waits for its killed processes to leave
// the cgroup: rounds of 2 ms.
constexpr int removal_rounds = 2500;
constexpr const char* parent_name = "git-mullet";

struct CgroupMount {
  std::string point;
  std::string fstype;
  std::vector<std::string> options;  // the super options: v1's controllers
};

std::vector<CgroupMount> cgroup_mounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  for (const auto& line : util::split(mountinfo, '\n')) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto before = util::split(line.substr(0, dash), ' ');
    const auto after = util::split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    if (after[0] != "cgroup" && after[0] != "cgroup2") continue;
    mounts.push_back({before[4], after[0], util::split(after[2], ',')});
  }
  return mounts;
}

bool has_word(const std::string& text, const std::string& word) {
  for (const auto& found : util::split(util::trim(text), ' ')) {
    if (found == word) return true;
  }
  return false;
}

bool lists_memory_and_pids(const std::string& path) {
  const std::string text = util::read_file_if_exists(path).value_or("");
  return has_word(text, "memory") && has_word(text, "pids");
}

bool writable(const std::string& path) {
  return ::access(path.c_str(), W_OK) == 0;
}

// v2: the directory our own cgroups go under, or empty.
std::string v2_parent(const CgroupProbe& probe, const std::string& base, std::string& note) {
  if (probe.as_root) {
    if (lists_memory_and_pids(base + "/cgroup.controllers")) return base + "/" + parent_name;
    note = "the v2 hierarchy at " + base.substr(probe.root.size()) + " offers no memory and pids controllers";
    return {};
  }
  // A delegated subtree: the deepest cgroup above our own that we can write
  // and that already hands memory and pids to its children.
  std::string path;
  for (const auto& line : util::split(probe.self_cgroup, '\n')) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  while (!path.empty() && path != "/") {
    const std::string dir = base + path;
    if (writable(dir) && writable(dir + "/cgroup.subtree_control") &&
        lists_memory_and_pids(dir + "/cgroup.subtree_control")) {
      return dir + "/" + parent_name;
    }
    path = path.substr(0, path.rfind('/'));
  }
  note = "no delegated v2 subtree with memory and pids is writable by this user";
  return {};
}

CgroupHost detect_v1(const CgroupProbe& probe, const std::vector<CgroupMount>& mounts) {
  CgroupHost host;
  std::string memory;
  std::string pids;
  for (const auto& mount : mounts) {
    if (mount.fstype != "cgroup") continue;
    for (const auto& option : mount.options) {
      if (option == "memory") memory = probe.root + mount.point;
      if (option == "pids") pids = probe.root + mount.point;
    }
  }
  if (memory.empty() || pids.empty()) {
    host.note = "no v1 memory and pids hierarchies are mounted";
  } else if (!probe.as_root || !writable(memory) || !writable(pids)) {
    host.note = "the v1 memory and pids hierarchies are writable only by root";
  } else {
    host.version = CgroupVersion::v1;
    host.memory_parent = memory + "/" + parent_name;
    host.pids_parent = pids + "/" + parent_name;
    host.swap_accounted = util::exists(memory + "/memory.memsw.limit_in_bytes");
  }
  return host;
}

void write_cgroup_file(const std::string& path, const std::string& value) {
  // O_CREAT: a cgroup's files exist already; a fake tree's (tests) may not.
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    throw failure("cannot write " + value + " to " + path + ": " + std::strerror(errno),
                  "check that the cgroup hierarchy is writable (git mullet doctor says which one jobs use)");
  }
}

void pause_briefly() {
  const timespec two_ms{0, 2'000'000};
  ::nanosleep(&two_ms, nullptr);
}

// Kills what `dir` holds until it holds nothing (or the rounds run out).
bool empty_cgroup(const std::string& dir) {
  if (util::exists(dir + "/cgroup.kill")) {
    const UniqueFd kill_fd(::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
    if (kill_fd) (void)!::write(kill_fd.get(), "1", 1);
  }
  for (int round = 0; round < removal_rounds; ++round) {
    const auto procs = util::read_file_if_exists(dir + "/cgroup.procs");
    if (!procs || util::trim(*procs).empty()) return true;
    for (const auto& word : util::split(*procs, '\n')) {
      const pid_t pid = static_cast<pid_t>(std::atoi(word.c_str()));
      if (pid > 0) ::kill(pid, SIGKILL);
    }
    pause_briefly();
  }
  return false;
}

void prepare_parent(const CgroupHost& host, const std::string& parent) {
  util::make_dirs(parent, 0755);
  if (host.version == CgroupVersion::v2) {
    // As root the hierarchy's root may not hand the controllers down yet.
    const std::string above = parent.substr(0, parent.rfind('/'));
    if (!lists_memory_and_pids(above + "/cgroup.subtree_control")) {
      write_cgroup_file(above + "/cgroup.subtree_control", "+memory +pids");
    }
    if (!lists_memory_and_pids(parent + "/cgroup.subtree_control")) {
      write_cgroup_file(parent + "/cgroup.subtree_control", "+memory +pids");
    }
  }
}

std::uint64_t read_number(const std::string& path) {
  return std::strtoull(util::read_file_if_exists(path).value_or("0").c_str(), nullptr, 10);
}

// [sandbox] cgroup naming a directory: that one, on a v2 mount, or none.
CgroupHost configured_v2(const CgroupProbe& probe, const std::vector<CgroupMount>& mounts) {
  CgroupHost host;
  const std::string& path = probe.setting;
  bool on_v2 = false;
  for (const auto& mount : mounts) {
    const std::string prefix = mount.point == "/" ? "/" : mount.point + "/";
    on_v2 = on_v2 || (mount.fstype == "cgroup2" && (path == mount.point || path.rfind(prefix, 0) == 0));
  }
  const std::string dir = probe.root + path;
  if (on_v2 && writable(dir) && lists_memory_and_pids(dir + "/cgroup.controllers")) {
    host.version = CgroupVersion::v2;
    host.memory_parent = host.pids_parent = dir + "/" + parent_name;
    host.swap_accounted = true;
    host.note = "under " + path + "/" + parent_name + " ([sandbox] cgroup)";
  } else {
    host.note = "[sandbox] cgroup " + path + " is not a writable v2 cgroup directory with memory and pids";
  }
  return host;
}

}  // namespace

CgroupHost detect_cgroups(const CgroupProbe& probe) {
  const auto mounts = cgroup_mounts(probe.mountinfo);
  if (probe.setting == "off") {
    CgroupHost host;
    host.note = "[sandbox] cgroup = \"off\"";
    return host;
  }
  if (probe.setting != "auto") return configured_v2(probe, mounts);
  std::string v2_note;
  for (const auto& mount : mounts) {
    if (mount.fstype != "cgroup2") continue;
    const std::string parent = v2_parent(probe, probe.root + mount.point, v2_note);
    if (parent.empty()) continue;
    CgroupHost host;
    host.version = CgroupVersion::v2;
    host.memory_parent = host.pids_parent = parent;
    host.swap_accounted = true;
    host.note = "under " + parent.substr(probe.root.size());
    return host;
  }
  CgroupHost host = detect_v1(probe, mounts);
  if (host.version == CgroupVersion::v1) {
    host.note =
        "under " + host.memory_parent.substr(probe.root.size()) + " and " + host.pids_parent.substr(probe.root.size());
  } else if (!v2_note.empty()) {
    host.note = v2_note + "; " + host.note;
  }
  return host;
}

CgroupHost detect_host_cgroups(const std::string& setting) {
  CgroupProbe probe;
  probe.setting = setting;
  probe.mountinfo = util::read_proc_file("/proc/self/mountinfo").value_or("");
  probe.self_cgroup = util::read_proc_file("/proc/self/cgroup").value_or("");
  probe.as_root = ::geteuid() == 0;
  return detect_cgroups(probe);
}

std::vector<CgroupWrite> cgroup_limit_writes(const CgroupHost& host, std::int64_t memory_mb, std::int64_t processes) {
  std::vector<CgroupWrite> writes;
  if (host.version == CgroupVersion::none) return writes;
  const bool v2 = host.version == CgroupVersion::v2;
  if (memory_mb > 0) {
    const std::string bytes = std::to_string(static_cast<std::uint64_t>(memory_mb) * mebibyte);
    if (v2) {
      writes.push_back({"memory", "memory.max", bytes});
      writes.push_back({"memory", "memory.swap.max", "0"});
      writes.push_back({"memory", "memory.oom.group", "1"});
    } else {
      writes.push_back({"memory", "memory.limit_in_bytes", bytes});
      if (host.swap_accounted) {
        writes.push_back({"memory", "memory.memsw.limit_in_bytes", bytes});
      } else {
        writes.push_back({"memory", "memory.swappiness", "0"});
      }
    }
  }
  if (processes > 0) writes.push_back({"pids", "pids.max", std::to_string(processes)});
  return writes;
}

std::uint64_t parse_oom_kills(std::string_view events) {
  for (const auto& line : util::split(events, '\n')) {
    if (line.rfind("oom_kill ", 0) == 0) return std::strtoull(line.c_str() + 9, nullptr, 10);
  }
  return 0;
}

std::string describe_enforcement(const CgroupHost& host) {
  switch (host.version) {
    case CgroupVersion::v2:
      return "memory: cgroup v2 (kernel, no swap), processes: cgroup v2 pids.max (kernel), one cgroup per sandbox " +
             host.note;
    case CgroupVersion::v1:
      return std::string("memory: cgroup v1 (kernel, ") +
             (host.swap_accounted ? "swap included" : "swap not accounted, swappiness 0") +
             "), processes: cgroup v1 pids.max (kernel), one cgroup per sandbox " + host.note;
    case CgroupVersion::none: break;
  }
  return "memory: polling (git-mullet's watch of the sandbox's resident memory; no writable cgroup: " + host.note +
         "), processes: rlimit (RLIMIT_NPROC)";
}

JobCgroup::JobCgroup(const CgroupHost& host, const std::string& name, std::int64_t memory_mb, std::int64_t processes)
    : m_host(host) {
  if (host.version == CgroupVersion::none) throw failure("internal error: a job cgroup on a host without cgroups");
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    throw failure("internal error: '" + name + "' cannot name a cgroup");
  }
  std::vector<std::string> parents = {host.memory_parent};
  if (host.pids_parent != host.memory_parent) parents.push_back(host.pids_parent);
  try {
    for (const auto& parent : parents) {
      prepare_parent(host, parent);
      const std::string dir = parent + "/" + name;
      // A run of the same job that was killed before its end left it.
      if (util::exists(dir) && !remove_cgroup(dir)) {
        throw failure("cannot remove the stale cgroup " + dir, "remove it by hand (rmdir) once nothing runs in it");
      }
      if (::mkdir(dir.c_str(), 0755) != 0) {
        throw failure("cannot make the cgroup " + dir + ": " + std::strerror(errno),
                      "check that the cgroup hierarchy is writable (git mullet doctor)");
      }
      m_dirs.push_back(dir);
    }
    for (const auto& write : cgroup_limit_writes(host, memory_mb, processes)) {
      const std::string& dir = (write.controller == "pids" && m_dirs.size() > 1) ? m_dirs[1] : m_dirs[0];
      write_cgroup_file(dir + "/" + write.file, write.value);
    }
    for (const auto& dir : m_dirs) {
      UniqueFd fd(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
      if (!fd) throw failure("cannot open " + dir + "/cgroup.procs: " + std::strerror(errno));
      m_procs.push_back(std::move(fd));
    }
  } catch (...) {
    for (const auto& dir : m_dirs) remove_cgroup(dir);
    throw;
  }
}

JobCgroup::~JobCgroup() {
  for (const auto& dir : m_dirs) remove_cgroup(dir);
}

std::vector<int> JobCgroup::procs_fds() const {
  std::vector<int> fds;
  for (const auto& fd : m_procs) fds.push_back(fd.get());
  return fds;
}

std::uint64_t JobCgroup::oom_kills() const {
  const std::string file = m_host.version == CgroupVersion::v2 ? "/memory.events" : "/memory.oom_control";
  return parse_oom_kills(util::read_file_if_exists(m_dirs.front() + file).value_or(""));
}

std::uint64_t JobCgroup::peak_memory_bytes() const {
  const std::string file = m_host.version == CgroupVersion::v2 ? "/memory.peak" : "/memory.max_usage_in_bytes";
  return read_number(m_dirs.front() + file);
}

void JobCgroup::kill_all() const {
  for (const auto& dir : m_dirs) empty_cgroup(dir);
}

bool remove_cgroup(const std::string& dir) {
  empty_cgroup(dir);
  for (int round = 0; round < removal_rounds; ++round) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    pause_briefly();
  }
  return false;
}

}  // namespace mullet::sandbox

namespace mullet::sandbox {

std::vector<std::string> job_cgroup_names(const CgroupHost& host) {
  std::set<std::string> names;
  for (const auto* parent : {&host.memory_parent, &host.pids_parent}) {
    if (host.version == CgroupVersion::none || !util::exists(*parent)) continue;
    util::DirectoryReader listing(AT_FDCWD, *parent);
    while (const auto entry = listing.next()) {
      if (entry->type == DT_DIR) names.insert(entry->name);
    }
  }
  return {names.begin(), names.end()};
}

bool job_cgroup_idle(const CgroupHost& host, const std::string& name, std::int64_t min_age_seconds) {
  if (host.version == CgroupVersion::none || name.empty() || name.find('/') != std::string::npos) return false;
  const std::time_t now = std::time(nullptr);
  for (const auto* parent : {&host.memory_parent, &host.pids_parent}) {
    const std::string dir = *parent + "/" + name;
    struct stat info {};
    if (::lstat(dir.c_str(), &info) != 0) continue;
    if (!S_ISDIR(info.st_mode) || now - info.st_mtime <= min_age_seconds) return false;
    const auto procs = util::read_file_if_exists(dir + "/cgroup.procs");
    if (!procs || !util::trim(*procs).empty()) return false;
  }
  return true;
}

bool remove_job_cgroup(const CgroupHost& host, const std::string& name) {
  bool removed = true;
  for (const auto* parent : {&host.memory_parent, &host.pids_parent}) {
    if (host.version == CgroupVersion::none || name.empty() || name.find('/') != std::string::npos) continue;
    removed = remove_cgroup(*parent + "/" + name) && removed;
  }
  return removed;
}

}  // namespace mullet::sandbox
