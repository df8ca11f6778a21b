// Which IP addresses belong to the host or its networks rather than to the
// public internet. Pure: nothing here resolves or connects.
#pragma once

#include <string>

#include <asio/ip/address.hpp>

namespace mullet::net {

// What kind of restricted address this is: "loopback", "private",
// "link-local", "unspecified", "carrier-grade NAT", "multicast", "broadcast",
// "documentation" or "reserved"; empty for an ordinary public address.
// Every IPv6 form that carries an IPv4 address (mapped ::ffff:a.b.c.d,
// compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo
// 2001::/32) is judged by that address, so no spelling of 127.0.0.1 is
// public; IPv6 outside global unicast (2000::/3) is reserved.
std::string restricted_address_kind(const asio::ip::address& address);

}  // namespace mullet::net
