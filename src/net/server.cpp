#include "net/server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::net {

void listen_on_unix_socket(asio::local::stream_protocol::acceptor& acceptor, const std::string& path,
                           std::string_view what) {
  const std::string named(what);
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    throw failure("cannot use '" + path + "' as " + named + ": the path is empty or too long");
  }
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    throw failure("cannot create " + named + " " + path + ": the path already exists");
  }
  asio::error_code error;
  acceptor.open(asio::local::stream_protocol(), error);
  if (!error) relay::set_close_on_exec(acceptor.native_handle());
  if (!error) acceptor.bind(asio::local::stream_protocol::endpoint(path), error);
  if (error) {
    asio::error_code ignored;
    acceptor.close(ignored);
    throw failure("cannot create " + named + " " + path + ": " + error.message());
  }
  const auto cleanup = [&] {
    asio::error_code ignored;
    acceptor.close(ignored);
    ::unlink(path.c_str());
  };
  if (::chmod(path.c_str(), 0666) != 0) {
    const int saved = errno;
    cleanup();
    throw failure("cannot make " + named + " " + path + " reachable: " + util::errno_text(saved));
  }
  acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    cleanup();
    throw failure("cannot listen on " + named + " " + path + ": " + error.message());
  }
}

void answer_and_close(asio::local::stream_protocol::socket& socket, std::string_view response) {
  [[maybe_unused]] const auto sent =
      ::send(socket.native_handle(), response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  asio::error_code ignored;
  socket.close(ignored);
}

}  // namespace mullet::net
