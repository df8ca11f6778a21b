// What the shell completions ask git-mullet (`git mullet __complete-jobs
// COMMAND`, hidden): the jobs COMMAND accepts, one a line, "ID<TAB>STATE
// TITLE", for shells that show descriptions.
#pragma once

#include <string>

namespace mullet::cli {

// Prints nothing (and returns 0) outside a repository or on any error: a
// completion must never print an error into the command line being typed.
int complete_jobs(const std::string& command);

}  // namespace mullet::cli
