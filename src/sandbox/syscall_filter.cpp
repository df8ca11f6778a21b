#include "sandbox/syscall_filter.hpp"

#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::sandbox {
namespace {

void deny_all(SyscallFilter& filter, std::initializer_list<const char*> names, const std::string& why) {
  for (const char* name : names) filter.denied.push_back({name, std::nullopt, why});
}

// A request number is 32 bits, but the argument is 64: a caller may set
// the upper half, which the kernel ignores, so only the lower half is compared.
SyscallRule deny_ioctl(unsigned long request, const std::string& why) {
  return {"ioctl", ArgumentTest{1, ArgumentTest::Op::masked_equal, request, 0xFFFFFFFFULL}, why};
}

// socket() of any family but those allowed: one rule per family in the
// gaps, then one for everything above the last (libseccomp compares an
// argument once per rule).
void deny_socket_families(SyscallFilter& filter, std::vector<int> allowed) {
  std::sort(allowed.begin(), allowed.end());
  const std::string why = "socket families other than unix, inet and inet6";
  int next = 0;
  for (const int family : allowed) {
    for (int denied = next; denied < family; ++denied) {
      filter.denied.push_back(
          {"socket", ArgumentTest{0, ArgumentTest::Op::equal, static_cast<std::uint64_t>(denied), 0}, why});
    }
    next = family + 1;
  }
  filter.denied.push_back(
      {"socket", ArgumentTest{0, ArgumentTest::Op::at_least, static_cast<std::uint64_t>(next), 0}, why});
}

scmp_compare compare_op(ArgumentTest::Op op) {
  switch (op) {
    case ArgumentTest::Op::equal: return SCMP_CMP_EQ;
    case ArgumentTest::Op::not_equal: return SCMP_CMP_NE;
    case ArgumentTest::Op::at_least: return SCMP_CMP_GE;
    case ArgumentTest::Op::masked_equal: return SCMP_CMP_MASKED_EQ;
  }
  return SCMP_CMP_EQ;
}

std::string op_name(ArgumentTest::Op op) {
  switch (op) {
    case ArgumentTest::Op::equal: return "==";
    case ArgumentTest::Op::not_equal: return "!=";
    case ArgumentTest::Op::at_least: return ">=";
    case ArgumentTest::Op::masked_equal: return "&mask==";
  }
  return "?";
}

struct SeccompContext {
  scmp_filter_ctx ctx;
  explicit SeccompContext(std::uint32_t default_action) : ctx(seccomp_init(default_action)) {}
  SeccompContext(const SeccompContext&) = delete;
  SeccompContext& operator=(const SeccompContext&) = delete;
  ~SeccompContext() {
    if (ctx != nullptr) seccomp_release(ctx);
  }
};

Error filter_error(const std::string& what, int result) {
  return refused_error("cannot build the sandbox's system call filter: " + what + ": " + util::errno_text(-result),
                       "libseccomp could not compile it; the job does not run without it");
}

}  // namespace

