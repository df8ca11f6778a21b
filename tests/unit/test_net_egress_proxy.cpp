#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "net/bridge.hpp"
#include "net/egress_policy.hpp"
#include "net/egress_proxy.hpp"
#include "net/http_head.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

#include "support/support.hpp"

using mullet::UniqueFd;
using mullet::net::Bridge;
using mullet::net::BridgeOptions;
using mullet::net::choose_addresses;
using mullet::net::EgressProxy;
using mullet::net::grant_allows;
using mullet::net::grant_names_address;
using mullet::net::parse_proxy_request;
using mullet::net::ProxyDecision;
using mullet::net::ProxyOptions;
using mullet::net::refuse_destination;
using mullet::net::run_bridge;
using mullet::test::ScratchDir;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

asio::ip::address ip(const char* text) {
  return asio::ip::make_address(text);
}

// ---------------------------------------------------------------------------
// Plain blocking sockets for the client side, every wait bounded.

using Clock = std::chrono::steady_clock;

int millis_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

UniqueFd connect_unix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return UniqueFd();
  return fd;
}

UniqueFd connect_tcp(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return UniqueFd();
  return fd;
}

bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = Clock::now() + timeout;
  while (!data.empty()) {
    pollfd ready{fd, POLLOUT, 0};
    if (::poll(&ready, 1, millis_left(deadline)) <= 0) return false;
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

// Reads until `marker` was seen, `want` bytes arrived, the peer closed, or
// the timeout; an empty marker and no `want` read to the end.
std::string read_some_until(int fd, std::string_view marker, std::size_t want, std::chrono::milliseconds timeout,
                            bool* ended = nullptr) {
  std::string data;
  const auto deadline = Clock::now() + timeout;
  if (ended != nullptr) *ended = false;
  while ((marker.empty() || data.find(marker) == std::string::npos) && (want == 0 || data.size() < want)) {
    pollfd ready{fd, POLLIN, 0};
    const int polled = ::poll(&ready, 1, millis_left(deadline));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) break;
    char buffer[65536];
    const std::size_t room = want == 0 ? sizeof buffer : std::min(sizeof buffer, want - data.size());
    const ssize_t got = ::recv(fd, buffer, room, 0);
    if (got <= 0) {
      if (ended != nullptr) *ended = true;
      break;
    }
    data.append(buffer, static_cast<std::size_t>(got));
  }
  return data;
}

std::string read_head(int fd) {
  return read_some_until(fd, "\r\n\r\n", 0, 5s);
}
std::string read_exactly(int fd, std::size_t count) {
  return read_some_until(fd, {}, count, 5s);
}
std::string read_to_end(int fd, bool* ended = nullptr) {
  return read_some_until(fd, {}, 0, 5s, ended);
}

bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

// An ephemeral port nothing listens on (it was free a moment ago).
int free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size);
  return ntohs(address.sin_port);
}

void raise_file_limit() {
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::min<rlim_t>(files.rlim_max, 16384);
  ::setrlimit(RLIMIT_NOFILE, &files);
}

// ---------------------------------------------------------------------------
// The destination: on 127.0.0.1, an HTTP server for requests in origin form
// ("GET /" or "POST /"), an echo for everything else.

class TestServer {
 public:
  TestServer() {
    accept();
    m_thread = std::thread([this] { m_io.run(); });
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;
  ~TestServer() {
    asio::post(m_io, [this] {
      asio::error_code ignored;
      m_acceptor.close(ignored);
      m_io.stop();
    });
    m_thread.join();
  }

  int port() const { return m_acceptor.local_endpoint().port(); }
  Strings requests() const {
    const std::lock_guard lock(m_mutex);
    return m_requests;
  }
  int connections() const {
    const std::lock_guard lock(m_mutex);
    return m_connections;
  }
  // Bytes received, every connection together.
  std::uint64_t received() const {
    const std::lock_guard lock(m_mutex);
    return m_received;
  }

 private:
  class Connection : public std::enable_shared_from_this<Connection> {
   public:
    Connection(TestServer& server, asio::ip::tcp::socket socket) : m_server(server), m_socket(std::move(socket)) {}
    void read() {
      m_socket.async_read_some(asio::buffer(m_buffer),
                               [self = shared_from_this()](const asio::error_code& error, std::size_t count) {
                                 if (error) {
                                   asio::error_code ignored;
                                   self->m_socket.close(ignored);
                                   return;
                                 }
                                 self->m_data.append(self->m_buffer.data(), count);
                                 {
                                   const std::lock_guard lock(self->m_server.m_mutex);
                                   self->m_server.m_received += count;
                                 }
                                 self->on_data();
                               });
    }

   private:
    static bool starts(std::string_view data, std::string_view prefix) {
      return data.substr(0, std::min(data.size(), prefix.size())) ==
             prefix.substr(0, std::min(data.size(), prefix.size()));
    }

    void on_data() {
      if (m_mode == Mode::done) {
        m_data.clear();
        return read();
      }
      if (m_mode == Mode::unknown) {
        const bool maybe_http = starts(m_data, "GET /") || starts(m_data, "POST /");
        if (!maybe_http) {
          m_mode = Mode::echo;
        } else if (m_data.size() >= 6 || (m_data.size() >= 5 && m_data.starts_with("GET /"))) {
          m_mode = Mode::http;
        } else {
          return read();
        }
      }
      if (m_mode == Mode::echo) {
        auto chunk = std::make_shared<std::string>(std::move(m_data));
        m_data.clear();
        asio::async_write(m_socket, asio::buffer(*chunk),
                          [self = shared_from_this(), chunk](const asio::error_code& error, std::size_t) {
                            if (!error) self->read();
                          });
        return;
      }
      const auto head_end = m_data.find("\r\n\r\n");
      if (head_end == std::string::npos) return read();
      std::size_t body_size = 0;
      std::string lowered = m_data.substr(0, head_end);
      std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](char c) { return std::tolower(c); });
      if (const auto at = lowered.find("\r\ncontent-length:"); at != std::string::npos) {
        body_size = std::strtoul(lowered.c_str() + at + 17, nullptr, 10);
      }
      if (m_data.size() < head_end + 4 + body_size) return read();
      const std::string body = m_data.substr(head_end + 4, body_size);
      {
        const std::lock_guard lock(m_server.m_mutex);
        m_server.m_requests.push_back(m_data.substr(0, head_end + 4 + body_size));
      }
      const std::string content = "hello " + (body.empty() ? m_data.substr(0, m_data.find(' ', 4)) : body);
      m_response = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(content.size()) +
                   "\r\nConnection: close\r\n\r\n" + content;
      asio::async_write(m_socket, asio::buffer(m_response),
                        [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                          if (error) return;
                          asio::error_code ignored;
                          self->m_socket.shutdown(asio::socket_base::shutdown_send, ignored);
                          self->m_mode = Mode::done;
                          self->read();  // to the client's end, then close
                        });
    }

