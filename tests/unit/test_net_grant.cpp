// net/grant and net/address: the one grant grammar, and which addresses are
// the host's or its networks'.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <asio/ip/address.hpp>

#include "net/address.hpp"
#include "net/grant.hpp"

#include "support/support.hpp"

using mullet::net::Destination;
using mullet::net::Grant;
using mullet::net::grant_names_an_address;
using mullet::net::is_localhost_name;
using mullet::net::parse_destination;
using mullet::net::parse_grant;
using mullet::net::parse_host;
using mullet::net::restricted_address_kind;
using mullet::test::contains;
using Strings = std::vector<std::string>;

namespace {

asio::ip::address ip(const std::string& text) {
  return asio::ip::make_address(text);
}

}  // namespace

// ---------------------------------------------------------------------------
// Grants

TEST_CASE("grants: '*', names, dotted quads and bracketed IPv6, each with a port") {
  struct Case {
    std::string text;
    Grant::Kind kind;
    std::string host;
    int port;
    std::string canonical;
  };
  const std::vector<Case> cases = {
      {"*", Grant::Kind::anywhere, "", 0, "*"},
      {"api.anthropic.com:443", Grant::Kind::name, "api.anthropic.com", 443, "api.anthropic.com:443"},
      {"API.Anthropic.COM:443", Grant::Kind::name, "api.anthropic.com", 443, "api.anthropic.com:443"},
      {"example.com.:80", Grant::Kind::name, "example.com", 80, "example.com:80"},
      {"a:1", Grant::Kind::name, "a", 1, "a:1"},
      {"3com.com:65535", Grant::Kind::name, "3com.com", 65535, "3com.com:65535"},
      {"x-1.example:8080", Grant::Kind::name, "x-1.example", 8080, "x-1.example:8080"},
      {"7f000001:80", Grant::Kind::name, "7f000001", 80, "7f000001:80"},  // not a number to inet_aton either
      {"127.0.0.1:8080", Grant::Kind::address, "127.0.0.1", 8080, "127.0.0.1:8080"},
      {"0.0.0.0:1", Grant::Kind::address, "0.0.0.0", 1, "0.0.0.0:1"},
      {"255.255.255.255:1", Grant::Kind::address, "255.255.255.255", 1, "255.255.255.255:1"},
      {"[::1]:9000", Grant::Kind::address, "::1", 9000, "[::1]:9000"},
      {"[0:0:0:0:0:0:0:1]:9000", Grant::Kind::address, "::1", 9000, "[::1]:9000"},
      {"[2001:DB8::A]:443", Grant::Kind::address, "2001:db8::a", 443, "[2001:db8::a]:443"},
      {"[::ffff:127.0.0.1]:80", Grant::Kind::address, "::ffff:127.0.0.1", 80, "[::ffff:127.0.0.1]:80"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    const auto grant = parse_grant(c.text);
    REQUIRE(grant.has_value());
    CHECK(grant->kind == c.kind);
    CHECK(grant->destination.host == c.host);
    CHECK(grant->destination.port == c.port);
    CHECK(grant->to_string() == c.canonical);
    CHECK(grant->destination.address.has_value() == (c.kind == Grant::Kind::address));
    CHECK(grant_names_an_address(c.text) == (c.kind == Grant::Kind::address));
  }
}

TEST_CASE("grants: every other spelling is refused, and an address spelled oddly still names an address") {
  // Spellings of an address a resolver or a socket would still read as one.
  const Strings odd_addresses = {
      "::ffff:127.0.0.1:80",  // IPv6 without brackets: ambiguous
      "::1:80",
      "::127.0.0.1:80",
      "64:ff9b::7f00:1:80",
      "2002:7f00:1:::80",
      "fe80::1%eth0:80",
      "[fe80::1%eth0]:80",  // zone ids
      "[fe80::1%25eth0]:80",
      "[::1]",  // no port
      "[::1]:0",
      "[::1]8080",
      "[::1:80",
      "[127.0.0.1]:80",
      "[ ::1]:80",
      "127.1:80",
      "127.0.1:80",
      "2130706433:80",
      "0x7f000001:80",
      "0X7F000001:80",
      "0x7f.1:80",
      "0x7f.0x0.0x0.0x1:80",
      "017700000001:80",
      "0177.0.0.1:80",
      "127.000.000.001:80",
      "127.0.0.01:80",
      "127.0.0.1.:80",
      "127.0.0.256:80",
      "127.0.0.1.5:80",
      "1.2.3:80",
      "127.0.0.1:",
      "127.0.0.1:0",
      "127.0.0.1:65536",
      "127.0.0.1:080",
      "127.0.0.1:+80",
      "127.0.0.1: 80",
  };
  for (const auto& text : odd_addresses) {
    INFO(text);
    CHECK_FALSE(parse_grant(text).has_value());
    CHECK(grant_names_an_address(text));
  }
  const Strings bad_names = {
      "",
      " ",
      "example.com",  // no port
      ":443",
      "example.com:",
      "example.com:0",
      "example.com:00443",
      "example.com:0443",
      "example.com:65536",
      "example.com:99999",
      "example.com:100000",
      "example.com:-1",
      "example.com:443x",
      "example.com:https",
      "example.com:443:443",
      " example.com:443",
      "example.com:443 ",
      "example.com :443",
      "user@example.com:443",
      "user:pw@example.com:443",
      "exa%6dple.com:443",
      "example.com/x:443",
      "exa_mple.com:443",
      "-example.com:443",
      "example-.com:443",
      "example..com:443",
      ".example.com:443",
      "example.com..:443",
      ".:443",
      "*.example.com:443",
      "**",
      "* ",
      "*:443",
      "exämple.com:443",
      std::string("example.com\0.evil:443", 21),
      "example.com\n:443",
  };
  for (const auto& text : bad_names) {
    INFO(text);
    CHECK_FALSE(parse_grant(text).has_value());
  }
  for (const auto& text : Strings{"example.com:0", "exa_mple.com:443", "user@example.com:443", "example.com:443x"}) {
    INFO(text);
    CHECK_FALSE(grant_names_an_address(text));
  }
}

TEST_CASE("grants: labels of 63 and names of 253 characters, not more") {
  const std::string label63(63, 'a');
  CHECK(parse_grant(label63 + ".example:1").has_value());
  CHECK_FALSE(parse_grant(label63 + "a.example:1").has_value());
  // 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253
  const std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  REQUIRE(name253.size() == 253);
  CHECK(parse_grant(name253 + ":443").has_value());
  CHECK(parse_grant(name253 + ".:443").has_value());  // the trailing dot does not count
  CHECK(parse_grant(name253 + ".:443")->destination.host == name253);
  CHECK_FALSE(parse_grant(name253 + "b:443").has_value());
  CHECK_FALSE(parse_grant(name253 + "b.:443").has_value());
}

TEST_CASE("grants: a grant allows its own destination only, '*' allows all") {
  const auto allows = [](const std::string& grant, const std::string& target) {
    return parse_grant(grant)->allows(*parse_destination(target));
  };
  CHECK(allows("api.anthropic.com:443", "API.Anthropic.COM.:443"));
  CHECK_FALSE(allows("api.anthropic.com:443", "api.anthropic.com:80"));
  CHECK_FALSE(allows("api.anthropic.com:443", "evil.api.anthropic.com:443"));
  CHECK_FALSE(allows("api.anthropic.com:443", "anthropic.com:443"));
  CHECK(allows("127.0.0.1:80", "127.0.0.1:80"));
  CHECK_FALSE(allows("127.0.0.1:80", "[::ffff:127.0.0.1]:80"));  // another address, judged on its own
  CHECK_FALSE(allows("127.0.0.1:80", "localhost:80"));
  CHECK(allows("[::1]:80", "[0::0:1]:80"));
  CHECK(allows("*", "anything.example:1"));
  CHECK(allows("*", "[::1]:22"));  // the restricted-address rule refuses it later
}

TEST_CASE("destinations: an optional port with a default; hosts alone") {
  CHECK(parse_destination("example.com", 443)->port == 443);
  CHECK(parse_destination("example.com:8443", 443)->port == 8443);
  CHECK(parse_destination("[::1]", 80)->to_string() == "[::1]:80");
  CHECK(parse_destination("[::1]", 80)->authority_host() == "[::1]");
  CHECK(parse_destination("127.0.0.1", 80)->authority_host() == "127.0.0.1");
  CHECK_FALSE(parse_destination("example.com", 0).has_value());
  CHECK_FALSE(parse_destination("example.com:", 80).has_value());
  CHECK_FALSE(parse_destination("::1", 80).has_value());
  CHECK(parse_host("Example.COM.")->host == "example.com");
  CHECK(parse_host("[::FFFF:7F00:1]")->host == "::ffff:127.0.0.1");
  CHECK_FALSE(parse_host("example.com:443").has_value());
  CHECK_FALSE(parse_host("[]").has_value());
  CHECK(std::string(parse_destination("::ffff:127.0.0.1:80", 0).error().what()).find("brackets") != std::string::npos);
}

TEST_CASE("grants: a refusal is a usage error that says why") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "the host is empty"},
      {"example.com", "the port is missing"},
      {"example.com:0443", "1 to 65535, in decimal without leading zeros"},
      {"::1:80", "must be in brackets"},
      {"[::1", "closed by ]"},
      {"[::1]x80", "only :port may follow"},
      {"[fe80::1%eth0]:80", "no zone"},
      {"127.1:80", "four decimal numbers"},
      {"example.123:80", "four decimal numbers"},  // a resolver reads an all-digit last label as an address
      {"exa_mple.com:443", "letters, digits, hyphens and dots only"},
      {"-x.example:443", "starts or ends in a hyphen"},
      {"a..b:443", "empty label"},
      {std::string(64, 'a') + ".example:443", "longer than 63"},
  };
  for (const auto& [text, why] : cases) {
    INFO(text);
    const auto grant = parse_grant(text);
    REQUIRE_FALSE(grant.has_value());
    CHECK(grant.error().code() == mullet::ExitCode::usage);
    CHECK(contains(grant.error().what(), why));
  }
  CHECK(grant_names_an_address("example.123:80"));
}

