// The policy: pure functions from what a phase needs to a sandbox Plan.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/plan.hpp"

namespace mullet::sandbox {

// One entry of the host's root, as policy needs to know it.
struct RootEntry {
  std::string name;  // "usr", "bin", ...
  bool is_symlink = false;
  std::string link_target;  // when a symlink
};

struct PolicyInputs {
  std::string phase;
  std::string work_tree;                          // host path, writable inside
  std::optional<Overlay> work_tree_overlay;       // set: work_tree is this overlay's mount point
  std::string clone_git_dir;                      // host path, read-only inside
  std::string objects_dir;                        // the objects the sandbox may read, read-only inside
  std::string history;                            // what they hold: all, base or none ([sandbox] history)
  std::vector<std::string> borrowed_objects;      // what those borrow (alternates), read-only too
  std::vector<std::string> dirs_with_alternates;  // which of the above have an info/alternates file
  std::string home_dir;                           // host path of the job's private home
  std::string helper_binary;                      // our own executable (the wall check)
  std::string empty_file;                         // an empty read-only file, bound over what must be hidden
  std::string tmp_name;                           // "mullet-XXXX": TMPDIR is /tmp/<tmp_name>
  std::vector<RootEntry> root_entries;            // what exists at the host's /
  std::map<std::string, std::string> host_env;    // ours, to copy allowed names from
  std::vector<std::string> extra_env_names;       // [sandbox] env from the user config
  std::map<std::string, std::string> executor_env;
  std::vector<Mount> executor_mounts;  // e.g. the worker binary
  std::vector<std::string> command;
  Limits limits;
  Network network;
  bool feeds_stdin = false;
  // The command starts a sandbox of its own (Claude Code's): the system call
  // filter leaves it the mount calls and netlink.
  bool nested_sandbox = false;
  std::optional<uid_t> host_uid;
  std::optional<gid_t> host_gid;
};

// The system directories the sandbox's read-only root is made of.
const std::vector<std::string>& system_directories();
// Environment names copied from ours when set (besides the user's list).
const std::vector<std::string>& passthrough_env_names();

Plan build_plan(const PolicyInputs& inputs);

// Unix sockets named by our environment (SSH_AUTH_SOCK, DOCKER_HOST, ...)
// that would be visible inside unless masked.
std::vector<std::string> socket_paths_from_env(const std::map<std::string, std::string>& env);

}  // namespace mullet::sandbox
