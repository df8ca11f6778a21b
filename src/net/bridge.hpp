// The bridge: a helper mode of our own binary that runs inside a sandbox that
// was granted network. The sandbox has only loopback; the egress proxy's unix
// socket is bound into it. The bridge listens on 127.0.0.1:<port> (what
// HTTP_PROXY/HTTPS_PROXY name) and relays each TCP connection to that socket.
// It makes no decision: the proxy does, and it also decides which stalled
// connections to drop when there are too many; the bridge only bounds its own
// connections and buffers.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace mullet::net {

struct BridgeOptions {
  // More than the proxy's cap, so that the proxy, which can tell a stalled
  // client from a working one, chooses what to drop. Past it, new connections
  // are closed at once.
  std::size_t max_connections = 1024;
  std::chrono::milliseconds connect_timeout{10'000};  // to the unix socket
  bool stop_on_signals = false;                       // SIGTERM, SIGINT, SIGHUP end run()
};

class Bridge {
 public:
  // Binds 127.0.0.1:listen_port (0: an ephemeral port, see port()). Throws
  // mullet::Error when it cannot.
  Bridge(int listen_port, std::string unix_socket_path, BridgeOptions options = {});
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;
  ~Bridge();

  int port() const;
  // Serves on the calling thread until stop() (or a signal, when asked).
  void run();
  // Any thread, also before run(): run() returns once every connection is
  // closed.
  void stop();
  std::size_t active_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

// The helper mode: ignores SIGPIPE, raises the open-file limit to its hard
// limit (each relayed connection holds two descriptors), sizes the connection
// cap to it, and serves until SIGTERM/SIGINT/SIGHUP (0). 1 when the port
// cannot be bound; the reason goes to the log (stderr). `on_listening` runs
// once the port is bound and listening, before serving (e.g. to tell a
// parent that waits for it before starting the command).
int run_bridge(int listen_port, const std::string& unix_socket_path, const std::function<void()>& on_listening = {});

}  // namespace mullet::net
