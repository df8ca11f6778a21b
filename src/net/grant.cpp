#include "net/grant.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>

#include "util/strings.hpp"

namespace mullet::net {
namespace {

constexpr std::size_t max_name_length = 253;
constexpr std::size_t max_label_length = 63;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

tl::unexpected<Error> bad(const std::string& why) {
  return fail(usage_error(why));
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

// Decimal without leading zeros, within [1, max].
std::optional<unsigned> parse_decimal(std::string_view text, unsigned max) {
  if (!all_digits(text) || text.size() > 5 || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  unsigned value = 0;
  for (const char c : text) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value > max) return std::nullopt;
  return value;
}

// Four decimal octets, no leading zeros: the one IPv4 spelling every parser
// reads the same way.
std::optional<asio::ip::address_v4> parse_dotted_quad(std::string_view text) {
  asio::ip::address_v4::bytes_type bytes{};
  std::size_t part = 0;
  std::size_t start = 0;
  while (true) {
    const auto end = std::min(text.find('.', start), text.size());
    if (part == bytes.size()) return std::nullopt;
    const auto octet = text.substr(start, end - start);
    if (octet == "0") {
      bytes[part] = 0;
    } else if (const auto value = parse_decimal(octet, 255); value && octet.size() <= 3) {
      bytes[part] = static_cast<unsigned char>(*value);
    } else {
      return std::nullopt;
    }
    ++part;
    if (end == text.size()) break;
    start = end + 1;
  }
  if (part != bytes.size()) return std::nullopt;
  return asio::ip::address_v4(bytes);
}

// Whether the C library would take this text for an IPv4 address (inet_aton
// reads 127.1, 0x7f000001, 017700000001 and the like; getaddrinfo uses it).
bool libc_reads_as_ipv4(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return false;
  in_addr ignored{};
  return ::inet_aton(std::string(text).c_str(), &ignored) != 0;
}

std::string_view last_label(std::string_view name) {
  if (name.ends_with('.')) name.remove_suffix(1);
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

Result<Destination> parse_name(std::string_view text) {
  std::string_view name = text;
  if (name.ends_with('.')) name.remove_suffix(1);
  if (name.empty()) return bad("the host is empty");
  if (name.size() > max_name_length) return bad("the host name is longer than 253 characters");
  for (std::size_t start = 0; start <= name.size();) {
    const auto end = std::min(name.find('.', start), name.size());
    const auto label = name.substr(start, end - start);
    if (label.empty()) return bad("the host name has an empty label");
    if (label.size() > max_label_length) return bad("a label of the host name is longer than 63 characters");
    if (!std::all_of(label.begin(), label.end(), [](char c) { return is_alnum(c) || c == '-'; })) {
      return bad("a host name has letters, digits, hyphens and dots only");
    }
    if (label.front() == '-' || label.back() == '-') return bad("a label of the host name starts or ends in a hyphen");
    start = end + 1;
  }
  if (all_digits(last_label(name)) || libc_reads_as_ipv4(name)) {
    return bad("an IPv4 address is four decimal numbers (a.b.c.d), without leading zeros");
  }
  Destination destination;
  destination.host = util::to_lower(name);
  return destination;
}

}  // namespace

std::string Destination::authority_host() const {
  return address && address->is_v6() ? "[" + host + "]" : host;
}

std::string Destination::to_string() const {
  return authority_host() + ":" + std::to_string(port);
}

bool Destination::operator==(const Destination& other) const {
  if (port != other.port || address.has_value() != other.address.has_value()) return false;
  return address ? *address == *other.address : host == other.host;
}

std::string Grant::to_string() const {
  return kind == Kind::anywhere ? "*" : destination.to_string();
}

bool Grant::allows(const Destination& target) const {
  return kind == Kind::anywhere || destination == target;
}

Result<Destination> parse_host(std::string_view text) {
  if (text.empty()) return bad("the host is empty");
  if (text.front() == '[') {
    if (text == "[]") return bad("the host is empty");
    if (text.back() != ']') return bad("an IPv6 address must be closed by ]");
    const auto inner = text.substr(1, text.size() - 2);
    if (!std::all_of(inner.begin(), inner.end(), [](char c) { return is_hex_digit(c) || c == ':' || c == '.'; })) {
      return bad("an IPv6 address has hex digits, colons and dots only (no zone)");
    }
    asio::error_code error;
    const auto v6 = asio::ip::make_address_v6(std::string(inner), error);
    if (error) return bad("not an IPv6 address");
    Destination destination;
    destination.address = asio::ip::address(v6);
    destination.host = v6.to_string();
    return destination;
  }
  if (text.find(':') != std::string_view::npos) return bad("an IPv6 address must be in brackets, as [v6]:port");
  if (std::all_of(text.begin(), text.end(), [](char c) { return is_digit(c) || c == '.'; })) {
    const auto v4 = parse_dotted_quad(text);
    if (!v4) return bad("an IPv4 address is four decimal numbers (a.b.c.d), without leading zeros");
    Destination destination;
    destination.address = asio::ip::address(*v4);
    destination.host = v4->to_string();
    return destination;
  }
  return parse_name(text);
}

Result<Destination> parse_destination(std::string_view text, int default_port) {
  std::string_view host = text;
  std::optional<std::string_view> port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address must be closed by ]");
    host = text.substr(0, close + 1);
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("only :port may follow an IPv6 address");
      port_text = rest.substr(1);
    }
  } else if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    if (text.find(':', colon + 1) != std::string_view::npos) {
      return bad("an IPv6 address must be in brackets, as [v6]:port");
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  auto destination = parse_host(host);
  if (!destination) return destination;
  if (port_text) {
    const auto port = parse_decimal(*port_text, 65535);
    if (!port || *port == 0) return bad("the port must be 1 to 65535, in decimal without leading zeros");
    destination->port = static_cast<int>(*port);
  } else if (default_port > 0) {
    destination->port = default_port;
  } else {
    return bad("the port is missing (host:port)");
  }
  return destination;
}

Result<Grant> parse_grant(std::string_view text) {
  if (text == "*") return Grant{};
  auto destination = parse_destination(text, 0);
  if (!destination) return fail(std::move(destination.error()));
  Grant grant;
  grant.kind = destination->address ? Grant::Kind::address : Grant::Kind::name;
  grant.destination = std::move(*destination);
  return grant;
}

bool grant_names_an_address(std::string_view text) {
  if (const auto grant = parse_grant(text)) return grant->kind == Grant::Kind::address;
  if (text.starts_with('[')) return true;
  const auto colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) return true;
  auto host = text.substr(0, colon);
  if (host.find('%') != std::string_view::npos) return true;
  if (host.ends_with('.')) host.remove_suffix(1);
  return all_digits(last_label(host)) || libc_reads_as_ipv4(host);
}

bool is_localhost_name(const Destination& destination) {
  return !destination.address && (destination.host == "localhost" || destination.host.ends_with(".localhost"));
}

}  // namespace mullet::net
