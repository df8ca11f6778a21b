// HTTP/1.1 message bodies in chunked transfer coding (RFC 9112 7.1), decoded
// as they arrive: the credential endpoint reads request bodies a client sends
// chunked and response bodies an upstream sends chunked with it. Pure.
//
// Strict like http_head: sizes are hex digits (at most 16), lines end in
// CRLF, chunk extensions are skipped but bounded, trailer fields are skipped
// (bounded too), a bare CR or LF anywhere in the framing fails the body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mullet::net::http {

class ChunkedDecoder {
 public:
  // A chunk-size line (with its extensions) or the trailer section larger
  // than this fails the body.
  static constexpr std::size_t max_line_bytes = 4096;
  static constexpr std::size_t max_trailer_bytes = std::size_t{16} * 1024;

  // Appends the data in `input` to `data`, and returns how many bytes of
  // `input` belong to the body: all of them, unless the body ended (or
  // failed) inside it.
  std::size_t feed(std::string_view input, std::string& data);

  bool done() const { return m_state == State::done; }
  bool failed() const { return m_state == State::failed; }

 private:
  enum class State { size, extension, size_lf, data, data_cr, data_lf, trailer, trailer_lf, done, failed };

  std::size_t fail() {
    m_state = State::failed;
    return 0;
  }

  State m_state = State::size;
  std::uint64_t m_remaining = 0;  // of the current chunk's data
  std::size_t m_digits = 0;
  std::size_t m_line = 0;     // bytes of the current size or trailer line
  std::size_t m_trailer = 0;  // bytes of the trailer section
  bool m_blank_before_extension = false;
};

// The chunked framing of `data` as one chunk (nothing for no data), and the
// last chunk that ends a body.
std::string chunk(std::string_view data);
inline constexpr std::string_view last_chunk = "0\r\n\r\n";

}  // namespace mullet::net::http
