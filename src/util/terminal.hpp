// The user's terminal and the pseudo-terminals we hand out instead of it
// (`git mullet shell`): a sandbox never gets a descriptor of the user's
// terminal, since a process holding one can push keystrokes into the user's
// shell (TIOCSTI) or change its modes.
#pragma once

#include <termios.h>

#include <optional>

#include "util/fd.hpp"

namespace mullet::util {

// A new pseudo-terminal pair of our own. Neither end becomes our
// controlling terminal; both are close-on-exec.
struct PseudoTerminal {
  UniqueFd master;
  UniqueFd slave;
};
PseudoTerminal open_pseudo_terminal();

// Puts terminal `fd` in raw mode (no echo, no line editing, no signals from
// keys: every byte goes through) until destroyed, which restores the modes it
// had, on every way out.
class RawMode {
 public:
  explicit RawMode(int fd);
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;
  ~RawMode();

 private:
  int m_fd;
  std::optional<termios> m_saved;
};

// Gives terminal `to` the window size of terminal `from` (no-op when `from`
// has none): the kernel tells `to`'s foreground processes with SIGWINCH.
void copy_window_size(int from, int to);

// SIGWINCH sets a flag (and ends a poll wait); take_window_change() answers
// whether it was raised since the last call.
void install_window_change_handler();
bool take_window_change();

}  // namespace mullet::util
