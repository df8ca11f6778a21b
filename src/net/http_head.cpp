#include "net/http_head.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "util/strings.hpp"

namespace mullet::net::http {
namespace {

constexpr std::size_t max_method_length = 16;

// ASCII only, whatever the locale.
std::string lower(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lowered;
}

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (byte < 0x20 && c != '\t') || byte == 0x7f;
}

bool is_version(std::string_view text) {
  return text == "HTTP/1.1" || text == "HTTP/1.0";
}

// The lines of a complete head, the empty one that ends it left out; nullopt
// when it is too large, has a bare CR or LF, or a control byte.
std::optional<std::vector<std::string_view>> head_lines(std::string_view head) {
  if (head.size() > max_head_bytes || head.size() < 4 || !head.ends_with("\r\n\r\n")) return std::nullopt;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '\r') {
      if (i + 1 >= head.size() || head[i + 1] != '\n') return std::nullopt;
    } else if (c == '\n') {
      if (i == 0 || head[i - 1] != '\r') return std::nullopt;
    } else if (is_control(c)) {
      return std::nullopt;
    }
  }
  // Every line, the last header's included, ends in CRLF; then the empty line.
  const auto lines_text = head.substr(0, head.size() - 2);
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < lines_text.size();) {
    const auto end = lines_text.find("\r\n", start);
    lines.push_back(lines_text.substr(start, end - start));
    start = end + 2;
  }
  return lines;
}

// The header lines after the start line.
std::optional<Headers> parse_headers(const std::vector<std::string_view>& lines) {
  Headers headers;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto line = lines[i];
    // An empty line would end the head early; a leading blank is obs-fold.
    if (line.empty() || line.front() == ' ' || line.front() == '\t') return std::nullopt;
    const auto colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return std::nullopt;
    const auto name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return std::nullopt;
    headers.push_back({std::string(name), util::trim(line.substr(colon + 1))});
  }
  return headers;
}

// The path of an origin or absolute form target: fragment dropped, "/" at
// least.
std::string normalized_path(std::string_view target) {
  std::string path(target);
  if (const auto fragment = path.find('#'); fragment != std::string::npos) path.resize(fragment);
  if (path.empty() || path.front() != '/') path.insert(0, "/");
  return path;
}

// The request line alone. In origin form the destination is left empty: it
// comes from the Host header.
std::optional<RequestHead> interpret_request_line(std::string_view line, AcceptedForms forms) {
  const auto first_space = line.find(' ');
  if (first_space == std::string_view::npos) return std::nullopt;
  const auto second_space = line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos || line.find(' ', second_space + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  const auto method = line.substr(0, first_space);
  const auto target = line.substr(first_space + 1, second_space - first_space - 1);
  const auto version = line.substr(second_space + 1);
  if (method.empty() || method.size() > max_method_length ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return std::nullopt;
  }
  if (!is_version(version)) return std::nullopt;
  if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return std::nullopt;
  }
  RequestHead head;
  head.method = std::string(method);
  head.version = std::string(version);
  if (method == "CONNECT") {
    if (!forms.authority) return std::nullopt;
    auto authority = parse_destination(target, 0);
    if (!authority) return std::nullopt;
    head.form = TargetForm::authority;
    head.destination = std::move(*authority);
    return head;
  }
  if (target.front() == '/') {
    if (!forms.origin) return std::nullopt;
    head.form = TargetForm::origin;
    head.path = normalized_path(target);
    return head;
  }
  if (!forms.absolute) return std::nullopt;
  constexpr std::string_view scheme = "http://";
  if (target.size() <= scheme.size() || lower(target.substr(0, scheme.size())) != scheme) return std::nullopt;
  const auto rest = target.substr(scheme.size());
  const auto authority_end = rest.find_first_of("/?#");
  auto authority = parse_destination(rest.substr(0, authority_end), 80);
  if (!authority) return std::nullopt;
  head.form = TargetForm::absolute;
  head.destination = std::move(*authority);
  head.path = normalized_path(authority_end == std::string_view::npos ? "" : rest.substr(authority_end));
  return head;
}

