#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "net/http_head.hpp"

using mullet::net::http::BodyFraming;
using mullet::net::http::forwarded_head;
using mullet::net::http::header_values;
using mullet::net::http::HeadProgress;
using mullet::net::http::HeadRewrite;
using mullet::net::http::host_header_value;
using mullet::net::http::max_head_bytes;
using mullet::net::http::parse_request_head;
using mullet::net::http::parse_response_head;
using mullet::net::http::plausible_request_prefix;
using mullet::net::http::proxy_forms;
using mullet::net::http::rewritten_head;
using mullet::net::http::scan_request_head;
using mullet::net::http::scan_response_head;
using mullet::net::http::server_forms;
using mullet::net::http::TargetForm;
using Strings = std::vector<std::string>;
using Views = std::vector<std::string_view>;

TEST_CASE("http request heads: origin form takes its destination from the one Host header") {
  auto head = parse_request_head(
      "POST /v1/messages?beta=true#x HTTP/1.1\r\nHost: API.Anthropic.com\r\nContent-Length: 2\r\n"
      "x-api-key:  placeholder \r\n\r\n",
      server_forms);
  REQUIRE(head);
  CHECK(head->form == TargetForm::origin);
  CHECK(head->method == "POST");
  CHECK(head->path == "/v1/messages?beta=true");
  CHECK(head->version == "HTTP/1.1");
  CHECK(head->destination.host == "api.anthropic.com");
  CHECK(head->destination.port == 80);
  CHECK(head->origin_line() == "POST /v1/messages?beta=true HTTP/1.1");
  REQUIRE(head->headers.size() == 3);
  CHECK(head->headers[2].name == "x-api-key");
  CHECK(head->headers[2].value == "placeholder");
  CHECK(header_values(head->headers, "X-API-KEY") == Views{"placeholder"});
  CHECK(header_values(head->headers, "content-length") == Views{"2"});
  CHECK(header_values(head->headers, "te").empty());

  head = parse_request_head("GET / HTTP/1.0\r\nhost: [::1]:8080\r\n\r\n", server_forms);
  REQUIRE(head);
  CHECK(head->destination.host == "::1");
  CHECK(head->destination.port == 8080);
  CHECK(forwarded_head(*head) == "GET / HTTP/1.0\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");

  for (const auto& bad : Strings{
           "GET / HTTP/1.1\r\n\r\n",                                        // no Host
           "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",  // two
           "GET / HTTP/1.1\r\nHost: \r\n\r\n",
           "GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n",  // the grant grammar's hosts only
           "GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n",
           "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",  // not a proxy
           "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n",
           "GET * HTTP/1.1\r\nHost: a.example\r\n\r\n",
       }) {
    INFO(bad);
    CHECK_FALSE(parse_request_head(bad, server_forms));
  }
}

TEST_CASE("http request heads: proxy forms, and each reader only the forms it accepts") {
  auto head = parse_request_head("CONNECT Example.COM.:443 HTTP/1.1\r\nHost: x\r\n\r\n", proxy_forms);
  REQUIRE(head);
  CHECK(head->form == TargetForm::authority);
  CHECK(head->destination.host == "example.com");
  CHECK(head->destination.port == 443);
  CHECK(head->path.empty());
  CHECK(head->origin_line().empty());
  CHECK(forwarded_head(*head).empty());

  head = parse_request_head("GET http://Example.com:8080?q HTTP/1.1\r\nHost: evil.example\r\n\r\n", proxy_forms);
  REQUIRE(head);
  CHECK(head->form == TargetForm::absolute);
  CHECK(head->destination.host == "example.com");
  CHECK(head->destination.port == 8080);
  CHECK(head->path == "/?q");
  CHECK(forwarded_head(*head) == "GET /?q HTTP/1.1\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n");

  CHECK_FALSE(parse_request_head("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", proxy_forms));
  CHECK_FALSE(parse_request_head("GET https://example.com/ HTTP/1.1\r\n\r\n", proxy_forms));
}

