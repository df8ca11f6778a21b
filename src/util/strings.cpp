#include "util/strings.hpp"

#include <algorithm>
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

namespace {

enum class Utf8 { complete, incomplete, invalid };

// The UTF-8 sequence at text[i] (lead byte >= 0x80): its length and code
// point when complete and valid.
Utf8 utf8_at(std::string_view text, std::size_t i, std::size_t& length, std::uint32_t& code) {
  const auto lead = static_cast<unsigned char>(text[i]);
  std::uint32_t minimum = 0;
  if ((lead & 0xE0U) == 0xC0U) {
    length = 2;
    minimum = 0x80;
  } else if ((lead & 0xF0U) == 0xE0U) {
    length = 3;
    minimum = 0x800;
  } else if ((lead & 0xF8U) == 0xF0U) {
    length = 4;
    minimum = 0x10000;
  } else {
    return Utf8::invalid;
  }
  code = lead & (0x7FU >> length);
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= text.size()) return Utf8::incomplete;
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0U) != 0x80U) return Utf8::invalid;
    code = (code << 6U) | (next & 0x3FU);
  }
  if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return Utf8::invalid;
  return Utf8::complete;
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80U) {
      out += text[i++];
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (utf8_at(text, i, length, code) == Utf8::complete) {
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

namespace mullet::util {
namespace {

constexpr std::size_t longest_sgr = 32;

void escape_byte(std::string& out, unsigned char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "\\x%02x", byte);
  out += text;
}

void escape_code_point(std::string& out, std::uint32_t code) {
  char text[16];
  std::snprintf(text, sizeof text, "\\u%04x", static_cast<unsigned>(code));
  out += text;
}

bool is_bidi_control(std::uint32_t code) {
  return (code >= 0x202A && code <= 0x202E) || (code >= 0x2066 && code <= 0x2069);
}

// Length of the SGR sequence at text[i] (an ESC), 0 when it is none;
// `incomplete` when the text ends before it could tell.
std::size_t sgr_at(std::string_view text, std::size_t i, bool& incomplete) {
  incomplete = false;
  std::size_t k = i + 1;
  if (k >= text.size()) {
    incomplete = true;
    return 0;
  }
  if (text[k] != '[') return 0;
  // Reset, bold, normal intensity, and the foreground colours that show on
  // any background: nothing that can hide text (no background, conceal,
  // black or white, no 256-colour or RGB forms).
  const auto harmless = [](int parameter) {
    return parameter == 0 || parameter == 1 || parameter == 22 || (parameter >= 31 && parameter <= 36) ||
           parameter == 39;
  };
  int parameter = 0;
  for (++k; k < text.size() && k - i < longest_sgr; ++k) {
    const char c = text[k];
    if (c == 'm' || c == ';') {
      if (!harmless(parameter)) return 0;
      if (c == 'm') return k - i + 1;
      parameter = 0;
    } else if (c >= '0' && c <= '9') {
      parameter = std::min(parameter * 10 + (c - '0'), 1000);
    } else {
      return 0;
    }
  }
  incomplete = k >= text.size() && k - i < longest_sgr;
  return 0;
}

// Escapes `text` into `out`; returns how many bytes at its end were left
// unread because the next chunk may complete them (none when `final`).
std::size_t make_terminal_safe(std::string_view text, bool final, bool keep_colours, std::string& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\n' || byte == '\t' || (byte >= 0x20 && byte < 0x7F)) {
      out += static_cast<char>(byte);
      ++i;
      continue;
    }
    if (byte == '\r') {
      if (i + 1 == text.size() && !final) return text.size() - i;
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        out += "\r\n";
        i += 2;
      } else {
        escape_byte(out, byte);
        ++i;
      }
      continue;
    }
    if (byte == 0x1B && keep_colours) {
      bool incomplete = false;
      const std::size_t length = sgr_at(text, i, incomplete);
      if (incomplete && !final) return text.size() - i;
      if (length > 0) {
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
    }
    if (byte < 0x80) {
      escape_byte(out, byte);
      ++i;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code = 0;
    const Utf8 found = utf8_at(text, i, length, code);
    if (found == Utf8::incomplete && !final) return text.size() - i;
    if (found != Utf8::complete) {
      escape_byte(out, byte);
      ++i;
    } else if (code <= 0x9F || is_bidi_control(code)) {
      escape_code_point(out, code);
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return 0;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  make_terminal_safe(text, true, false, out);
  return out;
}

std::string TerminalSafeStream::feed(std::string_view chunk) {
  std::string out;
  out.reserve(chunk.size() + m_carry.size());
  std::string_view text = chunk;
  std::string joined;
  if (!m_carry.empty()) {
    joined = m_carry;
    joined.append(chunk);
    text = joined;
  }
  const std::size_t left = make_terminal_safe(text, false, m_keep_colours, out);
  m_carry.assign(text.substr(text.size() - left));
  return out;
}

std::string TerminalSafeStream::finish() {
  std::string out;
  make_terminal_safe(m_carry, true, m_keep_colours, out);
  m_carry.clear();
  return out;
}

std::string indent_later_lines(std::string_view text, std::string_view prefix) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out.push_back(text[i]);
    if (text[i] == '\n' && i + 1 < text.size()) out.append(prefix);
  }
  return out;
}

}  // namespace mullet::util
