// Network grants and the destinations they are compared with: one grammar for
// the configuration, the repository's narrowing, the egress proxy's requests
// and the worker's API endpoint, so that no two of them can read one string
// two ways. Pure: nothing here resolves or connects.
//
// A destination is `name:port`, `a.b.c.d:port` or `[v6]:port`; a grant is a
// destination or "*". Names are DNS host names (letters, digits and hyphens;
// labels of 1 to 63, not starting or ending in a hyphen; 253 characters at
// most; one trailing dot allowed and dropped; compared in lower case), and
// the last label is never all digits. IPv4 is four decimal octets without
// leading zeros; IPv6 only in brackets, without a zone. Everything else is
// refused, in particular every spelling a resolver would still read as an
// IPv4 address (127.1, 2130706433, 0x7f000001, 017700000001), and IPv6
// without brackets ("::ffff:127.0.0.1:80" could be an address and a port, or
// an address alone): ambiguous, so refused everywhere. The port is 1 to 65535
// in decimal without leading zeros.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <asio/ip/address.hpp>

#include "util/error.hpp"

namespace mullet::net {

struct Destination {
  std::string host;  // a name in lower case without its trailing dot, or the address in canonical text
  std::optional<asio::ip::address> address;  // set when the host is an IP literal
  int port = 0;

  // "host:port", IPv6 in brackets.
  std::string to_string() const;
  // The host as it goes into an authority or a Host header: IPv6 in brackets.
  std::string authority_host() const;
  bool operator==(const Destination& other) const;
};

struct Grant {
  enum class Kind { anywhere, name, address };
  Kind kind = Kind::anywhere;
  Destination destination;  // empty for anywhere

  std::string to_string() const;  // "*", or the destination
  // Whether this grant lets a connection to `target` through by what it
  // says: "*" does for every target, a name for that name and port, an
  // address for that address and port. What a name resolves to is the
  // proxy's business, not the grant's.
  bool allows(const Destination& target) const;
};

// A host alone (no port): a name or an IP literal, IPv6 in brackets. Errors
// are usage errors saying why.
Result<Destination> parse_host(std::string_view text);
// "host:port"; the port may be left out when `default_port` is not 0.
Result<Destination> parse_destination(std::string_view text, int default_port = 0);
// "*" or a destination with its port.
Result<Grant> parse_grant(std::string_view text);

// Whether a grant's text names an address rather than a host name: a valid
// address grant, or one refused as a malformed spelling of one (IPv6 without
// brackets, 127.1, 0x7f000001, a zone, ...).
bool grant_names_an_address(std::string_view text);

// "localhost" and every name under it are loopback by definition (RFC 6761),
// whatever a resolver says.
bool is_localhost_name(const Destination& destination);

}  // namespace mullet::net