TEST_CASE("http request heads: forwarding drops hop-by-hop headers and those Connection names, never framing") {
  const auto head = parse_request_head(
      "PUT /x HTTP/1.1\r\nHost: a.example:81\r\nConnection: keep-alive, X-Secret, Content-Length\r\n"
      "X-Secret: 1\r\nTE: trailers\r\nUpgrade: h2c\r\nKeep-Alive: 5\r\nProxy-Authorization: Basic eA==\r\n"
      "Content-Length: 3\r\nAccept: */*\r\n\r\n",
      server_forms);
  REQUIRE(head);
  CHECK(forwarded_head(*head) ==
        "PUT /x HTTP/1.1\r\nHost: a.example:81\r\nContent-Length: 3\r\nAccept: */*\r\nConnection: close\r\n\r\n");
}

TEST_CASE("http request heads: malformed heads are refused in every form") {
  for (const auto& bad : Strings{
           "GET / HTTP/1.1\r\nHost: a.example\r\n",  // incomplete
           "GET / HTTP/1.1\nHost: a.example\n\n",    // bare LF
           "GET / HTTP/1.1\r\nHost: a.example\r\n folded\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\x01.example\r\n\r\n",
           "GET / HTTP/2\r\nHost: a.example\r\n\r\n",
           "get / HTTP/1.1\r\nHost: a.example\r\n\r\n",
           "GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n",
           "GET / HTTP/1.1\r\nBad Name: x\r\nHost: a.example\r\n\r\n",
       }) {
    INFO(bad);
    CHECK_FALSE(parse_request_head(bad, server_forms));
    CHECK_FALSE(parse_request_head(bad, proxy_forms));
  }
  const std::string line = "GET / HTTP/1.1\r\nHost: a.example\r\n";
  const auto sized = [&](std::size_t total) {
    return line + "X: " + std::string(total - line.size() - 3 - 4, 'a') + "\r\n\r\n";
  };
  CHECK(parse_request_head(sized(max_head_bytes), server_forms));
  CHECK_FALSE(parse_request_head(sized(max_head_bytes + 1), server_forms));
}

TEST_CASE("http request heads: a prefix is refused as soon as it cannot begin an accepted head") {
  CHECK(plausible_request_prefix("", proxy_forms));
  CHECK(plausible_request_prefix("CONN", proxy_forms));
  CHECK(plausible_request_prefix("CONNECT example.com:443 HTTP/1.1\r\nHo", proxy_forms));
  CHECK(plausible_request_prefix("POST /v1/messages HTTP/1.1\r\n", server_forms));
  CHECK_FALSE(plausible_request_prefix("POST /v1/messages HTTP/1.1\r\n", proxy_forms));
  CHECK_FALSE(plausible_request_prefix("CONNECT example.com:443 HTTP/1.1\r\n", server_forms));
  CHECK_FALSE(plausible_request_prefix("\x16\x03\x01", proxy_forms));
  CHECK_FALSE(plausible_request_prefix("get ", server_forms));
  CHECK_FALSE(plausible_request_prefix("GET / HTTP/1.1\n", server_forms));
  CHECK_FALSE(plausible_request_prefix(std::string(17, 'A'), server_forms));
}

