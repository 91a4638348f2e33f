// Clients that misbehave on purpose, for the adversarial and growth tests: raw TCP bytes on the
// TLS port, many concurrent TLS connections, a real ClientHello to cut in half, and the
// process measurements (RSS, descriptor limit) those tests assert on. Every operation is
// bounded in time.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "process_stats.hpp"
#include "server_harness.hpp"

namespace trainenv::test {

inline constexpr auto nothrow_awaitable = asio::as_tuple(asio::use_awaitable);

inline std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(byte(rng));
  return out;
}

// The first flight of a real TLS client for "localhost": a complete ClientHello record.
inline std::string client_hello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // wants the server's answer; the ClientHello is in `out`
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string hello(data, static_cast<std::size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// A client context that trusts the test CA and checks the host name is localhost.
inline ssl::context verifying_client_context() {
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(cert_dir() + "/ca.crt");
  ctx.set_verify_mode(ssl::verify_peer);
  return ctx;
}

inline void prepare_client_stream(beast::ssl_stream<beast::tcp_stream>& stream) {
  SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
  stream.set_verify_callback(ssl::host_name_verification("localhost"));
}

inline tcp::endpoint loopback(unsigned short port) {
  return {asio::ip::make_address("127.0.0.1"), port};
}

// A plain TCP connection for speaking raw bytes (to either port).
class raw_connection {
 public:
  explicit raw_connection(unsigned short port) : stream_(ioc_) {
    stream_.expires_after(std::chrono::seconds(5));
    stream_.connect(loopback(port));
  }

  boost::system::error_code write(std::string_view bytes) {
    boost::system::error_code ec;
    stream_.expires_after(std::chrono::seconds(5));
    asio::write(stream_, asio::buffer(bytes.data(), bytes.size()), ec);
    return ec;
  }
  void shutdown_send() {
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // Reads (keeping what arrives) until the server closes; how long that took, or nullopt if
  // the connection is still open after `limit`.
  std::optional<std::chrono::milliseconds> time_until_closed(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    stream_.expires_after(limit);
    std::array<char, 4096> chunk{};
    for (;;) {
      boost::system::error_code ec;
      const auto n = stream_.read_some(asio::buffer(chunk), ec);
      received_.append(chunk.data(), n);
      if (ec == beast::error::timeout) return std::nullopt;
      if (ec) break;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }
  [[nodiscard]] const std::string& received() const { return received_; }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  std::string received_;
};

// One HTTP/1.1 request as bytes, for pipelining and for the growth client.
inline std::string request_bytes(http::verb verb, const std::string& target,
                                 const std::string& body = {},
                                 const std::string& content_type = "application/json",
                                 bool keep_alive = true) {
  auto req = make_request(verb, target, body, content_type);
  req.keep_alive(keep_alive);
  std::ostringstream out;
  out << req;
  return out.str();
}

}  // namespace trainenv::test
