#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mullet::util {

std::string trim(std::string_view text);
std::string to_lower(std::string_view text);
std::vector<std::string> split(std::string_view text, char separator);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
// Quotes a word for display as a POSIX shell word (only when it needs it).
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& argv);
// First line of a text, cut to max_chars (with an ellipsis when cut).
std::string first_line(std::string_view text, std::size_t max_chars);
// Keeps the last max_bytes of a text, marking the cut.
std::string tail(std::string_view text, std::size_t max_bytes);
// True for a name a POSIX shell accepts as an environment variable name.
bool is_env_name(std::string_view name);
std::string errno_text(int error_number);
// The text with every invalid UTF-8 sequence replaced by U+FFFD, so output a
// worker printed (binary, or cut mid-character) can always be stored as JSON.
std::string valid_utf8(std::string_view text);
// A number with at most max_decimals decimals and no trailing zeros: 0.25, 3.
std::string format_decimal(double value, int max_decimals = 4);

}  // namespace mullet::util
