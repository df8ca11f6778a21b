#include "jobs/stale_cgroups.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include <git2.h>

#include "git/handles.hpp"
#include "jobs/id.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "sandbox/cgroup.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

constexpr std::string_view shell_infix = "-shell-";
// A sandbox's cgroup is empty only for the moments before its first process
// joins and after its end; one empty for longer is a leftover.
constexpr std::int64_t idle_seconds = 60;

// A positive decimal number without sign or leading zero, or 0.
int positive_number(std::string_view text) {
  int number = 0;
  if (text.empty() || text.front() == '0') return 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  return error == std::errc() && end == text.data() + text.size() ? number : 0;
}

// The hosts to sweep: what `setting` gives, and what "auto" gives when that
// is another (a user who turned cgroups off after a crash).
std::vector<sandbox::CgroupHost> hosts_for(const std::string& setting) {
  std::vector<sandbox::CgroupHost> hosts;
  for (const auto& each : {setting, std::string("auto")}) {
    sandbox::CgroupHost host = sandbox::detect_host_cgroups(each);
    if (host.version == sandbox::CgroupVersion::none) continue;
    bool seen = false;
    for (const auto& known : hosts) seen = seen || known.memory_parent == host.memory_parent;
    if (!seen) hosts.push_back(std::move(host));
  }
  return hosts;
}

bool stale(const std::string& key, const JobStore& store, const sandbox::CgroupHost& host, const std::string& name,
           const CgroupOwner& owner) {
  // Another repository's job of the same id may be running right now.
  if (owner.repository != key) return sandbox::job_cgroup_idle(host, name, idle_seconds);
  if (owner.shell_pid > 0) return ::kill(owner.shell_pid, 0) != 0 && errno == ESRCH;
  std::optional<StoredJob> job;
  try {
    job = store.load(owner.job);
  } catch (const Error&) {
    return false;  // a damaged record names no runner we trust
  }
  if (!job) return sandbox::job_cgroup_idle(host, name, idle_seconds);
  return effective_state(job->record) != JobState::running;
}

}  // namespace

std::string job_cgroup_name(const std::string& key, const std::string& id) {
  return key + "." + id;
}

std::string node_cgroup_name(const std::string& key, const std::string& id, int number) {
  return job_cgroup_name(key, id) + "-" + std::to_string(number);
}

std::optional<CgroupOwner> cgroup_owner(const std::string& full_name) {
  const std::size_t id_at = repository_key_length + 1;
  if (full_name.size() < id_at || full_name[repository_key_length] != '.' ||
      full_name.find_first_not_of("0123456789abcdef") != repository_key_length) {
    return std::nullopt;
  }
  const std::string name = full_name.substr(id_at);
  if (name.size() < job_id_length || !is_valid_job_id(name.substr(0, job_id_length))) return std::nullopt;
  CgroupOwner owner{full_name.substr(0, repository_key_length), name.substr(0, job_id_length), 0};
  const std::string_view rest = std::string_view(name).substr(job_id_length);
  if (rest.empty()) return owner;
  if (rest.substr(0, shell_infix.size()) == shell_infix) {
    owner.shell_pid = positive_number(rest.substr(shell_infix.size()));
    return owner.shell_pid > 0 ? std::optional(owner) : std::nullopt;
  }
  if (rest.front() == '-' && positive_number(rest.substr(1)) > 0) return owner;
  return std::nullopt;
}

std::string shell_cgroup_name(const std::string& key, const std::string& id) {
  return job_cgroup_name(key, id) + std::string(shell_infix) + std::to_string(::getpid());
}

void sweep_stale_cgroups(const git::Repository& repo, const JobStore& store, const std::string& setting) {
  const std::string key = repository_key(repo);
  for (const auto& host : hosts_for(setting)) {
    for (const auto& name : sandbox::job_cgroup_names(host)) {
      const auto owner = cgroup_owner(name);
      if (owner && stale(key, store, host, name, *owner)) sandbox::remove_job_cgroup(host, name);
    }
  }
}

void remove_job_cgroups(const git::Repository& repo, const std::string& id, const std::string& setting) {
  const std::string key = repository_key(repo);
  for (const auto& host : hosts_for(setting)) {
    for (const auto& name : sandbox::job_cgroup_names(host)) {
      const auto owner = cgroup_owner(name);
      if (owner && owner->repository == key && owner->job == id && owner->shell_pid == 0) {
        sandbox::remove_job_cgroup(host, name);
      }
    }
  }
}

}  // namespace mullet::jobs
