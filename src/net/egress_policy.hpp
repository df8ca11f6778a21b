// What the egress proxy makes of a request, as pure functions: its head, and
// whether its destination may be reached (by the grants, before anything is
// resolved, then by the addresses a name resolved to). The session
// (net/egress_session.hpp) applies them; nothing here resolves or connects.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/address.hpp>

#include "net/grant.hpp"
#include "util/error.hpp"

namespace mullet::net {

// What the proxy needs of a request (net/http_head.hpp parses it).
struct ProxyRequest {
  std::string method;
  std::string host;  // lower case, IPv6 without brackets
  int port = 0;
  // Absolute-URI requests only (empty for CONNECT): the request line in
  // origin form ("GET /x?y HTTP/1.1"), and the whole head as it goes upstream:
  // that line, hop-by-hop headers dropped, Host replaced by the target's,
  // "Connection: close" (one client connection serves one request).
  std::string origin_line;
  std::string upstream_head;
};

// A complete request head (ending in an empty line) sent to a proxy:
// CONNECT host:port, or METHOD http://host[:port]/path, as
// http::parse_request_head reads them with http::proxy_forms. Nothing else
// (origin form, https:// targets, bare LF, obs-fold, control bytes, more than
// http::max_head_bytes): nullopt.
std::optional<ProxyRequest> parse_proxy_request(std::string_view head);

// Whether a grant (net/grant.hpp) names host:port; "*" matches everything.
// Says nothing about what the host resolves to.
bool grant_allows(const std::vector<std::string>& grants, const std::string& host, int port);
// Whether a grant is exactly this address and port ("*" never is).
bool grant_names_address(const std::vector<std::string>& grants, const asio::ip::address& address, int port);

// A request's host and port (the host as ProxyRequest keeps it, IPv6 without
// brackets) read again as a destination.
Result<Destination> request_target(const std::string& host, int port);

// Why the proxy does not connect, as the client is told and the decision log
// keeps it.
struct ProxyRefusal {
  int status = 0;
  std::string phrase;    // "Forbidden"
  std::string reason;    // "not on the allow list"
  bool allowed = false;  // the policy's verdict: true when it allowed the destination but it cannot be reached
};

// Before anything is resolved: a destination that no grant names (403), that
// is no destination (400), or that is a name for loopback (403). nullopt: go
// on to the addresses.
std::optional<ProxyRefusal> refuse_destination(const std::vector<std::string>& grants, const std::string& host,
                                               int port);

// The addresses a destination resolved to that may be connected to: every
// address of the host or its networks (net/address.hpp) is left out unless a
// grant names that very address and port. When none is left, `refusal` says
// why: the first restricted address (403), or no address at all (502).
struct AddressChoice {
  std::vector<asio::ip::address> permitted;
  std::optional<ProxyRefusal> refusal;  // set when permitted is empty
};
AddressChoice choose_addresses(const std::vector<std::string>& grants, const std::vector<asio::ip::address>& addresses,
                               int port);

}  // namespace mullet::net
