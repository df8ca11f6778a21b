// Our log lines on stderr ("git mullet [warning] ..."): their text often
// quotes what a worker, a repository or an upstream chose (a model name, a
// request path), so every message is made terminal-safe on its way out.
#pragma once

#include <memory>

#include <spdlog/formatter.h>

namespace mullet::cli {

// The formatter of our stderr logger: "git mullet [LEVEL] MESSAGE", the
// message with control bytes and escape sequences shown, never obeyed.
std::unique_ptr<spdlog::formatter> make_log_formatter();

// The default logger: stderr, make_log_formatter(), the level from
// GIT_MULLET_LOG (default: warn).
void set_up_logging();

}  // namespace mullet::cli
