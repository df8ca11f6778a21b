#include <doctest/doctest.h>

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "sandbox/syscall_filter.hpp"

using mullet::sandbox::ArgumentTest;
using mullet::sandbox::compile_syscall_filter;
using mullet::sandbox::syscall_filter;
using mullet::sandbox::SyscallFilter;

namespace {

bool denied_always(const SyscallFilter& filter, const std::string& name) {
  return std::any_of(filter.denied.begin(), filter.denied.end(),
                     [&](const auto& rule) { return rule.syscall == name && !rule.when; });
}

// Whether socket(family, ...) is refused, as the rules say.
bool family_denied(const SyscallFilter& filter, std::uint64_t family) {
  return std::any_of(filter.denied.begin(), filter.denied.end(), [&](const auto& rule) {
    if (rule.syscall != "socket" || !rule.when || rule.when->index != 0) return false;
    if (rule.when->op == ArgumentTest::Op::equal) return family == rule.when->value;
    if (rule.when->op == ArgumentTest::Op::at_least) return family >= rule.when->value;
    return false;
  });
}

}  // namespace

TEST_CASE("syscall filter: what the issue names is denied in every phase") {
  for (const bool nested : {false, true}) {
    const SyscallFilter filter = syscall_filter(nested);
    for (const char* name :
         {"ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key", "bpf",
          "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "io_uring_setup", "io_uring_enter",
          "io_uring_register", "modify_ldt", "vm86", "vm86old", "open_by_handle_at"}) {
      CHECK_MESSAGE(denied_always(filter, name), name);
    }
    const auto ioctl_denied = [&](unsigned long request) {
      return std::any_of(filter.denied.begin(), filter.denied.end(), [&](const auto& rule) {
        return rule.syscall == "ioctl" && rule.when && rule.when->index == 1 &&
               rule.when->op == ArgumentTest::Op::masked_equal && rule.when->mask == 0xFFFFFFFFULL &&
               rule.when->value == request;
      });
    };
    CHECK(ioctl_denied(TIOCSTI));
    CHECK(ioctl_denied(TIOCLINUX));
  }
}

TEST_CASE("syscall filter: the mount calls only for a worker with a sandbox of its own") {
  const char* mount_calls[] = {"mount",   "umount2", "pivot_root", "fsopen",    "fsconfig",
                               "fsmount", "fspick",  "move_mount", "open_tree", "mount_setattr"};
  for (const char* name : mount_calls) {
    CHECK_MESSAGE(denied_always(syscall_filter(false), name), name);
    CHECK_MESSAGE(!denied_always(syscall_filter(true), name), name);
  }
}

TEST_CASE("syscall filter: socket families but unix, inet and inet6 are refused, every number up to the top") {
  const SyscallFilter plain = syscall_filter(false);
  const SyscallFilter nested = syscall_filter(true);
  for (std::uint64_t family = 0; family < 200; ++family) {
    const bool allowed = family == AF_UNIX || family == AF_INET || family == AF_INET6;
    CHECK_MESSAGE(family_denied(plain, family) == !allowed, family);
    CHECK_MESSAGE(family_denied(nested, family) == !(allowed || family == AF_NETLINK), family);
  }
  CHECK(family_denied(plain, 0xFFFFFFFFULL));
}

TEST_CASE("syscall filter: libseccomp compiles it to a sealed program of whole instructions") {
  for (const bool nested : {false, true}) {
    const auto program = compile_syscall_filter(syscall_filter(nested));
    REQUIRE(program);
    struct stat info {};
    REQUIRE(::fstat(program.get(), &info) == 0);
    CHECK(info.st_size > 0);
    CHECK(info.st_size % 8 == 0);  // struct sock_filter
    CHECK(::write(program.get(), "x", 1) == -1);
  }
}
