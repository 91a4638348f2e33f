// The real server in-process on port 0, and a verifying TLS client, for integration tests.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <catch2/catch.hpp>

#include "../test_support.hpp"
#include "test_certs.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/server/api_access.hpp"
#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/server.hpp"
#include "trainenv/server/state.hpp"
#include "trainenv/server/tls.hpp"

namespace trainenv::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// The test certificates (certs/mint.sh), minted once per process into a directory of its own
// and removed when the process exits.
inline const std::string& cert_dir() {
  struct minted {
    std::string path;
    ~minted() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const minted dir{[] {
    auto path = std::filesystem::temp_directory_path() /
                ("trainenv-test-certs-" + std::to_string(::getpid()));
    const auto command = std::string(TRAINENV_SOURCE_DIR) + "/certs/mint.sh --force " +
                         path.string() + " >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("certs/mint.sh failed");
    return path.string();
  }()};
  return dir.path;
}

inline server::session_limits test_limits() {
  inputs::serve_config config;
  auto limits = server::limits_from(config);
  limits.linger_timeout = 500ms;
  return limits;
}

struct server_options {
  server::session_limits limits = test_limits();
  std::string policy_dir = TRAINENV_POLICIES_DIR;
  server::tls_files tls = {cert_dir() + "/tls.crt", cert_dir() + "/tls.key", ""};
  bool rotate_certificates = false;
  // Owner lookups through this API server (none: no API access), with this budget.
  std::optional<inputs::kube_credentials> api = std::nullopt;
  std::chrono::milliseconds lookup_timeout{2000};
  std::optional<std::size_t> owner_cache_bytes = std::nullopt;  // its bound, if not the default
  int io_threads = 2;
  std::string cluster_domain = "cluster.local";              // --cluster-domain
  bool previews = false;                                     // --preview-listen, with `api`
  std::optional<std::size_t> request_memory = std::nullopt;  // --max-request-memory
};

struct running_server {
  explicit running_server(server::session_limits limits = test_limits(),
                          const std::string& policy_dir = TRAINENV_POLICIES_DIR)
      : running_server(server_options{limits, policy_dir}) {}

  explicit running_server(const server_options& options) {
    const auto& limits = options.limits;
    const auto& policy_dir = options.policy_dir;
    auto loaded = inputs::load_policy_dir(policy_dir);
    REQUIRE(loaded.errors.empty());
    state.policies.publish(loaded.policies);
    reloader = server::policy_reloader(ioc, state, policy_dir, 2s, loaded.fingerprint);
    reloader->start();
    auto bundle = server::load_server_tls(options.tls);
    REQUIRE(bundle.ok());
    state.publish_certificate(*bundle);
    if (options.rotate_certificates) {
      tls_reloader = server::certificate_reloader(ioc, state, options.tls, 2s);
      tls_reloader->start();
    }
    state.owners.budget = options.lookup_timeout;
    state.decide_options.cluster_domain = options.cluster_domain;
    if (options.request_memory) {
      state.memory = std::make_unique<server::memory_budget>(
          server::memory_budget::options{.bytes = *options.request_memory});
    }
    if (options.api) {
      server::api_access_options api;
      api.lookup_budget = options.lookup_timeout;
      if (options.owner_cache_bytes) api.cache_bytes = *options.owner_cache_bytes;
      api.previews = options.previews;
      REQUIRE(server::connect_api(ioc, state, *options.api, api).ok());
    }
    // As `trainenv serve` lays out its threads: `ioc` on one, each further one with an
    // io_context of its own for admission connections.
    sessions = std::make_unique<server::session_threads>(ioc, options.io_threads);
    server = std::make_unique<server::server>(ioc, limits, state, sessions.get());
    auto bound = server->start(
        {"127.0.0.1", 0}, {"127.0.0.1", 0},
        options.previews ? inputs::endpoint_spec{"127.0.0.1", 0} : inputs::endpoint_spec{});
    REQUIRE(bound.ok());
    endpoints = *bound;
    state.set_ready(true);
    threads.emplace_back([this] { ioc.run(); });
  }
  ~running_server() {
    reloader.reset();
    tls_reloader.reset();
    ioc.stop();
    for (auto& t : threads) t.join();
    sessions->stop();
    // The API clients' pooled connections are sockets of `ioc`: gone before it is.
    server::disconnect_api(state);
  }
  [[nodiscard]] unsigned short tls_port() const { return endpoints.tls.port(); }
  [[nodiscard]] unsigned short plain_port() const { return endpoints.plain.port(); }
  [[nodiscard]] unsigned short preview_port() const {
    return endpoints.preview ? endpoints.preview->port() : 0;
  }

  server::server_state state;
  asio::io_context ioc;
  std::unique_ptr<server::file_reloader> reloader;
  std::unique_ptr<server::file_reloader> tls_reloader;
  std::unique_ptr<server::session_threads> sessions;  // before the server: it outlives it
  std::unique_ptr<server::server> server;
  server::server::endpoints endpoints;
  std::vector<std::thread> threads;
};

using response = http::response<http::string_body>;

inline http::request<http::string_body> make_request(
    http::verb verb, const std::string& target, std::string body = {},
    const std::string& content_type = "application/json") {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  if (!content_type.empty()) req.set(http::field::content_type, content_type);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

// A verifying TLS client (the CA minted above, host name localhost), every operation bounded.
struct client_options {
  int max_version = 0;             // e.g. TLS1_2_VERSION; 0: the library's highest
  std::string extra_ca_file = {};  // trusted besides the test CA
  std::string cert_pem = {};       // a client certificate to present, with its key
  std::string key_pem = {};
};

class tls_client {
 public:
  explicit tls_client(unsigned short port, int max_version = 0)
      : tls_client(port, client_options{max_version}) {}

  tls_client(unsigned short port, const client_options& o) : ctx_(ssl::context::tls_client) {
    ctx_.load_verify_file(cert_dir() + "/ca.crt");
    if (!o.extra_ca_file.empty()) ctx_.load_verify_file(o.extra_ca_file);
    ctx_.set_verify_mode(ssl::verify_peer);
    if (o.max_version != 0) {
      SSL_CTX_set_max_proto_version(ctx_.native_handle(), o.max_version);
      // OpenSSL 3 refuses TLS < 1.2 on its own at the default security level; lower it so a
      // refusal can only come from the server.
      SSL_CTX_set_security_level(ctx_.native_handle(), 0);
      SSL_CTX_set_cipher_list(ctx_.native_handle(), "DEFAULT:@SECLEVEL=0");
    }
    if (!o.cert_pem.empty()) {
      ctx_.use_certificate(asio::buffer(o.cert_pem), ssl::context::pem);
      ctx_.use_private_key(asio::buffer(o.key_pem), ssl::context::pem);
    }
    stream_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc_, ctx_);
    SSL_set_tlsext_host_name(stream_->native_handle(), "localhost");
    stream_->set_verify_callback(ssl::host_name_verification("localhost"));
    beast::get_lowest_layer(*stream_).expires_after(5s);
    beast::get_lowest_layer(*stream_).connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }

  // The serial of the certificate the server presented, in hex.
  [[nodiscard]] std::string server_serial() const {
    X509* cert = SSL_get1_peer_certificate(stream_->native_handle());
    if (cert == nullptr) return {};
    std::string out = serial_hex(cert);
    X509_free(cert);
    return out;
  }

  boost::system::error_code handshake() {
    boost::system::error_code ec;
    stream_->handshake(ssl::stream_base::client, ec);
    return ec;
  }

  response send(http::request<http::string_body> req) {
    beast::get_lowest_layer(*stream_).expires_after(5s);
    http::write(*stream_, req);
    return receive();
  }

  response receive() {
    response res;
    http::read(*stream_, buffer_, res);
    return res;
  }

  void write_raw(std::string_view bytes) { asio::write(*stream_, asio::buffer(bytes)); }

  // A TLS 1.3 KeyUpdate asking for the server's, sent at once: a record with no request in it.
  // (The handshake call sends it: OpenSSL writes a pending KeyUpdate from SSL_do_handshake.)
  boost::system::error_code key_update() {
    if (SSL_key_update(stream_->native_handle(), SSL_KEY_UPDATE_REQUESTED) != 1)
      return asio::error::invalid_argument;
    return handshake();
  }

  // Sends close_notify and waits for the server's (the connection stays open meanwhile); how long
  // that took, or nullopt if the server did not answer within `limit`.
  std::optional<std::chrono::milliseconds> tls_shutdown(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    beast::get_lowest_layer(*stream_).expires_after(limit);
    boost::system::error_code ec;
    stream_->shutdown(ec);
    if (ec == beast::error::timeout) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }

  // Writes `bytes` straight to the TCP connection, past TLS (a record the server cannot decrypt).
  void write_tcp(std::string_view bytes) {
    asio::write(beast::get_lowest_layer(*stream_).socket(), asio::buffer(bytes));
  }

  // How long until the server closes the TCP connection, dropping whatever it sends meanwhile
  // (an alert); nullopt if it is still open after `limit`. Polls the socket itself: Beast's
  // deadline bounds only asynchronous reads.
  std::optional<std::chrono::milliseconds> time_until_tcp_closed(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    const int fd = beast::get_lowest_layer(*stream_).socket().native_handle();
    std::array<char, 4096> sink{};
    for (;;) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      if (elapsed >= limit) return std::nullopt;
      pollfd readable{fd, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>((limit - elapsed).count())) <= 0) continue;
      const auto r = ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
    }
  }

  // Half-closes the TCP connection (no TLS close_notify): the server reads end of stream.
  void shutdown_send() {
    boost::system::error_code ignored;
    beast::get_lowest_layer(*stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // How long until the server closes the connection; nullopt if it is still open after `limit`.
  std::optional<std::chrono::milliseconds> time_until_closed(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    beast::get_lowest_layer(*stream_).expires_after(limit);
    char byte;
    boost::system::error_code ec;
    stream_->read_some(asio::buffer(&byte, 1), ec);
    if (!ec || ec == beast::error::timeout) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }

  [[nodiscard]] std::string protocol() const { return SSL_get_version(stream_->native_handle()); }

 private:
  asio::io_context ioc_;
  ssl::context ctx_;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> stream_;
  beast::flat_buffer buffer_;
};

}  // namespace trainenv::test