SyscallFilter syscall_filter(bool nested_sandbox) {
  SyscallFilter filter;
  filter.nested_sandbox = nested_sandbox;
  deny_all(filter, {"ptrace", "process_vm_readv", "process_vm_writev"},
           "reading or steering another process (a worker once stalled a job by attaching to the sandbox's init)");
  deny_all(filter, {"keyctl", "add_key", "request_key"}, "the kernel keyring is not namespaced");
  deny_all(filter, {"bpf", "perf_event_open", "userfaultfd"}, "kernel attack surface a coding worker never needs");
  deny_all(filter, {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"},
           "loading kernels or modules");
  deny_all(filter, {"io_uring_setup", "io_uring_enter", "io_uring_register"},
           "io_uring bypasses system call filtering and has a history of escapes");
  deny_all(filter, {"modify_ldt", "vm86", "vm86old"}, "old x86 interfaces with a history of escapes");
  deny_all(filter, {"open_by_handle_at", "name_to_handle_at"}, "opening files by handle walks past mount points");
  deny_all(filter, {"acct", "quotactl", "syslog", "uselib", "swapon", "swapoff", "reboot"}, "host administration");
  if (!nested_sandbox) {
    deny_all(filter,
             {"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
              "mount_setattr"},
             "changing mounts (only a worker that runs a sandbox of its own needs them)");
  }
  // As Flatpak: only the default (PER_LINUX). libseccomp compares an
  // argument once per rule, so the query (0xffffffff) is refused too.
  filter.denied.push_back({"personality", ArgumentTest{0, ArgumentTest::Op::not_equal, 0, 0},
                           "execution domains other than Linux's (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...)"});
  filter.denied.push_back(deny_ioctl(TIOCSTI, "typing into a terminal (TIOCSTI)"));
  filter.denied.push_back(deny_ioctl(TIOCLINUX, "the Linux console's selection and keyboard (TIOCLINUX)"));
  std::vector<int> families = {AF_UNIX, AF_INET, AF_INET6};
  // A nested bubblewrap brings its loopback up over netlink.
  if (nested_sandbox) families.push_back(AF_NETLINK);
  deny_socket_families(filter, families);
  return filter;
}

nlohmann::json to_json(const SyscallFilter& filter) {
  nlohmann::json denied = nlohmann::json::array();
  for (const auto& rule : filter.denied) {
    nlohmann::json item = {{"syscall", rule.syscall}, {"why", rule.why}};
    if (rule.when) {
      item["when"] = "arg" + std::to_string(rule.when->index) + " " + op_name(rule.when->op) + " " +
                     std::to_string(rule.when->value);
      if (rule.when->op == ArgumentTest::Op::masked_equal) item["mask"] = rule.when->mask;
    }
    denied.push_back(std::move(item));
  }
  return {{"errno", "EPERM"},
          {"nested_sandbox", filter.nested_sandbox},
          {"other_architectures", "killed"},
          {"denied", std::move(denied)}};
}

std::string describe(const SyscallFilter& filter) {
  std::vector<std::string> always;
  std::vector<std::string> sometimes;
  for (const auto& rule : filter.denied) {
    auto& list = rule.when ? sometimes : always;
    if (std::find(list.begin(), list.end(), rule.syscall) == list.end()) list.push_back(rule.syscall);
  }
  std::string out = "EPERM for";
  for (const auto& name : always) out += " " + name;
  out += "; some uses of";
  for (const auto& name : sometimes) out += " " + name;
  out += filter.nested_sandbox ? " (socket: unix, inet, inet6, netlink only; mounts allowed: the worker's own sandbox)"
                               : " (socket: unix, inet, inet6 only)";
  out += "; ioctl TIOCSTI and TIOCLINUX; personality other than PER_LINUX; 32-bit and x32 calls kill the process";
  return out;
}

UniqueFd compile_syscall_filter(const SyscallFilter& filter) {
  SeccompContext context(SCMP_ACT_ALLOW);
  if (context.ctx == nullptr) throw filter_error("seccomp_init", -ENOMEM);
  // Only the native architecture's numbers are ruled on; a call through
  // another entry point is killed rather than let through.
  if (const int result = seccomp_attr_set(context.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); result < 0) {
    throw filter_error("setting the action for other architectures", result);
  }
  for (const auto& rule : filter.denied) {
    const int number = seccomp_syscall_resolve_name(rule.syscall.c_str());
    if (number == __NR_SCMP_ERROR) continue;
    int result = 0;
    if (rule.when) {
      const scmp_arg_cmp test = {rule.when->index, compare_op(rule.when->op),
                                 rule.when->op == ArgumentTest::Op::masked_equal ? rule.when->mask : rule.when->value,
                                 rule.when->value};
      result = seccomp_rule_add_exact(context.ctx, SCMP_ACT_ERRNO(EPERM), number, 1, test);
    } else {
      result = seccomp_rule_add_exact(context.ctx, SCMP_ACT_ERRNO(EPERM), number, 0);
    }
    // A call this architecture has only as a pseudo-call is skipped.
    if (result == -EDOM) continue;
    if (result < 0) throw filter_error("the rule for " + rule.syscall, result);
  }
  UniqueFd program(::memfd_create("git-mullet-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!program) throw filter_error("memfd_create", -errno);
  if (const int result = seccomp_export_bpf(context.ctx, program.get()); result < 0) {
    throw filter_error("exporting the program", result);
  }
  if (::lseek(program.get(), 0, SEEK_SET) != 0 ||
      ::fcntl(program.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    throw filter_error("sealing the program", -errno);
  }
  return program;
}

}  // namespace mullet::sandbox
