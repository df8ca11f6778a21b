// SIGINT/SIGTERM turn into a flag that long-running loops poll, so a job is
// stopped and recorded instead of dying half-written.
#pragma once

namespace mullet::util {

void install_cancel_handlers();
// After install_cancel_handlers: SIGHUP no longer cancels. For a detached
// runner, which has no terminal to lose; SIGINT and SIGTERM still cancel.
void ignore_hangup();
bool cancel_requested();
int cancel_signal();

}  // namespace mullet::util
