#include "net/address.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace mullet::net {
namespace {

std::string restricted_v4_kind(const asio::ip::address_v4& address) {
  const std::uint32_t value = address.to_uint();
  const auto in = [value](std::uint32_t network, int prefix) {
    const std::uint32_t mask = prefix == 0 ? 0U : ~std::uint32_t{0} << (32 - prefix);
    return (value & mask) == network;
  };
  if (in(0x00000000U, 8)) return "unspecified";  // "this network", 0.0.0.0 included
  if (in(0x7F000000U, 8)) return "loopback";
  if (in(0x0A000000U, 8) || in(0xAC100000U, 12) || in(0xC0A80000U, 16)) return "private";
  if (in(0xA9FE0000U, 16)) return "link-local";
  if (in(0x64400000U, 10)) return "carrier-grade NAT";
  if (in(0xC0000200U, 24) || in(0xC6336400U, 24) || in(0xCB007100U, 24)) return "documentation";  // TEST-NET-1..3
  // IETF protocol assignments, the 6to4 relay anycast, benchmarking.
  if (in(0xC0000000U, 24) || in(0xC0586300U, 24) || in(0xC6120000U, 15)) return "reserved";
  if (in(0xE0000000U, 4)) return "multicast";
  if (value == 0xFFFFFFFFU) return "broadcast";
  if (in(0xF0000000U, 4)) return "reserved";
  return {};
}

asio::ip::address_v4 v4_at(const asio::ip::address_v6::bytes_type& bytes, std::size_t offset, unsigned char flip = 0) {
  return asio::ip::address_v4(asio::ip::address_v4::bytes_type{
      static_cast<unsigned char>(bytes[offset] ^ flip), static_cast<unsigned char>(bytes[offset + 1] ^ flip),
      static_cast<unsigned char>(bytes[offset + 2] ^ flip), static_cast<unsigned char>(bytes[offset + 3] ^ flip)});
}

std::string restricted_v6_kind(const asio::ip::address_v6& address) {
  const auto bytes = address.to_bytes();
  // Whether the address is in prefix/bits, the prefix given as its leading bytes.
  // (the prefix lists at least bits/8 rounded up bytes).
  const auto in = [&bytes](std::initializer_list<unsigned char> prefix, std::size_t bits) {
    std::size_t i = 0;
    for (const unsigned char byte : prefix) {
      if (bits <= i * 8) break;
      const std::size_t left = bits - i * 8;
      const unsigned mask = left >= 8 ? 0xFFU : (0xFFU << (8 - left)) & 0xFFU;
      if ((bytes[i] & mask) != (byte & mask)) return false;
      ++i;
    }
    return true;
  };
  if (address.is_unspecified()) return "unspecified";
  if (address.is_loopback()) return "loopback";
  if (in({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96)) return restricted_v4_kind(v4_at(bytes, 12));  // mapped
  if (in({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) {  // IPv4-compatible, deprecated: never public
    const auto kind = restricted_v4_kind(v4_at(bytes, 12));
    return kind.empty() ? "reserved" : kind;
  }
  if (in({0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) return restricted_v4_kind(v4_at(bytes, 12));  // NAT64
  if (in({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) return "private";    // local-use NAT64
  if (in({0x20, 0x02}, 16)) return restricted_v4_kind(v4_at(bytes, 2));  // 6to4
  if (in({0x20, 0x01, 0x00, 0x00}, 32)) {
    // Teredo: the server's IPv4 address in clear, the client's inverted.
    auto kind = restricted_v4_kind(v4_at(bytes, 12, 0xff));
    if (kind.empty()) kind = restricted_v4_kind(v4_at(bytes, 4));
    return kind;
  }
  if (in({0x20, 0x01, 0x0d, 0xb8}, 32) || in({0x3f, 0xff, 0x00}, 20)) return "documentation";
  // The rest of the IETF protocol assignments (benchmarking, ORCHID, ...) and
  // SRv6 segment identifiers are not destinations on the internet.
  if (in({0x20, 0x01, 0x00}, 23) || in({0x5f, 0x00}, 16)) return "reserved";
  if (in({0xfe, 0x80}, 10)) return "link-local";
  if (in({0xfe, 0xc0}, 10)) return "private";  // site-local, deprecated
  if (in({0xfc}, 7)) return "private";         // unique local
  if (in({0xff}, 8)) return "multicast";
  if (!in({0x20}, 3)) return "reserved";  // discard-only 100::/64 and everything unassigned
  return {};
}

}  // namespace

std::string restricted_address_kind(const asio::ip::address& address) {
  return address.is_v4() ? restricted_v4_kind(address.to_v4()) : restricted_v6_kind(address.to_v6());
}

}  // namespace mullet::net
