#include "net/credential_rules.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/clock.hpp"
#include "util/strings.hpp"

namespace mullet::net {
namespace {

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool has_control_byte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

bool equal_in_constant_time(std::string_view presented, std::string_view expected) {
  // The length is no secret (every sentinel has the same); the bytes are.
  return presented.size() == expected.size() && CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
  }
}

std::string lower(std::string_view text) {
  return util::to_lower(text);
}

}  // namespace

// An error as Anthropic's API reports one, which OpenAI-style clients read
// too (error.message). `retry`: whether the client may try again; Claude Code
// and the Anthropic SDKs obey x-should-retry before looking at the status.
std::string api_error_answer(int status, std::string_view type, const std::string& message, bool retry) {
  const nlohmann::json body = {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
  const auto text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
         "\r\nx-should-retry: " + (retry ? "true" : "false") + "\r\nConnection: close\r\n\r\n" + text;
}

std::string path_without_query(std::string_view path) {
  return std::string(path.substr(0, path.find('?')));
}

std::string UpstreamUrl::to_string() const {
  return (tls ? "https://" : "http://") + http::host_header_value(destination, tls ? 443 : 80) + path_prefix;
}

Result<UpstreamUrl> parse_upstream_url(std::string_view url) {
  const std::string shown =
      url.find('@') == std::string_view::npos ? "'" + std::string(url) + "'" : "(a URL with user info)";
  const auto bad = [&](const std::string& why) -> Result<UpstreamUrl> {
    return fail(usage_error("the API base URL " + shown + " is not usable: " + why,
                            "use https://host[:port][/path], or http:// for a gateway on your own network"));
  };
  if (std::any_of(url.begin(), url.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte <= 0x20 || byte >= 0x7f;
      })) {
    return bad("it holds blanks, control characters or non-ASCII bytes");
  }
  UpstreamUrl upstream;
  std::string_view rest;
  const auto lowered = lower(url.substr(0, 8));
  if (lowered.starts_with("https://")) {
    rest = url.substr(8);
  } else if (lowered.starts_with("http://")) {
    upstream.tls = false;
    rest = url.substr(7);
  } else {
    return bad("it must start with https:// (or http:// for a local gateway)");
  }
  const auto authority_end = rest.find_first_of("/?#");
  const auto authority = rest.substr(0, authority_end);
  if (authority.find('@') != std::string_view::npos) return bad("credentials do not belong in the URL");
  if (authority.empty()) return bad("it names no host");
  auto destination = parse_destination(authority, upstream.tls ? 443 : 80);
  if (!destination) return bad(destination.error().what());
  upstream.destination = std::move(*destination);
  auto path = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (path.find_first_of("?#") != std::string_view::npos) return bad("a base URL has no query or fragment");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  for (const auto& segment : util::split(path.empty() ? std::string_view() : path.substr(1), '/')) {
    if (path.empty()) break;
    if (segment.empty() || segment == "." || segment == "..") return bad("its path has an empty, '.' or '..' segment");
  }
  upstream.path_prefix = std::string(path);
  return upstream;
}

Result<http::Header> credential_header(const CredentialHeader& header, std::string_view credential) {
  if (header.name.empty() || !std::all_of(header.name.begin(), header.name.end(), is_token_char)) {
    return fail(
        usage_error("the credential header name '" + util::terminal_safe(header.name) + "' is not an HTTP header name",
                    "use x-api-key, or Authorization with a format such as \"Bearer {}\""));
  }
  const auto placeholder = header.format.find("{}");
  if (placeholder == std::string::npos || header.format.find("{}", placeholder + 2) != std::string::npos ||
      has_control_byte(header.format)) {
    return fail(usage_error("the credential header format '" + util::terminal_safe(header.format) +
                                "' must hold \"{}\" exactly once, and no control characters",
                            "for example \"Bearer {}\" or \"{}\""));
  }
  // Never quote the credential itself.
  if (credential.empty()) return fail(usage_error("the credential is empty"));
  if (has_control_byte(credential)) {
    return fail(usage_error("the credential holds a control character (a line break?)",
                            "give the key alone, without a trailing newline"));
  }
  if (credential.front() == ' ' || credential.front() == '\t' || credential.back() == ' ' ||
      credential.back() == '\t') {
    return fail(usage_error("the credential begins or ends with a blank"));
  }
  std::string value = header.format;
  value.replace(placeholder, 2, credential);
  return http::Header{header.name, std::move(value)};
}

