#include "net/egress_policy.hpp"

#include <algorithm>

#include "net/address.hpp"
#include "net/http_head.hpp"

namespace mullet::net {
namespace {

const char* article(const std::string& word) {
  return !word.empty() && std::string_view("aeiou").find(word.front()) != std::string_view::npos ? "an" : "a";
}

}  // namespace

std::optional<ProxyRequest> parse_proxy_request(std::string_view head) {
  const auto parsed = http::parse_request_head(head, http::proxy_forms);
  if (!parsed) return std::nullopt;
  return ProxyRequest{parsed->method, parsed->destination.host, parsed->destination.port, parsed->origin_line(),
                      http::forwarded_head(*parsed)};
}

Result<Destination> request_target(const std::string& host, int port) {
  auto target = parse_host(host.find(':') != std::string::npos ? "[" + host + "]" : host);
  if (target) target->port = port;
  return target;
}

bool grant_allows(const std::vector<std::string>& grants, const std::string& host, int port) {
  const auto target = request_target(host, port);
  if (!target) return false;
  return std::any_of(grants.begin(), grants.end(), [&target](const std::string& text) {
    const auto grant = parse_grant(text);
    return grant && grant->allows(*target);
  });
}

bool grant_names_address(const std::vector<std::string>& grants, const asio::ip::address& address, int port) {
  return std::any_of(grants.begin(), grants.end(), [&](const std::string& text) {
    const auto grant = parse_grant(text);
    return grant && grant->kind == Grant::Kind::address && grant->destination.port == port &&
           *grant->destination.address == address;
  });
}

std::optional<ProxyRefusal> refuse_destination(const std::vector<std::string>& grants, const std::string& host,
                                               int port) {
  if (!grant_allows(grants, host, port)) return ProxyRefusal{403, "Forbidden", "not on the allow list", false};
  const auto target = request_target(host, port);
  if (!target) return ProxyRefusal{400, "Bad Request", "malformed request", false};
  if (is_localhost_name(*target)) return ProxyRefusal{403, "Forbidden", "localhost is a loopback name", false};
  return std::nullopt;
}

AddressChoice choose_addresses(const std::vector<std::string>& grants, const std::vector<asio::ip::address>& addresses,
                               int port) {
  AddressChoice choice;
  std::string refusal;
  for (const auto& address : addresses) {
    const auto kind = restricted_address_kind(address);
    if (kind.empty() || grant_names_address(grants, address, port)) {
      choice.permitted.push_back(address);
    } else if (refusal.empty()) {
      refusal = std::string("resolves to ") + article(kind) + " " + kind + " address " + address.to_string();
    }
  }
  if (choice.permitted.empty()) {
    choice.refusal = refusal.empty() ? ProxyRefusal{502, "Bad Gateway", "cannot resolve: no address", true}
                                     : ProxyRefusal{403, "Forbidden", refusal, false};
  }
  return choice;
}

}  // namespace mullet::net
