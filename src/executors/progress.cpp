#include "executors/progress.hpp"

#include <iostream>

#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::executors {

std::string progress_text(const Progress& progress) {
  std::string text = "[" + util::format_elapsed(progress.elapsed_ms) + "] turn " + std::to_string(progress.turns);
  if (!progress.tool.empty()) text += " · " + progress.tool;
  text += std::string(" · ") + (progress.cost_is_estimate ? "~$" : "$") + util::format_decimal(progress.cost_usd);
  return text;
}

void ProgressPrinter::update(const Progress& progress) {
  if (!m_enabled) return;
  if (m_terminal) {
    // The tool and its argument come from the model.
    std::cerr << "\r\033[K" << util::first_line(util::terminal_safe(progress_text(progress)), 150) << std::flush;
    m_status_shown = true;
    return;
  }
  const std::string key = std::to_string(progress.turns) + "\n" + progress.tool;
  if (key == m_last_key) return;
  m_last_key = key;
  std::cerr << util::terminal_safe(progress_text(progress)) << "\n" << std::flush;
}

void ProgressPrinter::print_text(const std::string& text) {
  if (!m_enabled || text.empty()) return;
  if (m_status_shown) std::cerr << "\r\033[K";
  std::cerr << text;
  if (text.back() != '\n') std::cerr << "\n";
  std::cerr << std::flush;
}

void ProgressPrinter::done() {
  if (m_enabled && m_status_shown) std::cerr << "\n" << std::flush;
  m_status_shown = false;
}

}  // namespace mullet::executors
