// The credential endpoint's rules, as pure functions: where it forwards
// (the upstream URL), how the real credential is written, which requests
// carry the job's sentinel, which routes it serves, and how request and
// response heads are rewritten on their way through. Nothing here does I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "net/grant.hpp"
#include "net/http_head.hpp"
#include "util/error.hpp"

namespace mullet::net {

// Where the endpoint forwards to: https://host[:port][/prefix], or http://
// for a gateway on the user's own network. The prefix goes before every
// forwarded path ("https://gw.example/anthropic" sends /v1/messages to
// /anthropic/v1/messages).
struct UpstreamUrl {
  bool tls = true;
  Destination destination;  // port 443 or 80 when the URL names none
  std::string path_prefix;  // "" or "/segment...", without a trailing '/'

  std::string to_string() const;  // the URL, normalised
};

// The one reader of an upstream base URL. Refused, as usage errors: schemes
// but http and https, user info, a query or fragment, a host or port that
// net/grant.hpp does not read (one grammar for every destination), control
// bytes or blanks. The URL is never echoed when it holds a '@' (it may hold a
// password).
Result<UpstreamUrl> parse_upstream_url(std::string_view url);

// Which header carries the credential upstream, and how its value is made
// from the credential: `format` holds "{}" once ("Bearer {}" for
// Authorization, "{}" for x-api-key).
struct CredentialHeader {
  std::string name = "x-api-key";
  std::string format = "{}";
};

// The header line's name and value for `credential`. A name that is not an
// HTTP token, a format without exactly one "{}", an empty credential or one
// with a control byte (which could end the header early) are usage errors
// that never quote the credential.
Result<http::Header> credential_header(const CredentialHeader& header, std::string_view credential);

// A fresh per-job sentinel: "sk-mullet-" and 32 random hex digits (128 bits
// from getrandom). Looks like a key to tools that insist on one.
std::string make_sentinel();

// Whether a request carries `sentinel` and no other credential: at least one
// of its x-api-key and Authorization headers, and every one of them, is the
// sentinel (Authorization as "Bearer <sentinel>", the scheme in any case).
// Compared in constant time.
bool carries_sentinel(const http::Headers& headers, std::string_view sentinel);

// A request the endpoint forwards: the method and the path (without the
// query) exactly.
struct ApiRoute {
  std::string method;
  std::string path;
  bool metered = true;  // its answers cost money and carry usage
};
// POST /v1/messages, POST /v1/chat/completions (metered), POST
// /v1/messages/count_tokens (free). Apart from the routes, a HEAD of "/" (the
// base URL, which Claude Code sends without a key to warm its connection up)
// gets an empty 200 from the endpoint itself, unrecorded.
std::vector<ApiRoute> default_api_routes();

// The head sent upstream for `request` (origin form, read by
// http::parse_request_head with server_forms): the upstream's prefix before
// the path, Host the upstream's, every header a client could carry a
// credential in removed (x-api-key, authorization, proxy-authorization,
// cookie, and the credential header's own name), `credential` written,
// "Accept-Encoding: identity" (the usage must be readable), no Expect (the
// endpoint answers that itself), the body framed by Content-Length
// `body_size` (when the request has a body or is a POST), "Connection:
// close". Pure.
std::string upstream_request_head(const http::RequestHead& request, const UpstreamUrl& upstream,
                                  const http::Header& credential, std::size_t body_size);

// The head the client gets for an upstream's answer: its status and
// headers, without hop-by-hop headers (and those its Connection header
// names), Set-Cookie or its framing; the endpoint's own framing instead
// (Content-Length as the upstream gave it, or chunked when `client_chunked`)
// and "Connection: close". Pure.
std::string client_response_head(const http::ResponseHead& response, bool client_chunked);

// An error as Anthropic's API reports one, which OpenAI-style clients read
// too (error.message). `retry`: whether the client may try again; Claude Code
// and the Anthropic SDKs obey x-should-retry before looking at the status.
std::string api_error_answer(int status, std::string_view type, const std::string& message, bool retry);

// The path of a request target without its query.
std::string path_without_query(std::string_view path);

}  // namespace mullet::net
