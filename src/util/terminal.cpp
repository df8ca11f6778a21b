#include "util/terminal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include <atomic>
#include <cerrno>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::util {
namespace {

std::atomic<bool> g_window_changed{false};

void on_window_change(int /*number*/) {
  g_window_changed.store(true);
}

}  // namespace

PseudoTerminal open_pseudo_terminal() {
  PseudoTerminal pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master) throw failure("cannot open a pseudo-terminal: " + errno_text(errno));
  if (::grantpt(pty.master.get()) != 0 || ::unlockpt(pty.master.get()) != 0) {
    throw failure("cannot prepare a pseudo-terminal: " + errno_text(errno));
  }
  // The slave by the master's descriptor, not by a name anyone could swap.
  pty.slave.reset(::ioctl(pty.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.slave) throw failure("cannot open a pseudo-terminal's slave: " + errno_text(errno));
  return pty;
}

RawMode::RawMode(int fd) : m_fd(fd) {
  termios mode{};
  if (::tcgetattr(fd, &mode) != 0) return;
  m_saved = mode;
  ::cfmakeraw(&mode);
  ::tcsetattr(fd, TCSANOW, &mode);
}

RawMode::~RawMode() {
  if (m_saved) ::tcsetattr(m_fd, TCSADRAIN, &*m_saved);
}

void copy_window_size(int from, int to) {
  winsize size{};
  if (::ioctl(from, TIOCGWINSZ, &size) == 0 && size.ws_row > 0) ::ioctl(to, TIOCSWINSZ, &size);
}

void install_window_change_handler() {
  struct sigaction action {};
  action.sa_handler = on_window_change;
  sigemptyset(&action.sa_mask);
  sigaction(SIGWINCH, &action, nullptr);
}

bool take_window_change() {
  return g_window_changed.exchange(false);
}

}  // namespace mullet::util
