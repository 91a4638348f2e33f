// The server's TLS context: TLS 1.2 minimum with 1.3 enabled, forward-secret AEAD ciphers
// only, optional client-certificate verification. Published as a snapshot so that a rotated
// certificate serves new handshakes while connections already open keep theirs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "trainenv/core/text/result.hpp"
#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/snapshot.hpp"

namespace trainenv::server {

struct tls_files {
  std::string cert;
  std::string key;
  std::string client_ca;  // empty: no client certificate asked for
  // With client_ca, the names a client certificate must carry, one of them: a DNS SAN, or its
  // common name when it has no DNS SAN (OpenSSL's host check; wildcards in the certificate do not
  // match). Empty: any certificate the CA signed.
  std::vector<std::string> client_names = {};
};

// A loaded, checked context and what operators want to know about its certificate.
struct tls_bundle {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::string serial;          // hex
  std::int64_t not_after = 0;  // Unix seconds
};

// Loads the files and checks them: the key matches the certificate, which is valid now.
[[nodiscard]] core::result<tls_bundle> load_server_tls(const tls_files& files);

using tls_snapshot = snapshot<tls_bundle>;

// Rotation: the certificate's directory (a Secret volume swaps a ..data link) as a reload
// source. A pair that does not load is refused and the old one kept; it is tried again at every
// poll, since a hand edit may land one file first and a certificate may not be valid yet.
[[nodiscard]] reload_source certificate_source(tls_files files, tls_snapshot& target);

}  // namespace trainenv::server