TEST_CASE("destinations: a name never equals an address, whatever it spells") {
  CHECK_FALSE(*parse_destination("localhost:80") == *parse_destination("127.0.0.1:80"));
  CHECK(*parse_destination("127.0.0.1:80") == *parse_destination("127.0.0.1:80"));
  CHECK_FALSE(*parse_destination("127.0.0.1:80") == *parse_destination("127.0.0.1:81"));
  CHECK(*parse_destination("[::FFFF:127.0.0.1]:80") == *parse_destination("[::ffff:7f00:1]:80"));
  CHECK_FALSE(*parse_destination("[::ffff:127.0.0.1]:80") == *parse_destination("127.0.0.1:80"));
}

TEST_CASE("localhost and every name under it are loopback names") {
  for (const char* name : {"localhost", "LOCALHOST", "localhost.", "sub.localhost", "a.b.localhost."}) {
    INFO(name);
    CHECK(is_localhost_name(*parse_host(name)));
  }
  for (const char* name : {"localhost.example", "mylocalhost", "127.0.0.1", "[::1]", "localhos"}) {
    INFO(name);
    CHECK_FALSE(is_localhost_name(*parse_host(name)));
  }
}

// ---------------------------------------------------------------------------
// Addresses

TEST_CASE("addresses: every range of the host and its networks is restricted, in every IPv6 form") {
  struct Case {
    const char* address;
    const char* kind;
  };
  const std::vector<Case> cases = {
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"10.0.0.1", "private"},
      {"10.255.255.255", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "link-local"},
      {"100.64.0.1", "carrier-grade NAT"},
      {"100.127.255.255", "carrier-grade NAT"},
      {"192.0.0.8", "reserved"},
      {"192.0.2.1", "documentation"},
      {"198.51.100.1", "documentation"},
      {"203.0.113.1", "documentation"},
      {"192.88.99.1", "reserved"},
      {"198.18.0.1", "reserved"},
      {"198.19.255.255", "reserved"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"240.0.0.1", "reserved"},
      {"255.255.255.255", "broadcast"},
      {"::", "unspecified"},
      {"::1", "loopback"},
      // IPv4-mapped
      {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:10.1.2.3", "private"},
      {"::ffff:169.254.169.254", "link-local"},
      {"::ffff:0.0.0.0", "unspecified"},
      // IPv4-compatible, deprecated: restricted even when the IPv4 is public
      {"::127.0.0.1", "loopback"},
      {"::10.0.0.1", "private"},
      {"::8.8.8.8", "reserved"},
      // NAT64
      {"64:ff9b::7f00:1", "loopback"},
      {"64:ff9b::a00:1", "private"},
      {"64:ff9b::a9fe:a9fe", "link-local"},
      {"64:ff9b:1::1", "private"},
      {"64:ff9b:1:ffff::8.8.8.8", "private"},
      // 6to4
      {"2002:7f00:1::", "loopback"},
      {"2002:a00:1::1", "private"},
      {"2002:a9fe:a9fe::1", "link-local"},
      // Teredo: server 65.54.227.120 in clear, client 127.0.0.1 inverted
      {"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"},
      {"2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"},  // 10.0.0.1
      {"2001:0:a00:1:8000:63bf:f7f7:f7f7", "private"},      // server 10.0.0.1, client 8.8.8.8
      // other IPv6 ranges
      {"2001:2::1", "reserved"},   // benchmarking
      {"2001:10::1", "reserved"},  // ORCHID
      {"2001:20::1", "reserved"},  // ORCHIDv2
      {"2001:db8::1", "documentation"},
      {"3fff::1", "documentation"},
      {"5f00::1", "reserved"},
      {"100::1", "reserved"},  // discard-only
      {"fe80::1", "link-local"},
      {"febf::1", "link-local"},
      {"fec0::1", "private"},
      {"fc00::1", "private"},
      {"fd12:3456::1", "private"},
      {"ff02::1", "multicast"},
      {"fe00::1", "reserved"},
      {"4000::1", "reserved"},
      {"::1:0:0:0", "reserved"},
  };
  for (const auto& c : cases) {
    INFO(c.address);
    CHECK(restricted_address_kind(ip(c.address)) == c.kind);
  }
}

TEST_CASE("addresses: public ones, in every form, are not restricted") {
  const Strings open = {"8.8.8.8",
                        "1.1.1.1",
                        "93.184.216.34",
                        "172.15.255.255",
                        "172.32.0.1",
                        "100.63.255.255",
                        "100.128.0.1",
                        "169.253.255.255",
                        "192.169.0.1",
                        "192.0.3.1",
                        "11.0.0.1",
                        "223.255.255.255",
                        "2001:4860:4860::8888",
                        "2606:4700:4700::1111",
                        "::ffff:8.8.8.8",
                        "64:ff9b::808:808",
                        "2002:808:808::1",
                        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  // Teredo, client 8.8.8.8
                        "2001:200::1",
                        "3ffe::1"};
  for (const auto& text : open) {
    INFO(text);
    CHECK(restricted_address_kind(ip(text)).empty());
  }
}
