#include "net/http_body.hpp"

#include <algorithm>
#include <cstdio>

namespace mullet::net::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// Visible ASCII, blanks and obs-text: what an extension or a trailer field
// may hold.
bool is_field_byte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte == '\t' || (byte >= 0x20 && byte != 0x7f);
}

}  // namespace

std::size_t ChunkedDecoder::feed(std::string_view input, std::string& data) {
  std::size_t used = 0;
  while (used < input.size()) {
    const char c = input[used];
    switch (m_state) {
      case State::size: {
        const int digit = hex_value(c);
        const bool after_digits = m_digits > 0;
        if (digit >= 0 && !m_blank_before_extension) {
          if (++m_digits > 16) return fail();
          m_remaining = m_remaining * 16 + static_cast<std::uint64_t>(digit);
        } else if (after_digits && c == '\r') {
          m_state = State::size_lf;
        } else if (after_digits && c == ';') {
          m_state = State::extension;
        } else if (after_digits && is_blank(c)) {
          m_blank_before_extension = true;  // BWS: only ';' or the line's end may follow
        } else {
          return fail();
        }
        if (++m_line > max_line_bytes) return fail();
        ++used;
        break;
      }
      case State::extension:
        if (c == '\r') {
          m_state = State::size_lf;
        } else if (!is_field_byte(c)) {
          return fail();
        }
        if (++m_line > max_line_bytes) return fail();
        ++used;
        break;
      case State::size_lf:
        if (c != '\n') return fail();
        ++used;
        m_line = 0;
        m_digits = 0;
        m_blank_before_extension = false;
        m_state = m_remaining == 0 ? State::trailer : State::data;
        break;
      case State::data: {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(m_remaining, input.size() - used));
        data.append(input.substr(used, take));
        used += take;
        m_remaining -= take;
        if (m_remaining == 0) m_state = State::data_cr;
        break;
      }
      case State::data_cr:
        if (c != '\r') return fail();
        ++used;
        m_state = State::data_lf;
        break;
      case State::data_lf:
        if (c != '\n') return fail();
        ++used;
        m_state = State::size;
        break;
      case State::trailer:
        // Trailer fields are dropped; an empty line ends the body.
        if (c == '\r') {
          m_state = State::trailer_lf;
        } else if (!is_field_byte(c)) {
          return fail();
        } else {
          ++m_line;
        }
        if (++m_trailer > max_trailer_bytes) return fail();
        ++used;
        break;
      case State::trailer_lf:
        if (c != '\n') return fail();
        ++used;
        if (m_line == 0) {
          m_state = State::done;
          return used;
        }
        m_line = 0;
        m_state = State::trailer;
        break;
      case State::done:
      case State::failed: return used;
    }
  }
  return used;
}

std::string chunk(std::string_view data) {
  if (data.empty()) return {};
  char size[24];
  const int length = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string framed(size, static_cast<std::size_t>(length));
  framed.append(data);
  framed += "\r\n";
  return framed;
}

}  // namespace mullet::net::http