    enum class Mode { unknown, echo, http, done };
    TestServer& m_server;
    asio::ip::tcp::socket m_socket;
    std::array<char, 16384> m_buffer{};
    std::string m_data;
    std::string m_response;
    Mode m_mode = Mode::unknown;
  };

  void accept() {
    m_acceptor.async_accept([this](const asio::error_code& error, asio::ip::tcp::socket socket) {
      if (error) return;
      {
        const std::lock_guard lock(m_mutex);
        ++m_connections;
      }
      std::make_shared<Connection>(*this, std::move(socket))->read();
      accept();
    });
  }

  mutable std::mutex m_mutex;
  Strings m_requests;
  int m_connections = 0;
  std::uint64_t m_received = 0;
  asio::io_context m_io;
  asio::ip::tcp::acceptor m_acceptor{m_io, asio::ip::tcp::endpoint(ip("127.0.0.1"), 0)};
  std::thread m_thread;
};

// ---------------------------------------------------------------------------
// The proxy with its destination, reached directly or through a bridge.

using Opener = std::function<UniqueFd()>;

struct Fixture {
  explicit Fixture(ProxyOptions options = {})
      : socket_path(dir.path() + "/proxy.sock"),
        port(std::to_string(server.port())),
        proxy({"127.0.0.1:" + port, "localhost:" + port}, socket_path, options) {
    proxy.start();
  }

  Opener direct() const {
    return [path = socket_path] { return connect_unix(path); };
  }

  std::vector<ProxyDecision> decisions_for(const std::string& method, const std::string& host) const {
    std::vector<ProxyDecision> found;
    for (const auto& decision : proxy.decisions()) {
      if (decision.method == method && decision.host == host) found.push_back(decision);
    }
    return found;
  }

  const ScratchDir dir{"mullet-proxy-"};
  TestServer server;
  std::string socket_path;
  std::string port;
  EgressProxy proxy;
};

// A Bridge serving on its own thread. Its cap is raised above the flood's
// 1,022 connections: the bridge relays them all while the proxy decides.
BridgeOptions roomy_bridge() {
  BridgeOptions options;
  options.max_connections = 4096;
  return options;
}

class BridgeThread {
 public:
  explicit BridgeThread(const std::string& socket_path) : m_bridge(0, socket_path, roomy_bridge()) {
    m_thread = std::thread([this] { m_bridge.run(); });
  }
  BridgeThread(const BridgeThread&) = delete;
  BridgeThread& operator=(const BridgeThread&) = delete;
  ~BridgeThread() {
    m_bridge.stop();
    m_thread.join();
  }
  Opener opener() const {
    return [port = m_bridge.port()] { return connect_tcp(port); };
  }
  const Bridge& bridge() const { return m_bridge; }

 private:
  Bridge m_bridge;
  std::thread m_thread;
};

std::string pattern_bytes(std::size_t size, std::size_t seed) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + seed * 7 + 1) % 251);
  return bytes;
}