std::string make_sentinel() {
  return "sk-mullet-" + util::random_hex(32);
}

bool carries_sentinel(const http::Headers& headers, std::string_view sentinel) {
  if (sentinel.empty()) return false;
  bool seen = false;
  bool all_match = true;
  for (const auto& [name, value] : headers) {
    const auto lowered = lower(name);
    std::string_view presented;
    if (lowered == "x-api-key") {
      presented = value;
    } else if (lowered == "authorization") {
      constexpr std::string_view scheme = "bearer ";
      if (value.size() <= scheme.size() || lower(std::string_view(value).substr(0, scheme.size())) != scheme) {
        seen = true;
        all_match = false;
        continue;
      }
      presented = std::string_view(value).substr(scheme.size());
      while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
    } else {
      continue;
    }
    seen = true;
    all_match = equal_in_constant_time(presented, sentinel) && all_match;
  }
  return seen && all_match;
}

std::vector<ApiRoute> default_api_routes() {
  return {{"POST", "/v1/messages", true},
          {"POST", "/v1/messages/count_tokens", false},
          {"POST", "/v1/chat/completions", true}};
}

std::string upstream_request_head(const http::RequestHead& request, const UpstreamUrl& upstream,
                                  const http::Header& credential, std::size_t body_size) {
  http::HeadRewrite rewrite;
  rewrite.target = upstream.path_prefix + request.path;
  rewrite.host = http::host_header_value(upstream.destination, upstream.tls ? 443 : 80);
  rewrite.drop = {"x-api-key",       "authorization", "proxy-authorization", "cookie",
                  "accept-encoding", "expect",        credential.name};
  rewrite.drop_framing = true;
  rewrite.add = {credential, {"Accept-Encoding", "identity"}};
  const bool has_body = !http::header_values(request.headers, "content-length").empty() ||
                        !http::header_values(request.headers, "transfer-encoding").empty() ||
                        request.method == "POST" || request.method == "PUT" || request.method == "PATCH";
  if (has_body) rewrite.add.push_back({"Content-Length", std::to_string(body_size)});
  return http::rewritten_head(request, rewrite);
}

std::string client_response_head(const http::ResponseHead& response, bool client_chunked) {
  std::vector<std::string> connection_options;
  for (const auto value : http::header_values(response.headers, "connection")) {
    for (const auto& option : util::split(value, ',')) connection_options.push_back(lower(util::trim(option)));
  }
  static const std::vector<std::string> dropped = {
      "connection", "keep-alive",        "proxy-connection", "proxy-authenticate", "te",
      "trailer",    "transfer-encoding", "upgrade",          "content-length",     "set-cookie"};
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + response.reason + "\r\n";
  for (const auto& [name, value] : response.headers) {
    const auto lowered = lower(name);
    if (std::find(dropped.begin(), dropped.end(), lowered) != dropped.end() ||
        std::find(connection_options.begin(), connection_options.end(), lowered) != connection_options.end()) {
      continue;
    }
    head += name + ": " + value + "\r\n";
  }
  if (response.framing == http::BodyFraming::length) {
    head += "Content-Length: " + std::to_string(response.content_length) + "\r\n";
  } else if (client_chunked) {
    head += "Transfer-Encoding: chunked\r\n";
  }
  head += "Connection: close\r\n\r\n";
  return head;
}

}  // namespace mullet::net
