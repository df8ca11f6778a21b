#!/usr/bin/env python3
"""Makes each system call the sandbox's filter denies, in a form that works
(or fails otherwise than with EPERM) without the filter, and prints one line
per call: NAME ERRNO-NAME (OK when it succeeded). Run on the host too, as the
baseline that shows each probe can tell the filter from its absence.

Used by tests/security/test_syscall_filter.sh."""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "keyctl": 250, "add_key": 248,
    "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "modify_ldt": 154,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "acct": 163, "quotactl": 179, "syslog": 103,
    "uselib": 134, "swapon": 167, "swapoff": 168, "reboot": 169, "mount": 165, "umount2": 166,
    "pivot_root": 155, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429,
    "open_tree": 428, "mount_setattr": 442, "personality": 135, "ioctl": 16, "socket": 41, "unshare": 272,
}
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000


def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return "OK" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def in_child(label, body):
    """Runs body() in a child process (some probes change the process) and
    prints its line."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.write(write_end, body().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    text = os.read(read_end, 4096).decode() or "CHILD-DIED"
    os.waitpid(pid, 0)
    print(label, text)


def in_user_namespace(name, *args):
    """The mount family in a user and mount namespace of the child's own,
    where without the filter it is allowed."""
    def body():
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            return "UNSHARE-FAILED-" + errno.errorcode.get(ctypes.get_errno(), "?")
        return call(name, *args)
    in_child(name, body)


buffer = ctypes.create_string_buffer(4096)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 16)
path = lambda text: ctypes.c_char_p(text.encode())

in_child("ptrace", lambda: call("ptrace", 0, 0, 0, 0))  # PTRACE_TRACEME
print("process_vm_readv", call("process_vm_readv", os.getpid(), iov, 1, iov, 1, 0))
print("process_vm_writev", call("process_vm_writev", os.getpid(), iov, 1, iov, 1, 0))
print("keyctl", call("keyctl", 0, -3, 0))  # KEYCTL_GET_KEYRING_ID of the session keyring
print("add_key", call("add_key", path("user"), path("mullet-probe"), path("x"), 1, -2))
print("request_key", call("request_key", path("user"), path("mullet-no-such-key"), None, -2))
print("bpf", call("bpf", 999, None, 0))
print("perf_event_open", call("perf_event_open", None, 0, -1, -1, 0))
print("userfaultfd", call("userfaultfd", 1))  # UFFD_USER_MODE_ONLY
print("kexec_load", call("kexec_load", 0, 0, None, 0))
print("kexec_file_load", call("kexec_file_load", -1, -1, 0, None, 0))
print("init_module", call("init_module", None, 0, path("")))
print("finit_module", call("finit_module", -1, path(""), 0))
print("delete_module", call("delete_module", path("mullet_no_such_module"), 0))
print("io_uring_setup", call("io_uring_setup", 1, None))
print("io_uring_enter", call("io_uring_enter", -1, 0, 0, 0, None, 0))
print("io_uring_register", call("io_uring_register", -1, 0, None, 0))
print("modify_ldt", call("modify_ldt", 0, buffer, 16))
print("open_by_handle_at", call("open_by_handle_at", -1, None, 0))
print("name_to_handle_at", call("name_to_handle_at", -100, path("."), None, None, 0))
print("acct", call("acct", None))
print("quotactl", call("quotactl", 0, None, 0, None))
print("syslog", call("syslog", 10, None, 0))  # SYSLOG_ACTION_SIZE_BUFFER
print("uselib", call("uselib", None))
print("swapon", call("swapon", None, 0))
print("swapoff", call("swapoff", None))
print("reboot", call("reboot", 0, 0, 0, None))
in_user_namespace("mount", path("none"), path("/"), path("tmpfs"), 0, None)
in_user_namespace("umount2", path("/"), 2)  # MNT_DETACH
in_user_namespace("pivot_root", path("/"), path("/"))
in_user_namespace("fsopen", path("tmpfs"), 0)
in_user_namespace("fsconfig", -1, 0, None, None, 0)
in_user_namespace("fsmount", -1, 0, 0)
in_user_namespace("fspick", -100, path("/"), 0)
in_user_namespace("move_mount", -1, path(""), -1, path(""), 0)
in_user_namespace("open_tree", -100, path("/"), 0)
in_user_namespace("mount_setattr", -1, path(""), 0, None, 0)
in_child("personality", lambda: call("personality", 0x0040000))  # ADDR_NO_RANDOMIZE
print("personality-query", call("personality", 0xFFFFFFFF))
print("ioctl-TIOCSTI", call("ioctl", 0, 0x5412, path("x")))
print("ioctl-TIOCSTI-high-bits", call("ioctl", 0, 0x100005412, path("x")))
print("ioctl-TIOCLINUX", call("ioctl", 0, 0x541C, buffer))
for family, label in ((16, "netlink"), (38, "alg"), (40, "vsock"), (17, "packet"), (0, "unspec"), (1000, "1000")):
    fd = libc.socket(family, 2 if family != 16 else 3, 0)  # SOCK_DGRAM, netlink SOCK_RAW
    print("socket-" + label, "OK" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
# What must keep working.
for family, label in ((1, "unix"), (2, "inet"), (10, "inet6")):
    fd = libc.socket(family, 1, 0)
    print("allowed-socket-" + label, "OK" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
print("allowed-personality-linux", call("personality", 0))
print("allowed-ioctl-TIOCGWINSZ", call("ioctl", 0, 0x5413, buffer))
print("PROBE-END")
sys.stdout.flush()