std::optional<std::uint64_t> decimal(std::string_view text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::string_view> header_values(const Headers& headers, std::string_view name) {
  const auto wanted = lower(name);
  std::vector<std::string_view> values;
  for (const auto& header : headers) {
    if (lower(header.name) == wanted) values.emplace_back(header.value);
  }
  return values;
}

std::string RequestHead::origin_line() const {
  if (form == TargetForm::authority) return {};
  return method + " " + path + " " + version;
}

std::optional<RequestHead> parse_request_head(std::string_view head, AcceptedForms forms) {
  const auto lines = head_lines(head);
  if (!lines) return std::nullopt;
  auto request = interpret_request_line(lines->front(), forms);
  if (!request) return std::nullopt;
  auto headers = parse_headers(*lines);
  if (!headers) return std::nullopt;
  request->headers = std::move(*headers);
  if (request->form == TargetForm::origin) {
    const auto hosts = header_values(request->headers, "host");
    if (hosts.size() != 1) return std::nullopt;
    auto destination = parse_destination(hosts.front(), 80);
    if (!destination) return std::nullopt;
    request->destination = std::move(*destination);
  }
  return request;
}

bool plausible_request_prefix(std::string_view received, AcceptedForms forms) {
  for (const char c : received) {
    if (is_control(c) && c != '\r' && c != '\n') return false;
  }
  const auto method_end = std::min(received.find(' '), received.size());
  if (method_end > max_method_length) return false;
  for (std::size_t i = 0; i < method_end; ++i) {
    if (received[i] < 'A' || received[i] > 'Z') return false;
  }
  const auto line_end = received.find('\n');
  if (line_end == std::string_view::npos) return true;
  if (line_end == 0 || received[line_end - 1] != '\r') return false;
  return interpret_request_line(received.substr(0, line_end - 1), forms).has_value();
}

std::string host_header_value(const Destination& destination, int default_port) {
  std::string value = destination.authority_host();
  if (destination.port != default_port) value += ":" + std::to_string(destination.port);
  return value;
}

std::string forwarded_head(const RequestHead& request) {
  if (request.form == TargetForm::authority) return {};
  return rewritten_head(request, {request.path, host_header_value(request.destination, 80), {}, false, {}});
}

std::string rewritten_head(const RequestHead& request, const HeadRewrite& rewrite) {
  if (request.form == TargetForm::authority) return {};
  static const std::vector<std::string> hop_by_hop = {
      "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
      "te",         "upgrade",          "host"};
  std::vector<std::string> connection_options;
  for (const auto value : header_values(request.headers, "connection")) {
    for (const auto& option : util::split(value, ',')) connection_options.push_back(lower(util::trim(option)));
  }
  std::vector<std::string> dropped;
  for (const auto& name : rewrite.drop) dropped.push_back(lower(name));
  const auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string forwarded =
      request.method + " " + rewrite.target + " " + request.version + "\r\nHost: " + rewrite.host + "\r\n";
  for (const auto& [name, value] : request.headers) {
    const auto lowered = lower(name);
    const bool framing = lowered == "content-length" || lowered == "transfer-encoding";
    if (listed(hop_by_hop, lowered) || listed(dropped, lowered)) continue;
    if (framing ? rewrite.drop_framing : listed(connection_options, lowered)) continue;
    forwarded += name + ": " + value + "\r\n";
  }
  for (const auto& [name, value] : rewrite.add) forwarded += name + ": " + value + "\r\n";
  forwarded += "Connection: close\r\n\r\n";
  return forwarded;
}

namespace {

HeadScan scan_head(std::string_view received, std::size_t scanned, const AcceptedForms* request_forms) {
  const auto end = received.find("\r\n\r\n", scanned >= 3 ? scanned - 3 : 0);
  const auto head = end == std::string_view::npos ? received : received.substr(0, end + 4);
  if (request_forms != nullptr && !plausible_request_prefix(head, *request_forms)) {
    return {HeadProgress::malformed, 0};
  }
  if (end != std::string_view::npos) {
    if (head.size() > max_head_bytes) return {HeadProgress::too_large, 0};
    return {HeadProgress::complete, head.size()};
  }
  if (received.size() >= max_head_bytes) return {HeadProgress::too_large, 0};
  return {HeadProgress::incomplete, 0};
}

}  // namespace

HeadScan scan_request_head(std::string_view received, std::size_t scanned, AcceptedForms forms) {
  return scan_head(received, scanned, &forms);
}

HeadScan scan_response_head(std::string_view received, std::size_t scanned) {
  return scan_head(received, scanned, nullptr);
}

std::optional<ResponseHead> parse_response_head(std::string_view head, std::string_view request_method) {
  const auto lines = head_lines(head);
  if (!lines) return std::nullopt;
  // HTTP-version SP 3DIGIT SP [reason-phrase]
  const auto status_line = lines->front();
  if (status_line.size() < 13 || status_line[8] != ' ' || status_line[12] != ' ') return std::nullopt;
  ResponseHead response;
  response.version = std::string(status_line.substr(0, 8));
  if (!is_version(response.version)) return std::nullopt;
  const auto code = status_line.substr(9, 3);
  const auto status = decimal(code);
  if (!status || *status < 100 || *status > 599) return std::nullopt;
  response.status = static_cast<int>(*status);
  response.reason = std::string(status_line.substr(13));
  auto headers = parse_headers(*lines);
  if (!headers) return std::nullopt;
  response.headers = std::move(*headers);

  const auto lengths = header_values(response.headers, "content-length");
  const auto codings = header_values(response.headers, "transfer-encoding");
  if (!lengths.empty() && !codings.empty()) return std::nullopt;
  if (!codings.empty() && response.version == "HTTP/1.0") return std::nullopt;
  std::optional<std::uint64_t> length;
  for (const auto text : lengths) {
    // A list ("5, 5") or repeated headers must all say the same.
    for (const auto& item : util::split(text, ',')) {
      const auto value = decimal(util::trim(item));
      if (!value || (length && *length != *value)) return std::nullopt;
      length = value;
    }
  }
  std::string last_coding;
  for (const auto text : codings) {
    for (const auto& item : util::split(text, ',')) {
      last_coding = lower(util::trim(item));
      if (last_coding.empty()) return std::nullopt;
    }
  }

  const bool bodiless_status = response.status < 200 || response.status == 204 || response.status == 304;
  const bool tunnel = request_method == "CONNECT" && response.status < 300;
  if (request_method == "HEAD" || bodiless_status || tunnel) {
    response.framing = BodyFraming::none;
  } else if (!codings.empty()) {
    response.framing = last_coding == "chunked" ? BodyFraming::chunked : BodyFraming::until_close;
  } else if (length) {
    response.framing = BodyFraming::length;
    response.content_length = *length;
  } else {
    response.framing = BodyFraming::until_close;
  }
  return response;
}

}  // namespace mullet::net::http
