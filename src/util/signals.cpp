#include "util/signals.hpp"

#include <signal.h>

#include <atomic>

namespace mullet::util {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int number) {
  g_signal.store(number);
}

void on_hangup(int /*number*/) {}

}  // namespace

void install_cancel_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
}

void ignore_hangup() {
  // A handler that does nothing rather than SIG_IGN: an ignored signal stays
  // ignored across exec, and the sandboxes we start must get SIGHUP's default.
  struct sigaction action {};
  action.sa_handler = on_hangup;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &action, nullptr);
}

bool cancel_requested() {
  return g_signal.load() != 0;
}
int cancel_signal() {
  return g_signal.load();
}

}  // namespace mullet::util
