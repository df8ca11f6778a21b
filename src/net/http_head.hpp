// HTTP/1.x message heads: the one parser for the request heads the egress
// proxy reads from a sandbox, the requests a local endpoint of ours serves,
// and the response heads read back from a destination. Pure: nothing here
// reads a socket.
//
// Strict on purpose: a head is complete (it ends in an empty line), at most
// max_head_bytes, every line ends in CRLF (a bare CR or LF is refused, and so
// is obs-fold), no control byte but HTAB, header names are tokens. Whatever a
// peer could mean two ways is refused rather than read one way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/grant.hpp"

namespace mullet::net::http {

// The largest head (start line and headers) read.
inline constexpr std::size_t max_head_bytes = std::size_t{16} * 1024;

struct Header {
  std::string name;   // as sent
  std::string value;  // without surrounding blanks
};
using Headers = std::vector<Header>;

// Every value of the headers named `name` (compared case-insensitively), in
// the order sent.
std::vector<std::string_view> header_values(const Headers& headers, std::string_view name);

// How a request names its target (RFC 9112 3.2).
enum class TargetForm {
  origin,     // GET /path?query HTTP/1.1, the destination in Host: to a server
  absolute,   // GET http://host[:port]/path HTTP/1.1: to a proxy, plain http only
  authority,  // CONNECT host:port HTTP/1.1: to a proxy
};

// The forms a reader accepts; anything else is refused. CONNECT always comes
// in authority form and nothing else does.
struct AcceptedForms {
  bool origin = false;
  bool absolute = false;
  bool authority = false;
};
inline constexpr AcceptedForms proxy_forms{false, true, true};
inline constexpr AcceptedForms server_forms{true, false, false};

struct RequestHead {
  std::string method;  // upper-case letters only
  TargetForm form = TargetForm::origin;
  // Origin and absolute form: path and query ("/" at least), fragment
  // dropped. Authority form: empty.
  std::string path;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  // Where the request goes, as net/grant.hpp reads it: from the target, or
  // in origin form from the one Host header (port 80 when it names none).
  Destination destination;
  Headers headers;

  // "METHOD path version": the request line in origin form (empty for
  // authority form).
  std::string origin_line() const;
};

// How far a head that arrives in pieces has come. `received` is everything
// read so far (the head and maybe what follows it), `scanned` how much of it
// an earlier call saw (0 at first), so each byte is looked at about once.
enum class HeadProgress {
  incomplete,  // read on
  complete,    // the head is the first `size` bytes
  malformed,   // (requests only) cannot begin a head in the accepted forms
  too_large,   // max_head_bytes read and no end in sight
};
struct HeadScan {
  HeadProgress progress = HeadProgress::incomplete;
  std::size_t size = 0;  // complete only: up to and including the empty line
};
// For a request head: garbage is refused as soon as plausible_request_prefix
// says so, instead of at a deadline or the size limit.
HeadScan scan_request_head(std::string_view received, std::size_t scanned, AcceptedForms forms);
// For a response head.
HeadScan scan_response_head(std::string_view received, std::size_t scanned);

// A complete request head in one of `forms`; nullopt for anything else
// (origin form without exactly one valid Host, https:// or other schemes,
// user info, HTTP versions but 1.0 and 1.1, ...).
std::optional<RequestHead> parse_request_head(std::string_view head, AcceptedForms forms);

// What can be told from the first bytes of a request head before it is
// complete: control bytes, a method that is not one, a request line that is
// not one in `forms`. Lets garbage be refused at once instead of at a
// deadline or the size limit. True for every prefix of a head
// parse_request_head accepts.
bool plausible_request_prefix(std::string_view received, AcceptedForms forms);

// The head a proxy sends on for an origin or absolute form request: the
// request line in origin form, Host naming the destination (RFC 9112 3.2.2:
// a proxy replaces it), hop-by-hop headers and those the Connection header
// names dropped (never the framing ones), and "Connection: close": one client
// connection serves one request. Empty for authority form.
std::string forwarded_head(const RequestHead& request);

// The head a server of ours sends on to where it forwards a request in
// origin or absolute form (the credential endpoint to its upstream): the
// request line in origin form with `target`, Host `host`, the hop-by-hop
// headers and those the Connection header names dropped (the framing ones
// too when drop_framing: the caller frames the body itself), the headers
// named in `drop` dropped, `add` appended, and "Connection: close".
// forwarded_head is this with the request's own target and destination.
struct HeadRewrite {
  std::string target;             // "/path?query"
  std::string host;               // the Host header's value
  std::vector<std::string> drop;  // header names, any case
  bool drop_framing = false;      // Content-Length and Transfer-Encoding
  Headers add;
};
std::string rewritten_head(const RequestHead& request, const HeadRewrite& rewrite);

// The value of a Host header naming `destination`: its host (IPv6 in
// brackets), and ":port" unless it is `default_port`.
std::string host_header_value(const Destination& destination, int default_port);

// How a response body is delimited (RFC 9112 6.3).
enum class BodyFraming {
  none,         // HEAD request, 1xx, 204, 304, or a CONNECT's 2xx
  length,       // Content-Length bytes
  chunked,      // Transfer-Encoding ending in chunked
  until_close,  // neither: the body ends when the connection does
};

struct ResponseHead {
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  int status = 0;       // 100 to 599
  std::string reason;   // may be empty
  Headers headers;
  BodyFraming framing = BodyFraming::until_close;
  std::uint64_t content_length = 0;  // BodyFraming::length only
};

// A complete response head to a request with `request_method`; nullopt for
// anything malformed, and for ambiguous framing: Content-Length together
// with Transfer-Encoding, Content-Length values that differ or are not
// decimal, Transfer-Encoding in an HTTP/1.0 response.
std::optional<ResponseHead> parse_response_head(std::string_view head, std::string_view request_method);

}  // namespace mullet::net::http
