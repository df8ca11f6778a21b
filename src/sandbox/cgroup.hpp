// Kernel-enforced memory and process limits: one cgroup per sandbox, with
// the memory limit (swap included) and the process limit, holding the
// sandbox's whole process tree, so the kernel counts every process and the
// sandbox's end kills them all at once.
//
// The pure part (which hierarchy the host offers, the files and values to
// write, the kernel's OOM counters) reads texts and a root path it is given,
// so tests point it at a fake tree. JobCgroup does it for real.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/fd.hpp"

namespace mullet::sandbox {

enum class CgroupVersion { none, v1, v2 };

// Where this host lets us make a sandbox's cgroup; plain data (part of a
// Plan's limits, printed by --dry-run and doctor).
struct CgroupHost {
  CgroupVersion version = CgroupVersion::none;
  // The parent directories each sandbox's cgroup is made in: one for v2
  // (memory_parent), one per hierarchy for v1.
  std::string memory_parent;
  std::string pids_parent;
  // v1: the kernel has memory.memsw.* (swap accounted): the limit includes swap.
  bool swap_accounted = false;
  // Why there is none, or where it is (for a person).
  std::string note;
  bool operator==(const CgroupHost&) const = default;
};

// What detection reads: /proc/self/mountinfo's and /proc/self/cgroup's
// text, with `root` prefixed to every path in them (empty on the real host).
struct CgroupProbe {
  std::string mountinfo;
  std::string self_cgroup;
  std::string root;
  bool as_root = false;
  // [sandbox] cgroup: "auto", "off", or a v2 directory the user can write
  // (its path on the host, `root` prefixed), used as the parent.
  std::string setting = "auto";
};

// "off": none. A path: that v2 directory, or none (never another). "auto":
// cgroup v2 (a subtree of its own as root, else a delegated subtree the user
// can write above our own cgroup), then v1 as root (the memory and pids
// hierarchies), else none.
CgroupHost detect_cgroups(const CgroupProbe& probe);
// This host's, for the user's [sandbox] cgroup `setting`.
CgroupHost detect_host_cgroups(const std::string& setting);

// One file to write, in a hierarchy's cgroup directory, in order.
struct CgroupWrite {
  std::string controller;  // "memory" or "pids": which v1 hierarchy (v2: the one directory)
  std::string file;
  std::string value;
  bool operator==(const CgroupWrite&) const = default;
};
// Zero means no limit of that kind.
std::vector<CgroupWrite> cgroup_limit_writes(const CgroupHost& host, std::int64_t memory_mb, std::int64_t processes);

// The kernel's count of OOM kills from memory.events (v2) or
// memory.oom_control (v1): their "oom_kill N" line; 0 without one.
std::uint64_t parse_oom_kills(std::string_view events);

// For a person, one line: "memory: cgroup v1 (kernel, ...), processes: ...",
// or "memory: polling (...)" where there is none. Only the first matches
// "memory.*cgroup v[12]" (bench/limits reads it so).
std::string describe_enforcement(const CgroupHost& host);

// The cgroup(s) of one sandbox, made under the host's parents as `name` (a
// job's id, "-N" for a node; jobs/ chooses it and sweeps the stale ones). A
// leftover of that name (a run of the same job killed before its end) is
// emptied and removed first. Destruction kills everything left inside and
// removes the directories.
class JobCgroup {
 public:
  JobCgroup(const CgroupHost& host, const std::string& name, std::int64_t memory_mb, std::int64_t processes);
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  // cgroup.procs of each directory, open for writing: for SpawnOptions.
  std::vector<int> procs_fds() const;
  // OOM kills the kernel made inside so far.
  std::uint64_t oom_kills() const;
  // The most memory the cgroup held (bytes; 0 when the kernel does not say).
  std::uint64_t peak_memory_bytes() const;
  // Kills every process inside, until none is left.
  void kill_all() const;
  const std::vector<std::string>& directories() const { return m_dirs; }

 private:
  CgroupHost m_host;
  std::vector<std::string> m_dirs;  // memory's first
  std::vector<UniqueFd> m_procs;
};

// Kills what is in the cgroup directory `dir` and removes it; false when it
// could not be removed.
bool remove_cgroup(const std::string& dir);

// The names of the sandboxes' cgroups under the host's parents (each once).
std::vector<std::string> job_cgroup_names(const CgroupHost& host);
// Empties and removes the cgroup(s) called `name` in every hierarchy; false
// when one could not be removed.
bool remove_job_cgroup(const CgroupHost& host, const std::string& name);
// True when the cgroup(s) called `name` hold no process and were made more
// than `min_age_seconds` ago: a sandbox's cgroup holds its processes from
// the moment it starts to its end, so such a one is left over, whoever made
// it (a repository since deleted).
bool job_cgroup_idle(const CgroupHost& host, const std::string& name, std::int64_t min_age_seconds);

}  // namespace mullet::sandbox
