// The one place a Plan becomes bubblewrap arguments.
#pragma once

#include <string>
#include <vector>

#include "sandbox/plan.hpp"
#include "util/fd.hpp"

namespace mullet::sandbox {

// How bwrap reaches one bind source: an inherited descriptor, or a staged
// path (see staging.hpp). Neither for mounts that are not binds.
struct BindSource {
  int fd = -1;
  std::string staged_path;
  bool is_directory = true;
};

// Bind sources opened without following any symlink, aligned with
// plan.mounts.
struct OpenedBinds {
  std::vector<UniqueFd> owned;
  std::vector<BindSource> sources;
};

// Opens every bind source with util::open_path_no_symlinks; throws a refusal
// naming the first source that is, or passes through, a symlink.
OpenedBinds open_bind_sources(const Plan& plan);

// Pure: the bwrap argv (without the program) for `plan`, binding the opened
// descriptors, with the system call filter read from `syscall_filter_fd`
// (compile_syscall_filter of plan.syscall_filter), running our wall check
// first, which reports on `report_fd`.
// The environment is not in it: argv is readable by every user on the host
// (ps), so bwrap is started with exactly plan.env as its own environment,
// which it hands to the sandbox unchanged.
std::vector<std::string> bwrap_arguments(const Plan& plan, const std::vector<BindSource>& sources, int report_fd,
                                         int syscall_filter_fd);

// The wall check's own arguments (everything after the helper's path).
std::vector<std::string> wall_check_arguments(const Plan& plan, int report_fd);

}  // namespace mullet::sandbox
