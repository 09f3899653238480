#include "server/http/TlsContext.h"

#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <optional>
#include <string>

#include "server/auth/AccessPolicy.h"

namespace ortserve::http {

namespace net = boost::asio;

Result<std::unique_ptr<net::ssl::context>> MakeTlsContext(const HttpServerOptions::Tls& tls) {
  auto cert = auth::ReadPemFile(tls.server_cert_file, auth::PemKind::kCertificate, "--http-server-cert");
  if (!cert.ok()) return cert.status();
  auto key = auth::ReadPemFile(tls.server_key_file, auth::PemKind::kPrivateKey, "--http-server-key");
  if (!key.ok()) return key.status();
  std::optional<std::string> root;
  if (!tls.root_cert_file.empty()) {
    auto pem = auth::ReadPemFile(tls.root_cert_file, auth::PemKind::kCertificate, "--http-root-cert");
    if (!pem.ok()) return pem.status();
    root = std::move(pem).value();
  }
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                   net::ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain(net::buffer(*cert), ec);
  if (ec) return InvalidArgument("--http-server-cert file '" + tls.server_cert_file + "': " + ec.message());
  ctx->use_private_key(net::buffer(*key), net::ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgument("--http-server-key file '" + tls.server_key_file +
                           "' does not match the certificate in --http-server-cert file '" + tls.server_cert_file +
                           "'" + (ec ? ": " + ec.message() : std::string()));
  }
  if (root) {
    ctx->add_certificate_authority(net::buffer(*root), ec);
    if (ec) return InvalidArgument("--http-root-cert file '" + tls.root_cert_file + "': " + ec.message());
    ctx->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace ortserve::http