// CONNECT to the test server, then 100 KiB through the tunnel and back.
void check_connect_echo(Fixture& fixture, const Opener& open, std::size_t seed) {
  const auto fd = open();
  REQUIRE(fd);
  const std::string target = "127.0.0.1:" + fixture.port;
  REQUIRE(send_all(fd.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  CHECK(read_head(fd.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  std::string echoed;
  for (std::size_t chunk = 0; chunk < 25; ++chunk) {
    const auto sent = pattern_bytes(4096, seed + chunk);
    REQUIRE(send_all(fd.get(), sent));
    const auto back = read_exactly(fd.get(), sent.size());
    REQUIRE(back.size() == sent.size());
    CHECK(back == sent);
  }
  // Our half-close goes through; the server's end closes the tunnel.
  ::shutdown(fd.get(), SHUT_WR);
  bool ended = false;
  CHECK(read_to_end(fd.get(), &ended).empty());
  CHECK(ended);
}

}  // namespace

// ---------------------------------------------------------------------------
// Pure helpers

TEST_CASE("proxy grants: host:port, case-insensitive host, exact port, '*'") {
  const Strings grants = {"api.anthropic.com:443", "Registry.NPMJS.org:443", "127.0.0.1:8080", "[::1]:9000",
                          "spaced.example:80"};
  CHECK(grant_allows(grants, "api.anthropic.com", 443));
  CHECK(grant_allows(grants, "API.Anthropic.COM", 443));
  CHECK(grant_allows(grants, "api.anthropic.com.", 443));
  CHECK(grant_allows(grants, "registry.npmjs.org", 443));
  CHECK(grant_allows(grants, "spaced.example", 80));
  CHECK_FALSE(grant_allows(grants, "api.anthropic.com", 80));
  CHECK_FALSE(grant_allows(grants, "api.anthropic.com", 4430));
  CHECK_FALSE(grant_allows(grants, "evil.api.anthropic.com", 443));
  CHECK_FALSE(grant_allows(grants, "anthropic.com", 443));
  CHECK_FALSE(grant_allows(grants, "api.anthropic.com.evil.net", 443));
  CHECK(grant_allows(grants, "127.0.0.1", 8080));
  CHECK_FALSE(grant_allows(grants, "127.0.0.1", 8081));
  CHECK_FALSE(grant_allows(grants, "localhost", 8080));
  CHECK_FALSE(grant_allows(grants, "127.1", 8080));      // same address to getaddrinfo, not a host at all
  CHECK_FALSE(grant_allows({"::1:9000"}, "::1", 9000));  // IPv6 without brackets grants nothing
  CHECK(grant_allows(grants, "::1", 9000));
  CHECK(grant_allows(grants, "0:0:0:0:0:0:0:1", 9000));  // IPv6 compared as addresses
  CHECK_FALSE(grant_allows(grants, "::1", 9001));
  CHECK_FALSE(grant_allows({}, "api.anthropic.com", 443));

  CHECK(grant_allows({"*"}, "anything.example", 1));
  CHECK(grant_allows({"*"}, "10.0.0.1", 22));  // the address rule refuses it later

  // Malformed grants grant nothing.
  for (const auto& bad : Strings{"example.com", ":443", "example.com:", "example.com:0", "example.com:65536",
                                 "example.com:https", "[::1:443", "", " example.com:443"}) {
    INFO(bad);
    CHECK_FALSE(grant_allows({bad}, "example.com", 443));
  }
}

TEST_CASE("proxy grants: only a grant of that very address lets a restricted address through") {
  const Strings grants = {"127.0.0.1:8080", "localhost:8081", "*", "[::1]:9000", "10.1.2.3:443"};
  CHECK(grant_names_address(grants, ip("127.0.0.1"), 8080));
  CHECK_FALSE(grant_names_address(grants, ip("127.0.0.1"), 8081));  // localhost is a name, not the address
  CHECK_FALSE(grant_names_address(grants, ip("127.0.0.2"), 8080));
  CHECK(grant_names_address(grants, ip("::1"), 9000));
  CHECK(grant_names_address(grants, ip("10.1.2.3"), 443));
  CHECK_FALSE(grant_names_address(grants, ip("10.1.2.3"), 80));
  CHECK_FALSE(grant_names_address({"*"}, ip("10.0.0.1"), 80));  // '*' never names an address
  CHECK_FALSE(grant_names_address(grants, ip("::ffff:127.0.0.1"), 8080));
}

TEST_CASE("proxy policy: a destination is refused before resolving when ungranted or a loopback name") {
  const Strings grants = {"example.com:443", "localhost:8080", "127.0.0.1:9000", "*"};
  CHECK_FALSE(refuse_destination(grants, "example.com", 443));
  CHECK_FALSE(refuse_destination(grants, "127.0.0.1", 9000));
  CHECK_FALSE(refuse_destination({"example.com:443"}, "EXAMPLE.com", 443));
  const auto ungranted = refuse_destination({"example.com:443"}, "example.com", 80);
  REQUIRE(ungranted);
  CHECK(ungranted->status == 403);
  CHECK(ungranted->reason == "not on the allow list");
  CHECK_FALSE(ungranted->allowed);
  // Granted by name, yet a name for loopback: never reached by resolving it.
  for (const auto* host : {"localhost", "db.localhost"}) {
    INFO(host);
    const auto loopback = refuse_destination(grants, host, 8080);
    REQUIRE(loopback);
    CHECK(loopback->status == 403);
    CHECK(loopback->reason == "localhost is a loopback name");
  }
  const auto nothing = refuse_destination(grants, "", 443);
  REQUIRE(nothing);
  CHECK(nothing->status == 403);
}

TEST_CASE("proxy policy: resolved addresses of the host's networks are left out unless granted by address") {
  const Strings grants = {"example.com:443", "10.1.2.3:443"};
  auto choice = choose_addresses(grants, {ip("127.0.0.1"), ip("93.184.216.34"), ip("10.0.0.1")}, 443);
  CHECK_FALSE(choice.refusal);
  CHECK(choice.permitted == std::vector<asio::ip::address>{ip("93.184.216.34")});

  choice = choose_addresses(grants, {ip("10.1.2.3"), ip("10.1.2.4")}, 443);
  CHECK(choice.permitted == std::vector<asio::ip::address>{ip("10.1.2.3")});
  CHECK_FALSE(choice.refusal);

  choice = choose_addresses(grants, {ip("10.1.2.3")}, 80);  // the grant names another port
  CHECK(choice.permitted.empty());
  REQUIRE(choice.refusal);
  CHECK(choice.refusal->status == 403);
  CHECK(choice.refusal->reason == "resolves to a private address 10.1.2.3");

  choice = choose_addresses(grants, {ip("::ffff:127.0.0.1"), ip("::1")}, 443);
  REQUIRE(choice.refusal);
  CHECK(choice.refusal->reason == "resolves to a loopback address ::ffff:127.0.0.1");

  choice = choose_addresses(grants, {}, 443);
  REQUIRE(choice.refusal);
  CHECK(choice.refusal->status == 502);
  CHECK(choice.refusal->allowed);
  CHECK(choice.refusal->reason == "cannot resolve: no address");
}

TEST_CASE("proxy request heads: CONNECT") {
  auto head = parse_proxy_request("CONNECT API.Example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n");
  REQUIRE(head);
  CHECK(head->method == "CONNECT");
  CHECK(head->host == "api.example.com");
  CHECK(head->port == 443);
  CHECK(head->origin_line.empty());
  CHECK(head->upstream_head.empty());

  head = parse_proxy_request("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "::1");
  CHECK(head->port == 8443);

  // Hosts in the canonical form grants compare with.
  head = parse_proxy_request("CONNECT Example.COM.:443 HTTP/1.1\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "example.com");
  head = parse_proxy_request("CONNECT [0:0:0:0:0:FFFF:7F00:1]:80 HTTP/1.1\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "::ffff:127.0.0.1");
  CHECK(grant_allows({"[::ffff:127.0.0.1]:80"}, head->host, head->port));
  CHECK_FALSE(grant_allows({"127.0.0.1:80"}, head->host, head->port));

  head =
      parse_proxy_request("CONNECT 127.0.0.1:1 HTTP/1.1\r\nUser-Agent: curl/8\r\nProxy-Connection: Keep-Alive\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "127.0.0.1");
  CHECK(head->port == 1);
}

TEST_CASE("proxy request heads: absolute URIs become origin form with Connection: close") {
  auto head = parse_proxy_request(
      "GET http://Example.com/a/b?c=d#frag HTTP/1.1\r\n"
      "Host: evil.example\r\n"
      "User-Agent: test\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: Basic eA==\r\n"
      "Connection: keep-alive, X-Secret\r\n"
      "X-Secret: 1\r\n"
      "Accept: */*\r\n"
      "\r\n");
  REQUIRE(head);
  CHECK(head->method == "GET");
  CHECK(head->host == "example.com");
  CHECK(head->port == 80);
  CHECK(head->origin_line == "GET /a/b?c=d HTTP/1.1");
  CHECK(head->upstream_head ==
        "GET /a/b?c=d HTTP/1.1\r\n"
        "Host: example.com\r\n"
        "User-Agent: test\r\n"
        "Accept: */*\r\n"
        "Connection: close\r\n"
        "\r\n");

  head = parse_proxy_request("POST http://127.0.0.1:8080 HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "127.0.0.1");
  CHECK(head->port == 8080);
  CHECK(head->origin_line == "POST / HTTP/1.1");
  CHECK(head->upstream_head ==
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");

  head = parse_proxy_request("GET HTTP://[::1]:81?x=1 HTTP/1.0\r\n\r\n");
  REQUIRE(head);
  CHECK(head->host == "::1");
  CHECK(head->port == 81);
  CHECK(head->origin_line == "GET /?x=1 HTTP/1.0");
  CHECK(head->upstream_head == "GET /?x=1 HTTP/1.0\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
}

TEST_CASE("proxy request heads: garbage and oversized heads are refused") {
  const Strings garbage = {
      "",
      "hello",
      "\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\n",  // no empty line
      "CONNECT example.com:443 HTTP/1.1\n\n",  // bare LF
      "CONNECT example.com:443 HTTP/1.1\r\nHost: x\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\nHost: a\rb\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",  // origin form: not a proxy request
      "GET https://example.com/ HTTP/1.1\r\n\r\n",    // TLS is CONNECT's
      "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
      "GET http:// HTTP/1.1\r\n\r\n",
      "GET http://user@example.com/ HTTP/1.1\r\n\r\n",
      "CONNECT example.com HTTP/1.1\r\n\r\n",  // no port
      "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:65536 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:44x HTTP/1.1\r\n\r\n",
      "CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
      "CONNECT exa%6dple.com:443 HTTP/1.1\r\n\r\n",
      "CONNECT [fe80::1%eth0]:443 HTTP/1.1\r\n\r\n",
      "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
      "CONNECT [not-v6]:443 HTTP/1.1\r\n\r\n",
      "CONNECT http://example.com:443 HTTP/1.1\r\n\r\n",
      "connect example.com:443 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:443 HTTP/2.0\r\n\r\n",
      "CONNECT  example.com:443 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1 extra\r\n\r\n",
      "CONNECT example.com:443\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\n folded: header\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\nNo colon here\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\nBad Name: x\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\n: empty name\r\n\r\n",
      "CONNECT example.com:443 HTTP/1.1\r\n\r\nHost: after the end\r\n\r\n",
      std::string("CONNECT example.com:443 HTTP/1.1\r\nX: a\0b\r\n\r\n", 44),
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
      "CONNECT " + std::string(300, 'a') + ".com:443 HTTP/1.1\r\n\r\n",  // host name too long
      // Every host the grant grammar refuses (net/grant.hpp), the same here.
      "CONNECT ::ffff:127.0.0.1:80 HTTP/1.1\r\n\r\n",
      "CONNECT 127.1:80 HTTP/1.1\r\n\r\n",
      "CONNECT 2130706433:80 HTTP/1.1\r\n\r\n",
      "CONNECT 0x7f000001:80 HTTP/1.1\r\n\r\n",
      "CONNECT 017700000001:80 HTTP/1.1\r\n\r\n",
      "CONNECT 127.0.0.01:80 HTTP/1.1\r\n\r\n",
      "CONNECT exa_mple.com:443 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:0443 HTTP/1.1\r\n\r\n",
      "GET http://127.1/ HTTP/1.1\r\n\r\n",
      "GET http://0x7f000001:80/ HTTP/1.1\r\n\r\n",
      "GET http://::1/ HTTP/1.1\r\n\r\n",
      "GET http://[::1%25lo]/ HTTP/1.1\r\n\r\n",
  };
  for (const auto& text : garbage) {
    INFO(text);
    CHECK_FALSE(parse_proxy_request(text));
  }

  const std::string line = "CONNECT example.com:443 HTTP/1.1\r\n";
  const std::string filler = "X-Filler: ";
  const auto sized = [&](std::size_t total) {
    return line + filler + std::string(total - line.size() - filler.size() - 4, 'a') + "\r\n\r\n";
  };
  CHECK(sized(mullet::net::http::max_head_bytes).size() == mullet::net::http::max_head_bytes);
  CHECK(parse_proxy_request(sized(mullet::net::http::max_head_bytes)));
  CHECK_FALSE(parse_proxy_request(sized(mullet::net::http::max_head_bytes + 1)));
  CHECK_FALSE(parse_proxy_request(sized(1024 * 1024)));
}

// ---------------------------------------------------------------------------
// Real sockets, loopback only

TEST_CASE("egress proxy: the socket is 0666, an existing path is refused, stop() removes it") {
  const ScratchDir dir("mullet-proxy-");
  const auto path = dir.path() + "/proxy.sock";
  {
    EgressProxy proxy({"127.0.0.1:1"}, path);
    proxy.start();
    struct stat info {};
    REQUIRE(::lstat(path.c_str(), &info) == 0);
    CHECK(S_ISSOCK(info.st_mode));
    CHECK((info.st_mode & 07777) == 0666);

    EgressProxy second({"127.0.0.1:1"}, path);
    CHECK_THROWS_AS(second.start(), mullet::Error);
    CHECK(static_cast<bool>(connect_unix(path)));  // the first is unharmed

    proxy.stop();
    CHECK(::access(path.c_str(), F_OK) != 0);
    CHECK_FALSE(static_cast<bool>(connect_unix(path)));
    proxy.stop();  // idempotent
  }
  {
    // A leftover file is not replaced.
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    ::close(fd);
    EgressProxy proxy({"*"}, path);
    CHECK_THROWS_AS(proxy.start(), mullet::Error);
    struct stat info {};
    REQUIRE(::lstat(path.c_str(), &info) == 0);
    CHECK(S_ISREG(info.st_mode));
    ::unlink(path.c_str());
  }
  {
    // The destructor stops too.
    {
      EgressProxy proxy({"*"}, path);
      proxy.start();
    }
    CHECK(::access(path.c_str(), F_OK) != 0);
  }
}

TEST_CASE("egress proxy: CONNECT tunnels both ways to a granted address, and the decision is logged") {
  Fixture fixture;
  check_connect_echo(fixture, fixture.direct(), 1);

  REQUIRE(wait_for([&] {
    const auto found = fixture.decisions_for("CONNECT", "127.0.0.1");
    return !found.empty() && found.back().bytes_down > 0;
  }));
  const auto decision = fixture.decisions_for("CONNECT", "127.0.0.1").back();
  CHECK(decision.allowed);
  CHECK(decision.port == fixture.server.port());
  CHECK(decision.reason == "on the allow list");
  CHECK(decision.bytes_up == 25 * 4096);
  CHECK(decision.bytes_down == 25 * 4096);
  CHECK(decision.time.size() == 20);
  CHECK(decision.time.back() == 'Z');

  const auto json = fixture.proxy.decisions_json();
  REQUIRE(json.is_array());
  REQUIRE_FALSE(json.empty());
  CHECK(json.back()["method"] == "CONNECT");
  CHECK(json.back()["allowed"] == true);
  CHECK(json.back()["bytes_up"] == 25 * 4096);
  CHECK(wait_for([&] { return fixture.proxy.active_connections() == 0; }));
}

TEST_CASE("egress proxy: the tunnel that reaches the upload cap is cut there, and later requests are refused") {
  constexpr std::uint64_t limit = 100'000;
  ProxyOptions options;
  options.upload_cap = std::make_shared<mullet::net::UploadCap>(limit, 1000);
  Fixture fixture(options);
  const auto fd = fixture.direct()();
  REQUIRE(fd);
  const std::string target = "127.0.0.1:" + fixture.port;
  REQUIRE(send_all(fd.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  CHECK(read_head(fd.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  // Three times what is left; the echo sends back what reached the server.
  const auto sent = pattern_bytes(300'000, 7);
  std::thread sender([&] { send_all(fd.get(), sent); });
  bool ended = false;
  const auto echoed = read_some_until(fd.get(), {}, 0, 10s, &ended);
  sender.join();
  CHECK(ended);
  // What reached the server stops at the cap. (Less may: closing the
  // tunnel with the server's echo unread resets the connection, which can
  // drop what the server had not read yet.)
  CHECK(wait_for([&] { return fixture.server.received() > 0; }));
  CHECK(fixture.server.received() <= limit - 1000);
  CHECK(echoed.size() <= limit - 1000);
  CHECK(echoed == sent.substr(0, echoed.size()));
  CHECK(options.upload_cap->exhausted());
  CHECK(options.upload_cap->bytes_up() == std::map<std::string, std::uint64_t>{{target, limit - 1000}});
  REQUIRE(wait_for([&] {
    const auto found = fixture.decisions_for("CONNECT", "127.0.0.1");
    return !found.empty() && found.back().bytes_up > 0;
  }));
  const auto decision = fixture.decisions_for("CONNECT", "127.0.0.1").back();
  CHECK(decision.bytes_up == limit - 1000);
  CHECK(decision.reason == "on the allow list; cut at the upload limit (limits.egress_mb)");

  // Once the cap is reached, nothing more is let through.
  const auto next = fixture.direct()();
  REQUIRE(next);
  REQUIRE(send_all(next.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  const auto refused = read_to_end(next.get());
  CHECK(refused.starts_with("HTTP/1.1 403 Forbidden\r\n"));
  CHECK(refused.find("upload limit (limits.egress_mb) is reached") != std::string::npos);
}

TEST_CASE("egress proxy: bytes sent right after the CONNECT head reach the destination first") {
  Fixture fixture;
  const auto fd = connect_unix(fixture.socket_path);
  REQUIRE(fd);
  REQUIRE(send_all(fd.get(), "CONNECT 127.0.0.1:" + fixture.port + " HTTP/1.1\r\n\r\nearly bytes"));
  const auto answer = read_some_until(fd.get(), "early bytes", 0, 5s);
  CHECK(answer == "HTTP/1.1 200 Connection established\r\n\r\nearly bytes");
}

TEST_CASE("egress proxy: an absolute-URI GET and a POST with a body reach the destination in origin form") {
  Fixture fixture;
  const auto target = "127.0.0.1:" + fixture.port;
  {
    const auto fd = connect_unix(fixture.socket_path);
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), "GET http://" + target + "/x HTTP/1.1\r\nHost: " + target +
                                   "\r\nProxy-Connection: keep-alive\r\nUser-Agent: unit\r\n\r\n"));
    const auto response = read_to_end(fd.get());
    CHECK(response.starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(response.ends_with("\r\n\r\nhello GET /x"));
  }
  {
    const auto fd = connect_unix(fixture.socket_path);
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), "POST http://" + target + "/upload HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello"));
    REQUIRE(send_all(fd.get(), " world"));
    const auto response = read_to_end(fd.get());
    CHECK(response.starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(response.ends_with("\r\n\r\nhello hello world"));
  }
  const auto requests = fixture.server.requests();
  REQUIRE(requests.size() == 2);
  CHECK(requests[0] == "GET /x HTTP/1.1\r\nHost: " + target + "\r\nUser-Agent: unit\r\nConnection: close\r\n\r\n");
  CHECK(requests[1] ==
        "POST /upload HTTP/1.1\r\nHost: " + target + "\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world");
  REQUIRE(wait_for([&] {
    const auto found = fixture.decisions_for("POST", "127.0.0.1");
    return found.size() == 1 && found[0].bytes_down > 0;
  }));
  const auto post = fixture.decisions_for("POST", "127.0.0.1")[0];
  CHECK(post.allowed);
  CHECK(post.bytes_up > 11);
}

TEST_CASE("egress proxy: destinations off the allow list get 403, and the refusal is logged") {
  Fixture fixture;
  const auto refused = [&](const std::string& request) {
    const auto fd = connect_unix(fixture.socket_path);
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), request));
    return read_to_end(fd.get());
  };
  auto response = refused("CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n");
  CHECK(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));
  CHECK(response.find("127.0.0.1:1") != std::string::npos);
  CHECK(response.find("not on the allow list") != std::string::npos);

  response = refused("GET http://127.0.0.2:" + fixture.port + "/ HTTP/1.1\r\n\r\n");
  CHECK(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));

  // Granted by name, but the name is loopback.
  response = refused("CONNECT localhost:" + fixture.port + " HTTP/1.1\r\n\r\n");
  CHECK(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));
  CHECK(response.find("localhost:" + fixture.port) != std::string::npos);
  response = refused("CONNECT LOCALHOST.:" + fixture.port + " HTTP/1.1\r\n\r\n");
  CHECK(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));

  CHECK(fixture.server.connections() == 0);
  const auto not_listed = fixture.decisions_for("CONNECT", "127.0.0.1");
  REQUIRE(not_listed.size() == 1);
  CHECK_FALSE(not_listed[0].allowed);
  CHECK(not_listed[0].port == 1);
  CHECK(not_listed[0].reason == "not on the allow list");
  const auto by_name = fixture.decisions_for("CONNECT", "localhost");  // "LOCALHOST." is logged as the same name
  REQUIRE(by_name.size() == 2);
  for (const auto& decision : by_name) {
    CHECK_FALSE(decision.allowed);
    CHECK(decision.reason.find("loopback") != std::string::npos);
  }
  CHECK(fixture.decisions_for("GET", "127.0.0.2").size() == 1);
}

TEST_CASE("egress proxy: '*' never reaches loopback or private addresses") {
  const ScratchDir dir{"mullet-proxy-"};
  TestServer server;
  const auto path = dir.path() + "/proxy.sock";
  EgressProxy proxy({"*"}, path);
  proxy.start();
  for (const auto& target :
       Strings{"127.0.0.1:" + std::to_string(server.port()), "[::1]:" + std::to_string(server.port()),
               "[::ffff:127.0.0.1]:" + std::to_string(server.port()), "localhost:80",
               "0.0.0.0:" + std::to_string(server.port())}) {
    INFO(target);
    const auto fd = connect_unix(path);
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), "CONNECT " + target + " HTTP/1.1\r\n\r\n"));
    CHECK(read_to_end(fd.get()).starts_with("HTTP/1.1 403 Forbidden\r\n"));
  }
  CHECK(server.connections() == 0);
  const auto decisions = proxy.decisions();
  REQUIRE(decisions.size() == 5);
  CHECK(decisions[0].reason == "resolves to a loopback address 127.0.0.1");
  CHECK(decisions[1].reason == "resolves to a loopback address ::1");
  CHECK(decisions[2].reason == "resolves to a loopback address ::ffff:127.0.0.1");
  CHECK(decisions[4].reason == "resolves to an unspecified address 0.0.0.0");
  for (const auto& decision : decisions) CHECK_FALSE(decision.allowed);
}

TEST_CASE("egress proxy: an unreachable destination gets 502, logged as allowed but unreachable") {
  const ScratchDir dir("mullet-proxy-");
  const auto closed = std::to_string(free_port());
  const auto path = dir.path() + "/proxy.sock";
  EgressProxy proxy({"127.0.0.1:" + closed}, path);
  proxy.start();
  const auto fd = connect_unix(path);
  REQUIRE(fd);
  REQUIRE(send_all(fd.get(), "CONNECT 127.0.0.1:" + closed + " HTTP/1.1\r\n\r\n"));
  CHECK(read_to_end(fd.get()).starts_with("HTTP/1.1 502 Bad Gateway\r\n"));
  const auto decisions = proxy.decisions();
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].allowed);
  CHECK(decisions[0].reason.starts_with("upstream unreachable"));
}

TEST_CASE("egress proxy: garbage gets 400, a huge head 431, a stalled head 408") {
  ProxyOptions options;
  options.head_timeout = 300ms;
  Fixture fixture(options);
  const auto answer_to = [&](const std::string& request) {
    const auto fd = connect_unix(fixture.socket_path);
    REQUIRE(fd);
    send_all(fd.get(), request);  // may fail part way: the proxy stops reading once it has seen enough
    return read_to_end(fd.get());
  };
  CHECK(answer_to(std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11)).starts_with("HTTP/1.1 400 "));
  CHECK(answer_to("hello there\r\n\r\n").starts_with("HTTP/1.1 400 "));
  CHECK(answer_to("GET /relative HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 400 "));
  CHECK(
      answer_to("CONNECT 127.0.0.1:" + fixture.port + " HTTP/1.1\r\nBad Header\r\n\r\n").starts_with("HTTP/1.1 400 "));
  // No end of head in sight, but plainly not a request: refused at once.
  CHECK(answer_to(std::string(100 * 1024, 'A')).starts_with("HTTP/1.1 400 "));
  CHECK(answer_to("CONNECT 127.0.0.1:" + fixture.port + " HTTP/1.1\r\nX-Big: " + std::string(20 * 1024, 'a'))
            .starts_with("HTTP/1.1 431 "));

  const auto started = Clock::now();
  const auto stalled = connect_unix(fixture.socket_path);
  REQUIRE(stalled);
  REQUIRE(send_all(stalled.get(), "CONNECT 127.0.0.1:"));
  const auto response = read_to_end(stalled.get());
  CHECK(response.starts_with("HTTP/1.1 408 Request Timeout\r\n"));
  CHECK(Clock::now() - started < 3s);

  const auto decisions = fixture.proxy.decisions();
  REQUIRE(decisions.size() == 7);
  for (const auto& decision : decisions) CHECK_FALSE(decision.allowed);
  CHECK(decisions[0].reason == "malformed request");
  CHECK(decisions[5].reason.find("larger than") != std::string::npos);
  CHECK(decisions[6].reason.find("not complete within 300 ms") != std::string::npos);
  CHECK(fixture.server.connections() == 0);
}

