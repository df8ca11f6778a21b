#include "net/upstream_client.hpp"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <utility>
#include <vector>

#include "net/relay.hpp"
#include "util/error.hpp"

namespace mullet::net {

asio::ssl::context make_tls_client_context(const std::string& ca_file) {
  asio::ssl::context context(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  asio::error_code error;
  if (ca_file.empty()) {
    context.set_default_verify_paths(error);
    if (error) throw failure("cannot load the system's trust store: " + error.message());
  } else {
    context.load_verify_file(ca_file, error);
    if (error) {
      throw usage_error("cannot read CA certificates from " + ca_file + ": " + error.message(),
                        "ca_file must name a PEM file of CA certificates");
    }
  }
  return context;
}

UpstreamConnection::UpstreamConnection(const asio::any_io_executor& executor, asio::ssl::context* tls)
    : m_plain(executor), m_resolver(executor) {
  if (tls != nullptr) m_tls.emplace(executor, *tls);
}

void UpstreamConnection::open(const Destination& target, const std::string& shown, Opened opened) {
  if (target.address) {
    return connect_to({tcp::endpoint(*target.address, static_cast<unsigned short>(target.port))}, target, shown,
                      std::move(opened));
  }
  m_resolver.async_resolve(
      target.host, std::to_string(target.port), tcp::resolver::numeric_service,
      [this, &target, shown, opened = std::move(opened)](const asio::error_code& error,
                                                         const tcp::resolver::results_type& results) mutable {
        if (error) {
          return opened(UpstreamFailure{ApiOutcome::upstream_unreachable,
                                        "cannot resolve " + target.host + ": " + error.message(), true});
        }
        std::vector<tcp::endpoint> endpoints;
        for (const auto& entry : results) endpoints.push_back(entry.endpoint());
        connect_to(endpoints, target, shown, std::move(opened));
      });
}

void UpstreamConnection::connect_to(const std::vector<tcp::endpoint>& endpoints, const Destination& target,
                                    const std::string& shown, Opened opened) {
  asio::async_connect(
      socket(), endpoints,
      [this, &target, shown, opened = std::move(opened)](const asio::error_code& error, const tcp::endpoint&) mutable {
        if (error) {
          return opened(UpstreamFailure{ApiOutcome::upstream_unreachable,
                                        "cannot connect to " + shown + ": " + error.message(), true});
        }
        relay::set_close_on_exec(socket().native_handle());
        asio::error_code ignored;
        socket().set_option(tcp::no_delay(true), ignored);
        if (m_tls) return handshake(target, shown, std::move(opened));
        opened(std::nullopt);
      });
}

void UpstreamConnection::handshake(const Destination& target, const std::string& shown, Opened opened) {
  SSL* ssl = m_tls->native_handle();
  if (target.address) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), target.host.c_str());
  } else {
    // SSL_set_tlsext_host_name, without the macro's C cast.
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(target.host.c_str()));
    SSL_set1_host(ssl, target.host.c_str());
  }
  m_tls->set_verify_mode(asio::ssl::verify_peer);
  m_tls->async_handshake(
      asio::ssl::stream_base::client, [this, shown, opened = std::move(opened)](const asio::error_code& error) {
        if (!error) return opened(std::nullopt);
        const long verified = SSL_get_verify_result(m_tls->native_handle());
        if (verified != X509_V_OK) {
          return opened(UpstreamFailure{
              ApiOutcome::upstream_certificate,
              "the certificate of " + shown + " did not verify: " + X509_verify_cert_error_string(verified), false});
        }
        opened(UpstreamFailure{ApiOutcome::upstream_failed, "TLS with " + shown + " failed: " + error.message(), true});
      });
}

}  // namespace mullet::net
