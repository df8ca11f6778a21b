#include "cli/logging.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "util/strings.hpp"

namespace mullet::cli {
namespace {

constexpr std::string_view continuation = "    ";

// %* in the pattern: the message, terminal-safe (util::terminal_safe).
class TerminalSafeMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm& /*time*/, spdlog::memory_buf_t& dest) override {
    std::string safe = util::terminal_safe(std::string_view(message.payload.data(), message.payload.size()));
    while (!safe.empty() && (safe.back() == '\n' || safe.back() == '\r')) safe.pop_back();
    const std::string indented = util::indent_later_lines(safe, continuation);
    dest.append(std::string_view(indented));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return spdlog::details::make_unique<TerminalSafeMessage>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<TerminalSafeMessage>('*').set_pattern("git mullet [%l] %*");
  return formatter;
}

void set_up_logging() {
  auto logger = spdlog::stderr_color_mt("git-mullet");
  logger->set_formatter(make_log_formatter());
  const char* level = std::getenv("GIT_MULLET_LOG");
  logger->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

}  // namespace mullet::cli
