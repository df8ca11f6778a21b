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

// What a program in a session could leave switched on in the terminal that
// outlives it (the alternate screen, mouse and focus reporting, a hidden
// cursor, colours), switched off: written to the user's terminal after a
// `git mullet shell` session, whose output reaches it as it is.
inline constexpr const char* terminal_display_reset =
    "\x1b[0m\x1b[?1047l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?25h";

// Gives terminal `to` the window size of terminal `from` (no-op when `from`
// has none): the kernel tells `to`'s foreground processes with SIGWINCH.
void copy_window_size(int from, int to);

// SIGWINCH sets a flag (and ends a poll wait); take_window_change() answers
// whether it was raised since the last call.
void install_window_change_handler();
bool take_window_change();

}  // namespace mullet::util