namespace {

// 1,000 connections held open, garbage, a stalled head: a proper client is
// still served at once.
void check_flood(Fixture& fixture, const Opener& open) {
  raise_file_limit();
  std::vector<UniqueFd> held;
  for (int i = 0; i < 1000; ++i) {
    auto fd = open();
    REQUIRE(fd);
    held.push_back(std::move(fd));
  }
  std::vector<UniqueFd> garbage;
  for (int i = 0; i < 20; ++i) {
    auto fd = open();
    REQUIRE(fd);
    send_all(fd.get(), pattern_bytes(1000, static_cast<std::size_t>(i)));
    garbage.push_back(std::move(fd));
  }
  const auto stalled = open();
  REQUIRE(stalled);
  REQUIRE(send_all(stalled.get(), "CONNECT 127.0.0.1:" + fixture.port + " HTTP/1.1\r\nHost: 127.0"));

  const auto started = Clock::now();
  check_connect_echo(fixture, open, 99);
  CHECK(Clock::now() - started < 3s);
  CHECK(fixture.proxy.active_connections() <= 256);
  for (const auto& fd : garbage) CHECK(read_to_end(fd.get()).starts_with("HTTP/1.1 400 "));

  const auto decisions = fixture.proxy.decisions();
  const auto dropped = std::count_if(decisions.begin(), decisions.end(), [](const ProxyDecision& decision) {
    return decision.reason.starts_with("dropped: too many connections");
  });
  CHECK(dropped >= 700);
  CHECK(decisions.size() <= 10'000);
  held.clear();
  CHECK(wait_for([&] { return fixture.proxy.active_connections() <= 1; }));
}

}  // namespace

TEST_CASE("egress proxy: a flood of idle, garbage and stalled connections does not lock others out") {
  Fixture fixture;
  check_flood(fixture, fixture.direct());
}

TEST_CASE("egress proxy: the decision log keeps the last entries only") {
  ProxyOptions options;
  options.max_decisions = 5;
  Fixture fixture(options);
  for (int port = 1; port <= 12; ++port) {
    const auto fd = connect_unix(fixture.socket_path);
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), "CONNECT 127.0.0.1:" + std::to_string(port) + " HTTP/1.1\r\n\r\n"));
    read_to_end(fd.get());
  }
  const auto decisions = fixture.proxy.decisions();
  REQUIRE(decisions.size() == 5);
  CHECK(decisions.front().port == 8);
  CHECK(decisions.back().port == 12);
}

