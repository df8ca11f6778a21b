// The worker's progress on our stderr: one line that updates in place on a
// terminal, plain lines when something changes otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace mullet::executors {

struct Progress {
  std::int64_t elapsed_ms = 0;
  std::int64_t turns = 0;
  std::string tool;  // in use, with its main argument
  double cost_usd = 0;
  bool cost_is_estimate = true;
};

// "[1m05s] turn 4 · Bash: npm test · ~$0.0123"
std::string progress_text(const Progress& progress);

class ProgressPrinter {
 public:
  ProgressPrinter(bool enabled, bool terminal) : m_enabled(enabled), m_terminal(terminal) {}
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;
  ~ProgressPrinter() { done(); }

  // Redraws on a terminal; elsewhere prints only when turn or tool changed.
  void update(const Progress& progress);
  // A line of the worker's own (stderr), printed above the status line.
  void print_text(const std::string& text);
  // Leaves the last status on its own line.
  void done();

 private:
  bool m_enabled;
  bool m_terminal;
  bool m_status_shown = false;
  std::string m_last_key;
};

}  // namespace mullet::executors
