// Which `git diff` options a user may pass through `git mullet diff`: an
// allowlist, since git accepts abbreviations (`--out=F` is `--output=F`)
// and several options run programs or write files. Pure.
#pragma once

#include <string>
#include <vector>

#include "util/error.hpp"

namespace mullet::git {

// What `git mullet diff` passes to git diff, split from the words after the
// job: options (each one word, values attached: `--stat=80`, `-U5`) and paths
// (the words after `--`, and words that are not options).
struct DiffRequest {
  std::vector<std::string> options;
  std::vector<std::string> paths;
};

// Splits and checks them: an option not on the list is refused (exit 2),
// with why for the dangerous ones (`--output`, `--ext-diff`, `--textconv`,
// `--no-index`).
Result<DiffRequest> parse_diff_request(const std::vector<std::string>& words);

// The options passed, for the help and the man page.
std::vector<std::string> allowed_diff_options();

}  // namespace mullet::git
