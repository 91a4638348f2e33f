// The server's TLS context: TLS 1.2 minimum with 1.3 enabled, forward-secret AEAD ciphers
// only, optional client-certificate verification. Held behind an atomic pointer so that a
// rotated certificate serves new handshakes while connections already open keep theirs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "trainenv/core/result.hpp"
#include "trainenv/server/dir_watcher.hpp"

namespace trainenv::server {

struct tls_files {
  std::string cert;
  std::string key;
  std::string client_ca;  // empty: no client certificate asked for
};

// A loaded, checked context and what operators want to know about its certificate.
struct tls_bundle {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::string serial;          // hex
  std::int64_t not_after = 0;  // Unix seconds
};

// Loads the files and checks them: the key matches the certificate, which is valid now.
[[nodiscard]] core::result<tls_bundle> load_server_tls(const tls_files& files);

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

struct server_state;

// Rotation: watches the certificate's directory (a Secret volume swaps a ..data link) and
// loads the new pair when the files change; an invalid pair is refused and the old one kept.
class tls_reloader {
 public:
  tls_reloader(boost::asio::io_context& ioc, tls_files files, tls_store& store, server_state& state,
               std::chrono::milliseconds poll_interval);
  bool start() { return watcher_.start(); }
  void stop() { watcher_.stop(); }

 private:
  void reload();

  tls_files files_;
  tls_store& store_;
  server_state& state_;
  std::size_t fingerprint_;
  dir_watcher watcher_;
};

}  // namespace trainenv::server
