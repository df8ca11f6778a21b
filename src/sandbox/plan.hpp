// A sandbox plan: everything one sandboxed process gets, as plain data.
//
// Plans are built by pure functions (sandbox/policy.hpp), printed by
// `run --dry-run`, checked by unit tests, and turned into bubblewrap arguments
// in exactly one place (sandbox/bwrap.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/cgroup.hpp"
#include "sandbox/syscall_filter.hpp"

namespace mullet::sandbox {

// Fixed paths inside every sandbox: none reveals the user's name or home.
namespace inside {
// Holds everything below, and is execute-only (0111) on the read-only root:
// each entry is reachable by its name, but nothing can list it, so a search
// from / or /mullet (Claude Code's Grep and Glob) never reaches the home,
// whose direct path our settings deny.
inline constexpr const char* sealed_root = "/mullet";
inline constexpr const char* work_tree = "/mullet/work";
inline constexpr const char* git_dir = "/mullet/git";
inline constexpr const char* objects = "/mullet/objects";
inline constexpr const char* home = "/mullet/home";
inline constexpr const char* helper = "/mullet/bin/git-mullet";
inline constexpr const char* path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
inline constexpr const char* proxy_socket = "/mullet/proxy.sock";
inline constexpr int proxy_port = 3128;
// The credential endpoint (net/credential_endpoint.hpp), served by the wall
// check's second bridge as http://127.0.0.1:<api_port>.
inline constexpr const char* api_socket = "/mullet/api.sock";
inline constexpr int api_port = 3129;
}  // namespace inside

enum class MountKind {
  read_only_bind,  // source must exist and contain no symlink
  writable_bind,   // likewise
  tmpfs,           // empty, private, size-capped
  proc,            // a /proc of the sandbox's own pid namespace
  dev,             // a minimal /dev
  directory,       // an empty directory (on a tmpfs above it)
  sealed,          // an empty, execute-only directory: entries by name only
  symlink,         // `source` is the link's target
  mask,            // an empty file (`source`) bound over a path, hiding it
};

struct Mount {
  MountKind kind;
  std::string source;            // host path (binds), link target (symlink)
  std::string destination;       // path inside
  std::uint64_t size_bytes = 0;  // tmpfs size
  bool operator==(const Mount&) const = default;
};

struct Limits {
  std::int64_t wall_seconds = 0;        // 0: none
  std::int64_t inactivity_seconds = 0;  // 0: none
  std::int64_t memory_mb = 0;
  std::int64_t processes = 0;
  std::int64_t disk_mb = 0;  // over the writable binds; also the largest file
  // Where the kernel holds memory_mb and processes (a cgroup per sandbox);
  // version none: rlimits and polling.
  CgroupHost cgroup = {};
  // The sandbox's cgroup's name under the host's parents (jobs/: the job's
  // id, "-N" for a node); empty: no cgroup.
  std::string cgroup_name = {};
};

struct Network {
  // host:port destinations this phase may reach through the egress proxy.
  // Empty: no network at all (the sandbox has only loopback).
  std::vector<std::string> grants;
  // The egress proxy's unix socket on the host (empty without grants).
  std::string proxy_socket;
  // The credential endpoint's unix socket on the host: the worker's API,
  // with the user's credential added outside. Empty: no endpoint.
  std::string api_socket;
  // Where the endpoint forwards to (shown by --dry-run; never a credential).
  std::string api_upstream;
};

// The work tree as a kernel overlay (sandbox/overlay.hpp): mounted on the
// source of the bind at inside::work_tree, in a mount namespace of ours, by
// the child that becomes bwrap; the host never has it mounted.
struct Overlay {
  std::string lower;  // the pristine checkout: never bound, never writable from a sandbox
  std::string upper;  // this sandbox's changes: what the host reads (snapshot, disk)
  std::string work;   // overlayfs's scratch directory, beside upper
  // Served by a fuse-overlayfs daemon (sandbox/fuse_overlay.hpp) instead of
  // kernel overlayfs; as root only.
  bool fuse = false;
  bool operator==(const Overlay&) const = default;
};

// [limits] disk_mb held by the kernel (sandbox/disk_image.hpp): the phase's
// writable layers live in an ext4 file system of disk_mb in a sparse image
// file, loop-mounted on `mount_point` by the child that becomes bwrap (in the
// staging namespace, before the overlay), so a write past it fails with
// ENOSPC. The overlay's upper and work dirs and the home bind's source are
// then below mount_point; the host only ever mounts the image in a private
// namespace of its own (to fill and drain it).
struct DiskImage {
  std::string image;        // the image file: <job>/disk.img
  std::string mount_point;  // <job>/disk, an empty directory on the host
  std::uint64_t bytes = 0;
  bool operator==(const DiskImage&) const = default;
};

struct Plan {
  std::string phase;
  std::vector<Mount> mounts;  // applied in order
  std::map<std::string, std::string> env;
  std::vector<std::string> command;  // argv inside, after the wall check
  std::string cwd;
  Network network;
  Limits limits;
  // The host uid/gid the sandbox runs as; set when git-mullet runs as root,
  // so sandboxed code never holds root's file access.
  std::optional<uid_t> host_uid;
  std::optional<gid_t> host_gid;
  // Before a job starts (run --dry-run) its uid is not chosen yet: it will be
  // one of host_uid .. host_uid + host_uid_choices - 1 (and its gid the same).
  std::uint32_t host_uid_choices = 1;
  // What the objects bound at inside::objects hold: "all" (the user's whole
  // store), "base" (what the base commit reaches) or "none" (the base commit
  // and its tree); empty where no repository is involved (doctor).
  std::string history;
  // Set when the work tree is an overlay of a pristine checkout; mounted as
  // root in the staging namespace, else in a user namespace of ours.
  std::optional<Overlay> work_tree_overlay;
  // What the work tree is and why (run --dry-run); empty: not said.
  std::string work_tree_note;
  // Set when the kernel holds disk_mb (above); else the runner's watch alone.
  std::optional<DiskImage> disk_image;
  // How disk_mb is held, for people (sandbox/disk_image.hpp's
  // describe_disk_cap): "ext4 image of N MiB (kernel)" or "watched (polling): why".
  std::string disk_note;
  // Directories the wall check must find empty.
  std::vector<std::string> must_be_empty;
  // Directories the wall check must be unable to list or change.
  std::vector<std::string> must_be_sealed;
  bool feeds_stdin = false;
  // The command's stdin, stdout and stderr are a terminal (a pty's slave the
  // caller owns, never the user's terminal), made its controlling terminal
  // inside: `git mullet shell` on a terminal.
  bool controlling_terminal = false;
  // What the sandbox may not ask the kernel (syscall_filter.hpp).
  SyscallFilter syscall_filter;
};

nlohmann::json to_json(const Plan& plan);
std::string describe(const Plan& plan);
std::string mount_kind_name(MountKind kind);

}  // namespace mullet::sandbox
