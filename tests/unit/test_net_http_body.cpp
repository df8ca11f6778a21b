#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "net/http_body.hpp"

using mullet::net::http::chunk;
using mullet::net::http::ChunkedDecoder;
using mullet::net::http::last_chunk;

namespace {

struct Decoded {
  std::string data;
  std::size_t used = 0;
  bool done = false;
  bool failed = false;
};

// Feeds `body` in pieces of `piece` bytes until the decoder stops taking them.
Decoded decode(std::string_view body, std::size_t piece) {
  ChunkedDecoder decoder;
  Decoded result;
  for (std::size_t at = 0; at < body.size() && !decoder.done() && !decoder.failed(); at += piece) {
    const auto part = body.substr(at, piece);
    const auto used = decoder.feed(part, result.data);
    result.used += used;
    if (used < part.size()) break;
  }
  result.done = decoder.done();
  result.failed = decoder.failed();
  return result;
}

}  // namespace

TEST_CASE("chunked bodies: data, extensions and trailers, in any split; what follows the body is left") {
  const std::string body =
      "5\r\nhello\r\n"
      "1A;name=value;other=\"quoted\"\r\nabcdefghijklmnopqrstuvwxyz\r\n"
      "0 ;last\r\n"
      "Trailer-Field: ignored\r\n"
      "\r\n";
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    INFO("pieces of " << piece);
    const auto decoded = decode(body + "NEXT", piece);
    CHECK(decoded.done);
    CHECK(decoded.data == "helloabcdefghijklmnopqrstuvwxyz");
    CHECK(decoded.used == body.size());
  }
  // Our own framing decodes to what was framed.
  const std::string framed = chunk("one") + chunk("") + chunk(std::string(300, 'x')) + std::string(last_chunk);
  CHECK(framed.starts_with("3\r\none\r\n12c\r\n"));
  const auto decoded = decode(framed, 7);
  CHECK(decoded.done);
  CHECK(decoded.data == "one" + std::string(300, 'x'));
}

TEST_CASE("chunked bodies: malformed framing fails, an unfinished body is neither done nor failed") {
  for (const std::string bad : {
           "x\r\n",                            // no hex digit
           "\r\n",                             // no size
           "5\nhello\r\n0\r\n\r\n",            // bare LF
           "5\r\nhelloX\r\n",                  // data longer than its size
           "5\r\nhello\r0\r\n\r\n",            // bare CR
           "1 2\r\n",                          // a blank inside the size
           "11111111111111111\r\n",            // more than 16 hex digits
           "0\r\nbad\x01trailer\r\n\r\n",      // control byte in a trailer
           "5;ext\x7f\r\nhello\r\n0\r\n\r\n",  // ... in an extension
           "0\r\nfield\n\r\n",                 // bare LF in the trailer
       }) {
    INFO(bad);
    CHECK(decode(bad, 1).failed);
    CHECK(decode(bad, bad.size()).failed);
  }
  CHECK(decode("5;" + std::string(ChunkedDecoder::max_line_bytes, 'e') + "\r\n", 64).failed);
  CHECK(decode("0\r\n" + std::string(ChunkedDecoder::max_trailer_bytes, 't') + "\r\n\r\n", 64).failed);
  const auto unfinished = decode("5\r\nhel", 2);
  CHECK_FALSE(unfinished.done);
  CHECK_FALSE(unfinished.failed);
  CHECK(unfinished.data == "hel");
}
