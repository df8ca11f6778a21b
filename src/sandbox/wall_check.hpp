// The wall check: a helper mode of our own binary that runs first inside every
// sandbox, checks the walls from the inside, then execs the real command.
// It guards against a bubblewrap that silently ignored an option.
#pragma once

#include <string>
#include <vector>

namespace mullet::sandbox {

// `args` are the helper's arguments after "__wall-check". Returns only on
// failure (the exit code); on success it replaces itself with the command.
int wall_check_main(const std::vector<std::string>& args);

}  // namespace mullet::sandbox