TEST_CASE("http response heads: status line, headers and how the body is framed") {
  auto head = parse_response_head(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", "POST");
  REQUIRE(head);
  CHECK(head->version == "HTTP/1.1");
  CHECK(head->status == 200);
  CHECK(head->reason == "OK");
  CHECK(head->framing == BodyFraming::chunked);
  CHECK(header_values(head->headers, "content-type") == Views{"text/event-stream"});

  head = parse_response_head("HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\ncontent-length: 12\r\n\r\n", "GET");
  REQUIRE(head);
  CHECK(head->status == 404);
  CHECK(head->reason == "Not Found");
  CHECK(head->framing == BodyFraming::length);
  CHECK(head->content_length == 12);

  head = parse_response_head("HTTP/1.0 200 \r\n\r\n", "GET");
  REQUIRE(head);
  CHECK(head->reason.empty());
  CHECK(head->framing == BodyFraming::until_close);
  head = parse_response_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET");
  REQUIRE(head);
  CHECK(head->framing == BodyFraming::until_close);

  // No body, whatever the headers say.
  CHECK(parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD")->framing == BodyFraming::none);
  CHECK(parse_response_head("HTTP/1.1 204 No Content\r\n\r\n", "DELETE")->framing == BodyFraming::none);
  CHECK(parse_response_head("HTTP/1.1 304 Not Modified\r\n\r\n", "GET")->framing == BodyFraming::none);
  CHECK(parse_response_head("HTTP/1.1 100 Continue\r\n\r\n", "POST")->framing == BodyFraming::none);
  CHECK(parse_response_head("HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT")->framing == BodyFraming::none);
  CHECK(parse_response_head("HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", "CONNECT")
            ->framing == BodyFraming::length);
}

TEST_CASE("http response heads: malformed heads and ambiguous framing are refused") {
  for (const auto& bad : Strings{
           "HTTP/1.1 200 OK\r\n",
           "HTTP/1.1 200 OK\n\n",
           "HTTP/1.1 200\r\n\r\n",  // the space before the reason is required
           "HTTP/2 200 OK\r\n\r\n",
           "HTTP/1.1 20 OK\r\n\r\n",
           "HTTP/1.1 2000 OK\r\n\r\n",
           "HTTP/1.1 099 Early\r\n\r\n",
           "HTTP/1.1 600 Late\r\n\r\n",
           "HTTP/1.1 +20 OK\r\n\r\n",
           "http/1.1 200 OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked,\r\n\r\n",
           "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
       }) {
    INFO(bad);
    CHECK_FALSE(parse_response_head(bad, "GET"));
  }
}

TEST_CASE("http heads arriving in pieces: complete, incomplete, garbage and too large") {
  const std::string head = "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3129\r\nContent-Length: 4\r\n\r\n";
  const std::string received = head + "body";
  // Fed a byte at a time, it completes exactly at the end of the head.
  for (std::size_t size = 1; size <= head.size(); ++size) {
    const auto scan = scan_request_head(std::string_view(received).substr(0, size), size - 1, server_forms);
    CHECK(scan.progress == (size < head.size() ? HeadProgress::incomplete : HeadProgress::complete));
  }
  const auto whole = scan_request_head(received, 0, server_forms);
  CHECK(whole.progress == HeadProgress::complete);
  CHECK(whole.size == head.size());
  CHECK(scan_request_head("\x16\x03\x01", 0, server_forms).progress == HeadProgress::malformed);
  CHECK(scan_request_head("GET http://a.example/ HTTP/1.1\r\n", 0, server_forms).progress == HeadProgress::malformed);
  CHECK(scan_request_head("GET http://a.example/ HTTP/1.1\r\n", 0, proxy_forms).progress == HeadProgress::incomplete);
  const std::string endless = "GET / HTTP/1.1\r\nX: " + std::string(max_head_bytes, 'a');
  CHECK(scan_request_head(endless, 0, server_forms).progress == HeadProgress::too_large);
  CHECK(scan_request_head(endless + "\r\n\r\n", 0, server_forms).progress == HeadProgress::too_large);

  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  CHECK(scan_response_head(response.substr(0, 20), 0).progress == HeadProgress::incomplete);
  const auto scan = scan_response_head(response + "next", 20);
  CHECK(scan.progress == HeadProgress::complete);
  CHECK(scan.size == response.size());
  CHECK(scan_response_head(std::string(max_head_bytes, 'x'), 0).progress == HeadProgress::too_large);
}

TEST_CASE("http request heads: rewriting chooses target, Host, dropped and added headers, and the framing") {
  const auto head = parse_request_head(
      "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3129\r\nConnection: close, X-Hop\r\n"
      "X-Hop: 1\r\nX-Drop: 2\r\nTransfer-Encoding: chunked\r\nAnthropic-Version: 2023-06-01\r\n\r\n",
      server_forms);
  REQUIRE(head);
  HeadRewrite rewrite{"/prefix/v1/messages?beta=true", "api.example:8443", {"x-DROP"}, true, {{"Content-Length", "4"}}};
  CHECK(rewritten_head(*head, rewrite) ==
        "POST /prefix/v1/messages?beta=true HTTP/1.1\r\nHost: api.example:8443\r\n"
        "Anthropic-Version: 2023-06-01\r\nContent-Length: 4\r\nConnection: close\r\n\r\n");
  rewrite.drop_framing = false;
  rewrite.add.clear();
  CHECK(rewritten_head(*head, rewrite).find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(host_header_value(head->destination, 80) == "127.0.0.1:3129");
  CHECK(host_header_value(head->destination, 3129) == "127.0.0.1");
}
