// The pristine checkout of a base commit that overlaid work trees share
// (their lower dir, sandbox/overlay.hpp), one per base commit and owner:
//   <common git dir>/mullet/pristine/<commit>-<uid>/tree/    the checked-out files
//   <common git dir>/mullet/pristine/<commit>-<uid>/index    an index with their stat data
// The owner is the uid the files belong to (the user, or as root the job's
// sandbox uid): an overlay copies a file up only when its owner is mapped,
// and a sandbox writes what it owns. The tree's `.git` file names the git dir
// as sandboxes see it. Built once, by the first job on the base, in a
// `building-XXXXXX` directory renamed into place (one rename wins a race;
// the build holds a flock on it, so one left by a crash is told apart);
// never changed afterwards, never bound into a sandbox.
//
// Which jobs use an entry is a file `pristine` in each job's directory (or
// each of its nodes' directories, <job>/nodes/<n>/), naming it. Claiming (writing that file) and removing unused
// entries take one flock, so a job that starts on an entry while the last job using it is discarded either keeps it or
// builds it again.
#pragma once

#include <sys/types.h>

#include <string>

#include "git/repository.hpp"

namespace mullet::git {

struct Pristine {
  std::string entry;  // the entry's directory
  std::string tree;   // the checked-out files: the overlay's lower dir
  std::string index;  // what each clone's index starts as
};

// "<commit>-<uid>".
std::string pristine_entry_name(const git_oid& commit, uid_t owner);
// <common git dir>/mullet/pristine
std::string pristine_directory(const Repository& repo);

// The entry for (`commit`, `owner`): built when missing, checked when it
// exists (directories of ours, not symlinks; anything else refuses the job),
// and claimed for the job whose directory is `job_dir` (its `pristine` file).
// `git_dir_as_seen_inside` is what the tree's .git file names.
Pristine claim_pristine(const Repository& repo, const git_oid& commit, uid_t owner, const std::string& job_dir,
                        const std::string& git_dir_as_seen_inside);

// Removes every entry no job directory under `jobs_dir` claims, and every
// `building-*` directory whose build died (a live build holds a flock on
// it). Call after a job's directory is removed.
void remove_unclaimed_pristines(const Repository& repo, const std::string& jobs_dir);

}  // namespace mullet::git