TEST_CASE("egress proxy: stop() closes open tunnels and nothing listens afterwards") {
  Fixture fixture;
  const auto fd = connect_unix(fixture.socket_path);
  REQUIRE(fd);
  REQUIRE(send_all(fd.get(), "CONNECT 127.0.0.1:" + fixture.port + " HTTP/1.1\r\n\r\n"));
  REQUIRE(read_head(fd.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
  const auto idle = connect_unix(fixture.socket_path);
  REQUIRE(idle);
  REQUIRE(wait_for([&] { return fixture.proxy.active_connections() == 2; }));

  fixture.proxy.stop();
  bool ended = false;
  read_to_end(fd.get(), &ended);
  CHECK(ended);
  read_to_end(idle.get(), &ended);
  CHECK(ended);
  CHECK(::access(fixture.socket_path.c_str(), F_OK) != 0);
  CHECK_FALSE(static_cast<bool>(connect_unix(fixture.socket_path)));
  CHECK(fixture.proxy.active_connections() == 0);
}

// ---------------------------------------------------------------------------
// The same through the bridge: TCP on 127.0.0.1 to the proxy's unix socket.

TEST_CASE("bridge to the egress proxy: CONNECT, GET, refusals and a flood, relayed over TCP") {
  Fixture fixture;
  BridgeThread bridge(fixture.socket_path);
  const auto open = bridge.opener();

  check_connect_echo(fixture, open, 7);

  {
    const auto fd = open();
    REQUIRE(fd);
    const auto target = "127.0.0.1:" + fixture.port;
    REQUIRE(send_all(fd.get(), "GET http://" + target + "/via-bridge HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    const auto response = read_to_end(fd.get());
    CHECK(response.starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(response.ends_with("hello GET /via-bridge"));
  }
  for (const auto& refused :
       Strings{"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", "CONNECT localhost:" + fixture.port + " HTTP/1.1\r\n\r\n"}) {
    const auto fd = open();
    REQUIRE(fd);
    REQUIRE(send_all(fd.get(), refused));
    CHECK(read_to_end(fd.get()).starts_with("HTTP/1.1 403 Forbidden\r\n"));
  }
  {
    const auto fd = open();
    REQUIRE(fd);
    send_all(fd.get(), std::string("\x16\x03\x01\x00\xa5\x01\x00", 7));
    CHECK(read_to_end(fd.get()).starts_with("HTTP/1.1 400 "));
  }
  CHECK(fixture.decisions_for("CONNECT", "localhost").size() == 1);

  check_flood(fixture, open);
  CHECK(wait_for([&] { return bridge.bridge().active_connections() == 0; }));
}

TEST_CASE("bridge to the egress proxy: a dead proxy socket closes the client, not the bridge") {
  const ScratchDir dir("mullet-proxy-");
  BridgeThread bridge(dir.path() + "/proxy.sock");  // nothing listens there
  const auto fd = bridge.opener()();
  REQUIRE(fd);
  bool ended = false;
  CHECK(read_to_end(fd.get(), &ended).empty());
  CHECK(ended);
  // Still serving.
  const auto again = bridge.opener()();
  CHECK(static_cast<bool>(again));
}

TEST_CASE("bridge to the egress proxy: run_bridge in its own process relays and ends on SIGTERM") {
  const ScratchDir dir("mullet-proxy-");
  const auto path = dir.path() + "/proxy.sock";
  const int port = free_port();
  // Forked before this test starts any thread of its own.
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    ::_exit(run_bridge(port, path, [&] {
      [[maybe_unused]] const auto written = ::write(ready[1], "r", 1);
      ::close(ready[1]);
    }));
  }
  ::close(ready[1]);
  {
    // Listening before it says so.
    pollfd said{ready[0], POLLIN, 0};
    CHECK(::poll(&said, 1, 5000) == 1);
    char byte = 0;
    CHECK(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);
    CHECK(static_cast<bool>(connect_tcp(port)));
  }

  {
    TestServer server;
    EgressProxy proxy({"127.0.0.1:" + std::to_string(server.port())}, path);
    proxy.start();
    UniqueFd fd;
    CHECK(wait_for([&] { return static_cast<bool>(fd = connect_tcp(port)); }));
    if (fd) {
      const auto target = "127.0.0.1:" + std::to_string(server.port());
      REQUIRE(send_all(fd.get(), "CONNECT " + target + " HTTP/1.1\r\n\r\n"));
      CHECK(read_head(fd.get()) == "HTTP/1.1 200 Connection established\r\n\r\n");
      REQUIRE(send_all(fd.get(), "ping through the bridge process"));
      CHECK(read_exactly(fd.get(), 31) == "ping through the bridge process");
    }
  }

  ::kill(child, SIGTERM);
  int status = 0;
  const bool exited = wait_for([&] { return ::waitpid(child, &status, WNOHANG) == child; });
  if (!exited) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  CHECK(exited);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(static_cast<bool>(connect_tcp(port)));
}
