// Where a job's scratch directories live: <common git dir>/mullet/jobs/<id>/,
// inside the user's .git, never in their work tree. Paths are real paths, so
// they can be bound into a sandbox (which refuses symlinks).
#pragma once

#include <optional>
#include <string>

#include "git/repository.hpp"
#include "sandbox/plan.hpp"

namespace mullet::jobs {

// What tells this repository's jobs from another's on the same host (a
// record's id is unique only in its repository, and a copied or fetched
// record keeps it): the first 8 hex digits of the git blob hash of the
// repository's real common dir. Names its jobs' cgroups and their runners.
std::string repository_key(const git::Repository& repo);

struct JobPaths {
  std::string root;          // the job's directory, or its node's
  std::string below;         // root relative to the job's directory: "" or "nodes/<N>"
  std::string git_dir;       // the clone's git dir (read-only inside)
  std::string work_tree;     // the clone's work tree (writable inside); an overlay's mount point
  std::string upper;         // an overlaid work tree's changes (its upper dir)
  std::string overlay_work;  // overlayfs's scratch dir beside it
  // fuse-overlayfs's upper and work dirs, as `upper` and `work` of this one
  // directory (one bind gives its daemon both: it renames from one to the
  // other), owned by the sandbox's uid.
  std::string fuse_layers;
  std::string home;  // the sandbox's private HOME
  // [limits] disk_mb held by the kernel (sandbox/disk_image.hpp): the
  // phase's ext4 image and the empty directory it is mounted on in our
  // namespaces (upper, overlay-work and home below it there).
  std::string disk_image;
  std::string disk_mount;
  std::string worker_log;      // the worker's output while it runs
  std::string events_log;      // the worker's event stream, for executors that have one
  std::string executor_files;  // files the executor generated (read-only inside)
  std::string empty_file;      // bound over what a sandbox must not see
  std::string gate;            // a gate's checkout, made afresh for each gate
  std::string cgroup_name;  // its sandboxes' cgroup (sandbox/cgroup.hpp): "<key>.<id>", or "<key>.<id>-<N>" for a node
};

// The directories one sandbox gets: the job's clone, or a gate's checkout.
struct SandboxDirs {
  std::string work_tree;
  std::string git_dir;
  std::string home;
  // Set when work_tree is the mount point of an overlay of a pristine
  // checkout (git/pristine.hpp): the host then sees the work tree only
  // through its layers.
  std::optional<sandbox::Overlay> overlay;
  // The opaque-directory xattr that overlay uses (root: trusted.*, a user
  // namespace: user.*).
  std::string opaque_xattr;
};

// Where the host finds what a sandbox wrote to the work tree: the overlay's
// upper dir, or the work tree itself.
std::string written_tree(const SandboxDirs& dirs);

std::string jobs_directory(const git::Repository& repo);
JobPaths job_paths(const git::Repository& repo, const std::string& id);
// Node `number`'s of a job of several: everything a job of one node has,
// under <job>/nodes/<number>/ (its own clone, home, logs and gate).
JobPaths node_paths(const git::Repository& repo, const std::string& id, int number);
// The setup's and the worker's sandbox: the job's clone.
SandboxDirs worker_dirs(const JobPaths& paths);
SandboxDirs gate_dirs(const JobPaths& paths);

}  // namespace mullet::jobs
