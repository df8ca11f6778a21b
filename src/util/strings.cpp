#include "util/strings.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace mullet::util {

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) joined += separator;
    joined += parts[i];
  }
  return joined;
}

std::string shell_quote(std::string_view word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789@%+=:,./-_") == std::string_view::npos) {
    return std::string(word);
  }
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string joined;
  for (const auto& word : argv) {
    if (!joined.empty()) joined += ' ';
    joined += shell_quote(word);
  }
  return joined;
}

std::string first_line(std::string_view text, std::size_t max_chars) {
  const std::string trimmed = trim(text);
  std::string line = trimmed.substr(0, trimmed.find('\n'));
  line = trim(line);
  if (line.size() > max_chars) {
    std::size_t cut = max_chars > 3 ? max_chars - 3 : max_chars;
    // Do not cut a UTF-8 sequence in half.
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0U) == 0x80U) --cut;
    line.resize(cut);
    line += "...";
  }
  return line;
}

std::string tail(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  const std::string marker = "[... earlier output cut ...]\n";
  return marker + std::string(text.substr(text.size() - max_bytes));
}

bool is_env_name(std::string_view name) {
  if (name.empty()) return false;
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string errno_text(int error_number) {
  return std::strerror(error_number);
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t minimum = 0;
    if (lead < 0x80U) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    if ((lead & 0xE0U) == 0xC0U) {
      length = 2;
      minimum = 0x80;
    } else if ((lead & 0xF0U) == 0xE0U) {
      length = 3;
      minimum = 0x800;
    } else if ((lead & 0xF8U) == 0xF0U) {
      length = 4;
      minimum = 0x10000;
    }
    bool valid = length > 0 && i + length <= text.size();
    std::uint32_t code = valid ? (lead & (0x7FU >> length)) : 0;
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0U) == 0x80U;
      code = (code << 6U) | (next & 0x3FU);
    }
    valid = valid && code >= minimum && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF);
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace mullet::util

namespace mullet::util {

std::string format_decimal(double value, int max_decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", max_decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace mullet::util

namespace mullet::util {

std::string to_lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

}  // namespace mullet::util
