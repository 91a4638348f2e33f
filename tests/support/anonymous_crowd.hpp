// Anonymous clients hammering every port and route of a server but /mutate, until stopped: the
// load of issue 37's "starving the real admissions" (tests/server/test_budgets.cpp asserts
// under it, bench/admission_under_load.cpp measures under it). Each client keeps to one kind:
// POST /preview on the admission port (a pod of a Job that does not exist, another each time: on
// a server that read the cluster for it, one GET each), POST /preview on the previews' port
// without a token or with a token no one has (a TokenReview each), GET /metrics on the plain
// port, GET of a path that does not exist. Every request is bounded in time; no Catch2 here.
#pragma once

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

#include "indexed_jobs.hpp"

// GCC 12 warns that asio's awaitable frame is freed by a mismatched operator delete at the end
// of client() (the frame's own new and delete are a pair: a false positive, as in
// src/server/router.cpp); whether it fires depends on what else the batch inlines.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace trainenv::test {

class anonymous_crowd {
 public:
  struct ports {
    unsigned short admission = 0;
    unsigned short metrics = 0;
    unsigned short previews = 0;  // 0: none (those clients go to the admission port)
  };

  // `clients` clients, trusting `ca_file` for the server's certificate (host name localhost).
  anonymous_crowd(ports p, int clients, const std::string& ca_file)
      : ports_(p), ctx_(boost::asio::ssl::context::tls_client) {
    ctx_.load_verify_file(ca_file);
    ctx_.set_verify_mode(boost::asio::ssl::verify_peer);
    for (int i = 0; i < clients; ++i) boost::asio::co_spawn(ioc_, client(i), boost::asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~anonymous_crowd() { stop(); }
  anonymous_crowd(const anonymous_crowd&) = delete;
  anonymous_crowd& operator=(const anonymous_crowd&) = delete;

  // Each client ends after the request it is making (at most its 5 s bound).
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] long requests() const { return requests_.load(); }

 private:
  using tcp = boost::asio::ip::tcp;
  static constexpr auto nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

  boost::asio::awaitable<void> client(int kind) {
    namespace http = boost::beast::http;
    namespace beast = boost::beast;
    std::mt19937 rng(static_cast<unsigned>(kind));
    const tcp::endpoint loopback(boost::asio::ip::make_address("127.0.0.1"), 0);
    while (!stop_) {
      const int k = kind % 6;
      const bool plain = k == 4;
      const bool to_previews = (k == 2 || k == 3) && ports_.previews != 0;
      const auto port = plain ? ports_.metrics : to_previews ? ports_.previews : ports_.admission;
      std::string target = "/preview";
      // A pod of a Job that does not exist (its uid and all).
      std::string body = job_pod("gone-" + std::to_string(rng()), 0).dump();
      std::string token;
      if (k == 3) token = "bogus-" + std::to_string(rng());
      if (k == 4) {
        target = "/metrics";
        body.clear();
      }
      if (k == 5) {
        target = "/nope";
        body.clear();
      }
      http::request<http::string_body> req{body.empty() ? http::verb::get : http::verb::post,
                                           target, 11};
      req.set(http::field::host, "localhost");
      if (!body.empty()) req.set(http::field::content_type, "application/json");
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
      req.body() = std::move(body);
      req.prepare_payload();
      const tcp::endpoint to(loopback.address(), port);
      beast::flat_buffer buffer;
      http::response<http::string_body> res;
      if (plain) {
        beast::tcp_stream s(ioc_);
        s.expires_after(std::chrono::seconds(5));
        auto [ec] = co_await s.async_connect(to, nothrow);
        if (!ec) std::tie(ec, std::ignore) = co_await http::async_write(s, req, nothrow);
        if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(s, buffer, res, nothrow);
      } else {
        beast::ssl_stream<beast::tcp_stream> s(ioc_, ctx_);
        SSL_set_tlsext_host_name(s.native_handle(), "localhost");
        s.set_verify_callback(boost::asio::ssl::host_name_verification("localhost"));
        beast::get_lowest_layer(s).expires_after(std::chrono::seconds(5));
        auto [ec] = co_await beast::get_lowest_layer(s).async_connect(to, nothrow);
        if (!ec)
          std::tie(ec) = co_await s.async_handshake(boost::asio::ssl::stream_base::client, nothrow);
        if (!ec) std::tie(ec, std::ignore) = co_await http::async_write(s, req, nothrow);
        if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(s, buffer, res, nothrow);
      }
      ++requests_;
    }
  }

  ports ports_;
  boost::asio::ssl::context ctx_;
  boost::asio::io_context ioc_;
  std::atomic<bool> stop_{false};
  std::atomic<long> requests_{0};
  std::thread thread_;
};

}  // namespace trainenv::test

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
