#include "sandbox/plan.hpp"

#include <sstream>

#include "util/strings.hpp"

namespace mullet::sandbox {

namespace {

std::string history_meaning(const std::string& history) {
  if (history == "all") return "every object of the repository: other branches, tags, stashes, unreachable objects";
  if (history == "base") return "the objects the base commit reaches: its files and history";
  if (history == "none") return "the base commit and its files, no history";
  return "?";
}

}  // namespace

std::string mount_kind_name(MountKind kind) {
  switch (kind) {
    case MountKind::read_only_bind: return "ro-bind";
    case MountKind::writable_bind: return "bind";
    case MountKind::tmpfs: return "tmpfs";
    case MountKind::proc: return "proc";
    case MountKind::dev: return "dev";
    case MountKind::directory: return "dir";
    case MountKind::sealed: return "sealed";
    case MountKind::symlink: return "symlink";
    case MountKind::mask: return "mask";
  }
  return "?";
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json mounts = nlohmann::json::array();
  for (const auto& mount : plan.mounts) {
    nlohmann::json item = {{"kind", mount_kind_name(mount.kind)}, {"destination", mount.destination}};
    if (!mount.source.empty()) item["source"] = mount.source;
    if (mount.size_bytes > 0) item["size_bytes"] = mount.size_bytes;
    mounts.push_back(item);
  }
  std::vector<std::string> env_names;
  for (const auto& [name, value] : plan.env) env_names.push_back(name);
  nlohmann::json json = {
      {"phase", plan.phase},
      {"command", plan.command},
      {"cwd", plan.cwd},
      {"mounts", mounts},
      {"env", env_names},
      {"network", {{"grants", plan.network.grants}, {"api", plan.network.api_upstream}}},
      {"limits",
       {{"wall_seconds", plan.limits.wall_seconds},
        {"inactivity_seconds", plan.limits.inactivity_seconds},
        {"memory_mb", plan.limits.memory_mb},
        {"processes", plan.limits.processes},
        {"disk_mb", plan.limits.disk_mb},
        {"enforcement", describe_enforcement(plan.limits.cgroup)}}},
  };
  if (!plan.history.empty()) json["history"] = plan.history;
  if (!plan.work_tree_note.empty()) json["work_tree"] = plan.work_tree_note;
  if (!plan.disk_note.empty()) json["disk"] = plan.disk_note;
  if (plan.work_tree_overlay) {
    json["work_tree_overlay"] = {{"lower", plan.work_tree_overlay->lower},
                                 {"upper", plan.work_tree_overlay->upper},
                                 {"work", plan.work_tree_overlay->work},
                                 {"by", plan.work_tree_overlay->fuse ? "fuse-overlayfs" : "kernel"}};
  }
  json["host_uid"] = plan.host_uid ? nlohmann::json(*plan.host_uid) : nlohmann::json();
  if (plan.host_uid && plan.host_uid_choices > 1) json["host_uid_choices"] = plan.host_uid_choices;
  json["syscall_filter"] = to_json(plan.syscall_filter);
  return json;
}

std::string describe(const Plan& plan) {
  std::ostringstream out;
  out << "phase " << plan.phase << "\n";
  out << "  command:     " << util::shell_join(plan.command) << "\n";
  out << "  directory:   " << plan.cwd << "\n";
  if (plan.host_uid && plan.host_uid_choices > 1) {
    out << "  runs as:     a host uid of its own, the first of " << *plan.host_uid << ".."
        << static_cast<std::uint64_t>(*plan.host_uid) + plan.host_uid_choices - 1
        << " no running job holds (git-mullet runs as root)\n";
  } else if (plan.host_uid) {
    out << "  runs as:     host uid " << *plan.host_uid << " (git-mullet runs as root)\n";
  }
  out << "  network:     ";
  if (plan.network.grants.empty()) {
    out << "none (loopback only)\n";
  } else {
    out << "through the egress proxy to " << util::join(plan.network.grants, ", ") << "\n";
  }
  if (!plan.network.api_upstream.empty()) {
    out << "  api:         http://127.0.0.1:" << inside::api_port << ", the credential endpoint, which adds the "
        << "credential outside and forwards to " << plan.network.api_upstream << "\n";
  }
  out << "  limits:      wall " << plan.limits.wall_seconds << " s, inactivity " << plan.limits.inactivity_seconds
      << " s, memory " << plan.limits.memory_mb << " MiB, processes " << plan.limits.processes << ", disk "
      << plan.limits.disk_mb << " MiB\n";
  out << "  enforced:    " << describe_enforcement(plan.limits.cgroup) << "\n";
  if (!plan.history.empty()) {
    out << "  history:     " << plan.history << " (" << history_meaning(plan.history) << ")";
    for (const auto& mount : plan.mounts) {
      if (mount.destination == inside::objects) out << ", " << inside::objects << " <- " << mount.source;
    }
    out << "\n";
  }
  if (!plan.work_tree_note.empty()) out << "  work tree:   " << plan.work_tree_note << "\n";
  if (!plan.disk_note.empty()) out << "  disk:        " << plan.disk_note << "\n";
  if (plan.work_tree_overlay) {
    out << "  overlay:     "
        << (plan.work_tree_overlay->fuse ? "served by fuse-overlayfs as the sandbox's uid"
            : plan.host_uid              ? "mounted as root"
                                         : "mounted in a user namespace of ours")
        << ", lower " << plan.work_tree_overlay->lower << ", changes in " << plan.work_tree_overlay->upper << "\n";
  }
  std::vector<std::string> env_names;
  for (const auto& [name, value] : plan.env) env_names.push_back(name);
  out << "  environment: " << util::join(env_names, " ") << "\n";
  out << "  syscalls:    " << describe(plan.syscall_filter) << "\n";
  out << "  mounts:\n";
  for (const auto& mount : plan.mounts) {
    out << "    " << mount_kind_name(mount.kind);
    for (std::size_t pad = mount_kind_name(mount.kind).size(); pad < 8; ++pad) out << ' ';
    out << mount.destination;
    if (!mount.source.empty() && mount.source != mount.destination) {
      out << (mount.kind == MountKind::symlink ? " -> " : " <- ") << mount.source;
    }
    if (mount.size_bytes > 0) out << " (" << mount.size_bytes / (std::uint64_t{1024} * 1024) << " MiB)";
    if (mount.kind == MountKind::sealed) out << " (mode 0111: what is below is reached by name, never listed)";
    out << "\n";
  }
  return out.str();
}

}  // namespace mullet::sandbox
