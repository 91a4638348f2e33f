// The server's TLS context: TLS 1.2 minimum with 1.3 enabled, forward-secret AEAD ciphers
// only, optional client-certificate verification. Held behind an atomic pointer so a new
// certificate can replace it without touching connections already open.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "trainenv/core/result.hpp"

namespace trainenv::app {

struct tls_files {
  std::string cert;
  std::string key;
  std::string client_ca;  // empty: no client certificate asked for
};

// Loads and checks the files (the key must match the certificate).
[[nodiscard]] core::result<std::shared_ptr<boost::asio::ssl::context>> make_server_context(
    const tls_files& files);

class tls_store {
 public:
  [[nodiscard]] std::shared_ptr<boost::asio::ssl::context> current() const {
    return current_.load();
  }
  void replace(std::shared_ptr<boost::asio::ssl::context> context) {
    current_.store(std::move(context));
  }

 private:
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> current_;
};

}  // namespace trainenv::app
