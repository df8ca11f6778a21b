// A phase's disk image (sandbox/disk_image.hpp, Plan::disk_image) around
// the phase: made and filled from the job's upper dir and home before it,
// drained back after it, all under a flock on the image, so two runners
// (a resume racing a runner not yet dead) never share it.
//
// The job's directories on the host stay what every host-side reader uses
// (the snapshot, dependency dirs, the mode strip): the image holds a phase's
// writes only while the phase runs. A phase that does not end normally (the
// runner killed) leaves the host's directories as they were before it, which
// is what resume starts from anyway (it trusts only the last snapshot); the
// next phase makes its image afresh.
#pragma once

#include <string>

#include "config/settings.hpp"
#include "jobs/layout.hpp"
#include "sandbox/disk_image.hpp"
#include "sandbox/plan.hpp"
#include "util/fd.hpp"

namespace mullet::jobs {

// Whether a phase's disk_mb is the kernel's (an image) or the watch's, from
// the configuration, whether git-mullet runs as root, the phase's work tree
// and what the host offers (probed now): the one choice plan_for and doctor
// make.
sandbox::DiskCapChoice disk_cap_choice(const config::Settings& settings, bool as_root,
                                       sandbox::DiskCapWorkTree work_tree);

// Where the image's directories are while it is mounted: the overlay's
// upper and work dirs and the home, by the names they have in the job's
// directory.
sandbox::Overlay image_overlay(const JobPaths& paths, const sandbox::Overlay& overlay);
std::string image_home(const JobPaths& paths);

class PhaseDisk {
 public:
  // Takes the flock (refusing when another runner holds it), makes the
  // image and fills it from `dirs` (the job's upper, overlay work dir and
  // home). Throws a refusal on failure.
  PhaseDisk(const JobPaths& paths, const sandbox::DiskImage& image, const SandboxDirs& dirs);
  // Copies the image's upper dir and home into fresh directories and puts
  // them in place of the job's, then empties the image. Returns how many
  // entries were dropped because their path was too long to copy.
  std::size_t drain();

 private:
  JobPaths m_paths;
  sandbox::DiskImage m_image;
  SandboxDirs m_dirs;
  UniqueFd m_lock;
};

}  // namespace mullet::jobs
