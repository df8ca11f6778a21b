#include <doctest/doctest.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <asio.hpp>

#include "net/server.hpp"

using asio::ip::tcp;

namespace {

// What the server's thread did, for the test's thread to wait on.
class Events {
 public:
  void add(std::vector<std::uint64_t>& list, std::uint64_t id) {
    {
      const std::lock_guard lock(m_mutex);
      list.push_back(id);
    }
    m_changed.notify_all();
  }
  void wait_for(const std::function<bool()>& condition) {
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, condition);
  }
  std::vector<std::uint64_t> read(const std::vector<std::uint64_t>& list) {
    const std::lock_guard lock(m_mutex);
    return list;
  }

  std::vector<std::uint64_t> started, busy, evicted, ended, refused;

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
};

class TestSession;
using TestServer = mullet::net::Server<tcp, TestSession>;

// Evictable until its client sends a byte.
class TestSession : public std::enable_shared_from_this<TestSession> {
 public:
  TestSession(TestServer& server, Events& events, tcp::socket socket, std::uint64_t id)
      : m_server(server), m_events(events), m_socket(std::move(socket)), m_id(id) {}

  void start() {
    m_events.add(m_events.started, m_id);
    read();
  }
  bool evictable() const { return !m_busy; }
  void evict() {
    m_events.add(m_events.evicted, m_id);
    end();
  }
  void end() {
    if (m_ended) return;
    m_ended = true;
    asio::error_code ignored;
    m_socket.close(ignored);
    m_server.forget(m_id);
    m_events.add(m_events.ended, m_id);
  }

 private:
  void read() {
    m_socket.async_read_some(asio::buffer(m_byte),
                             [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                               if (self->m_ended) return;
                               if (error) return self->end();
                               if (!self->m_busy) {
                                 self->m_busy = true;
                                 self->m_events.add(self->m_events.busy, self->m_id);
                               }
                               self->read();
                             });
  }

  TestServer& m_server;
  Events& m_events;
  tcp::socket m_socket;
  const std::uint64_t m_id;
  std::array<char, 1> m_byte{};
  bool m_busy = false;
  bool m_ended = false;
};

struct Fixture {
  explicit Fixture(std::size_t max_connections)
      : server(
            "test server", max_connections,
            [this](tcp::socket socket, std::uint64_t id) {
              return std::make_shared<TestSession>(server, events, std::move(socket), id);
            },
            [this](tcp::socket socket) {
              socket.close();
              events.add(events.refused, 0);
            }) {
    const tcp::endpoint any_port(asio::ip::make_address_v4("127.0.0.1"), 0);
    server.acceptor().open(any_port.protocol());
    server.acceptor().bind(any_port);
    server.acceptor().listen();
    endpoint = server.acceptor().local_endpoint();
  }

  tcp::socket connect() {
    tcp::socket client(client_io);
    client.connect(endpoint);
    return client;
  }
  // Blocks until the server closes the connection.
  static bool closed_by_server(tcp::socket& client) {
    std::array<char, 1> byte{};
    asio::error_code error;
    asio::read(client, asio::buffer(byte), error);
    return error == asio::error::eof || error == asio::error::connection_reset;
  }

  Events events;
  asio::io_context client_io;
  tcp::endpoint endpoint;
  TestServer server;
};

}  // namespace

TEST_CASE("net server: at the cap with nothing evictable, the newcomer is refused") {
  Fixture fixture(2);
  fixture.server.run_in_background();
  auto first = fixture.connect();
  auto second = fixture.connect();
  asio::write(first, asio::buffer("x", 1));
  asio::write(second, asio::buffer("x", 1));
  fixture.events.wait_for([&] { return fixture.events.busy.size() == 2; });
  auto third = fixture.connect();
  CHECK(Fixture::closed_by_server(third));
  fixture.events.wait_for([&] { return fixture.events.refused.size() == 1; });
  CHECK(fixture.server.active() == 2);
  CHECK(fixture.events.read(fixture.events.ended).empty());
  CHECK(fixture.events.read(fixture.events.evicted).empty());
}

TEST_CASE("net server: at the cap, the oldest evictable session makes room") {
  Fixture fixture(2);
  fixture.server.run_in_background();
  auto idle = fixture.connect();
  fixture.events.wait_for([&] { return fixture.events.started.size() == 1; });
  auto busy = fixture.connect();
  asio::write(busy, asio::buffer("x", 1));
  fixture.events.wait_for([&] { return fixture.events.busy.size() == 1; });

  auto newcomer = fixture.connect();
  CHECK(Fixture::closed_by_server(idle));
  fixture.events.wait_for([&] { return fixture.events.started.size() == 3; });
  CHECK(fixture.events.read(fixture.events.evicted) == std::vector<std::uint64_t>{0});

  // Now the newcomer is the oldest idle one; the busy one stays.
  auto last = fixture.connect();
  CHECK(Fixture::closed_by_server(newcomer));
  fixture.events.wait_for([&] { return fixture.events.started.size() == 4; });
  CHECK(fixture.events.read(fixture.events.evicted) == std::vector<std::uint64_t>{0, 2});
  CHECK(fixture.events.read(fixture.events.refused).empty());
  CHECK(fixture.server.active() == 2);
}

TEST_CASE("net server: stop() closes every session and the acceptor, joins, and may be called again") {
  Fixture fixture(4);
  fixture.server.run_in_background();
  auto first = fixture.connect();
  auto second = fixture.connect();
  asio::write(second, asio::buffer("x", 1));
  fixture.events.wait_for([&] { return fixture.events.started.size() == 2; });

  fixture.server.stop();  // returns once the server's thread has ended
  CHECK(fixture.events.read(fixture.events.ended).size() == 2);
  CHECK(fixture.server.active() == 0);
  CHECK(Fixture::closed_by_server(first));
  CHECK(Fixture::closed_by_server(second));
  tcp::socket late(fixture.client_io);
  asio::error_code error;
  late.connect(fixture.endpoint, error);
  CHECK(error == asio::error::connection_refused);
  fixture.server.stop();
  CHECK(fixture.events.read(fixture.events.ended).size() == 2);
}

TEST_CASE("net server: stop() before run() makes run() return at once") {
  Fixture fixture(1);
  fixture.server.stop();
  fixture.server.run();
  CHECK(fixture.server.active() == 0);
  fixture.server.stop();
}
