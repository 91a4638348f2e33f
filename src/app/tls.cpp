#include "trainenv/app/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace trainenv::app {
namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2 suites: ECDHE key exchange and AEAD only (Mozilla "intermediate"). TLS 1.3 suites are
// OpenSSL's defaults, all of which qualify.
constexpr const char* tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string openssl_reason(const boost::system::error_code& ec) {
  std::string out = ec.message();
  if (auto code = ERR_get_error(); code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    out = buf;
  }
  ERR_clear_error();
  return out;
}

}  // namespace

core::result<std::shared_ptr<ssl::context>> make_server_context(const tls_files& files) {
  // tls_server negotiates the highest version both sides have; tlsv12 would pin 1.2 only.
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use | ssl::context::no_compression);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, tls12_ciphers) != 1) {
    return core::error{"cannot set the TLS cipher list"};
  }

  boost::system::error_code ec;
  ctx->use_certificate_chain_file(files.cert, ec);
  if (ec)
    return core::error{"--tls-cert " + files.cert +
                       ": cannot load the certificate: " + openssl_reason(ec)};
  ctx->use_private_key_file(files.key, ssl::context::pem, ec);
  if (ec)
    return core::error{"--tls-key " + files.key +
                       ": cannot load the private key: " + openssl_reason(ec)};
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return core::error{"--tls-key " + files.key + " does not match the certificate in " +
                       files.cert};
  }
  if (!files.client_ca.empty()) {
    ctx->load_verify_file(files.client_ca, ec);
    if (ec)
      return core::error{"--client-ca " + files.client_ca + ": cannot load: " + openssl_reason(ec)};
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace trainenv::app
