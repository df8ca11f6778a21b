// SIGINT/SIGTERM turn into a flag that long-running loops poll, so a job is
// stopped and recorded instead of dying half-written.
#pragma once

namespace mullet::util {

void install_cancel_handlers();
bool cancel_requested();
int cancel_signal();

}  // namespace mullet::util
