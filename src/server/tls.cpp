#include "trainenv/server/tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

namespace trainenv::server {
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

// Why `path` cannot be opened for reading, in the system's words ("Permission denied"), or
// nothing. OpenSSL's own message for a file it cannot open names neither the file nor, in most
// builds, the reason.
std::optional<std::string> unreadable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string(std::strerror(errno));
  ::close(fd);
  return std::nullopt;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::int64_t unix_seconds(const ASN1_TIME* time) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(time, &tm) != 1) return 0;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string serial_hex(const X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  if (bn == nullptr) return "?";
  char* hex = BN_bn2hex(bn);
  std::string out = hex != nullptr ? hex : "?";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

}  // namespace

core::result<tls_bundle> load_server_tls(const tls_files& files) {
  // tls_server negotiates the highest version both sides have; tlsv12 would pin 1.2 only.
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use | ssl::context::no_compression);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // An idle keep-alive connection then holds no 2 x 16 KiB record buffers: the apiserver keeps
  // many connections open, and most sit idle between pod creations.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  // No session resumption: the apiserver's webhook client keeps connections alive rather than
  // resuming sessions, so tickets and a session cache would cost each handshake and each open
  // connection for nothing.
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (SSL_CTX_set_cipher_list(native, tls12_ciphers) != 1)
    return core::error{"cannot set the TLS cipher list"};

  const std::pair<const char*, const std::string*> inputs[] = {
      {"--tls-cert ", &files.cert}, {"--tls-key ", &files.key}, {"--client-ca ", &files.client_ca}};
  for (const auto& [flag, path] : inputs) {
    if (path->empty()) continue;
    if (auto why = unreadable(*path)) return core::error{flag + *path + ": cannot read: " + *why};
  }
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(files.cert, ec);
  if (ec)
    return core::error{"--tls-cert " + files.cert +
                       ": cannot load the certificate: " + openssl_reason(ec)};
  const std::string mismatch =
      "--tls-key " + files.key + " does not match the certificate in " + files.cert;
  ctx->use_private_key_file(files.key, ssl::context::pem, ec);
  if (ec) {
    const auto reason = openssl_reason(ec);
    if (reason.find("mismatch") != std::string::npos) return core::error{mismatch};
    return core::error{"--tls-key " + files.key + ": cannot load the private key: " + reason};
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return core::error{mismatch};
  }
  const X509* cert = SSL_CTX_get0_certificate(native);
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
    return core::error{"--tls-cert " + files.cert + ": the certificate has expired"};
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return core::error{"--tls-cert " + files.cert + ": the certificate is not valid yet"};
  }
  if (!files.client_ca.empty()) {
    ctx->load_verify_file(files.client_ca, ec);
    if (ec)
      return core::error{"--client-ca " + files.client_ca + ": cannot load: " + openssl_reason(ec)};
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    // Any leaf of a shared CA would get in (a kubelet's, another webhook's): the names say whose.
    X509_VERIFY_PARAM* param = SSL_CTX_get0_param(native);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_WILDCARDS);
    for (const auto& name : files.client_names) {
      if (X509_VERIFY_PARAM_add1_host(param, name.c_str(), name.size()) != 1)
        return core::error{"--client-names: cannot use " + core::quote(name)};
    }
  }
  return tls_bundle{ctx, serial_hex(cert), unix_seconds(X509_get0_notAfter(cert))};
}

namespace {

std::size_t files_fingerprint(const tls_files& files) {
  std::hash<std::string> hash;
  return hash(read_all(files.cert)) * 31 + hash(read_all(files.key)) * 7 +
         (files.client_ca.empty() ? 0 : hash(read_all(files.client_ca)));
}

std::string directory_of(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

reload_source certificate_source(tls_files files, tls_snapshot& target) {
  reload_source source;
  source.reloaded = "certificate reloaded";
  source.refused = "certificate reload failed, keeping the current certificate";
  source.dir = directory_of(files.cert);
  source.fingerprint = [files] { return files_fingerprint(files); };
  source.load = [files = std::move(files), &target]() -> core::result<std::string> {
    auto loaded = load_server_tls(files);
    if (!loaded) return std::move(loaded).take_error();
    auto summary = "serial " + loaded->serial + " valid until " + std::to_string(loaded->not_after);
    target.publish(std::make_shared<const tls_bundle>(std::move(*loaded)));
    return summary;
  };
  source.retry_refused = true;
  return source;
}

}  // namespace trainenv::server
