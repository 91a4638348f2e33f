// The listeners: HTTPS for admission (and health), plain HTTP for health. One coroutine per
// connection on its own strand; every handshake, read and write is bounded by a timeout.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/config.hpp"
#include "trainenv/server/router.hpp"
#include "trainenv/server/state.hpp"

namespace trainenv::server {

struct session_limits {
  std::size_t max_body_bytes = 0;          // /mutate
  std::size_t max_preview_body_bytes = 0;  // /preview, /preview/job
  std::size_t max_header_bytes = 0;
  std::chrono::milliseconds handshake_timeout{};
  std::chrono::milliseconds read_timeout{};
  std::chrono::milliseconds idle_timeout{};
  std::chrono::milliseconds write_timeout{};
  // After refusing a body (413 and the like), how long to keep reading and discarding what the
  // client still sends, so that it sees the answer instead of a connection reset.
  std::chrono::milliseconds linger_timeout{2000};
  // Open connections per listener; more are closed at once. 0: no limit.
  std::size_t max_connections = 0;  // the admission port
  std::size_t max_preview_connections = 0;
  std::size_t max_metrics_connections = 0;
  // A header-refused request's body (404, 405, 415, 401) is read and dropped up to this size so
  // that the connection stays usable; past it the connection is closed after the answer.
  std::size_t max_refused_body_bytes = std::size_t{16} * 1024;
};

[[nodiscard]] session_limits limits_from(const inputs::serve_config& config);

// The threads that serve admission connections: the main io_context, run by the caller's thread,
// and one more io_context per further thread, each run by a thread of its own. Each connection
// lives on one of them (round robin), so a request is read, decided and answered on one thread,
// with its own epoll: one io_context run by several threads hands ready sockets from the thread
// that polled to another through a shared queue and a futex wake-up: at 8 connections, 95
// against 73 us of CPU per small request (docs/performance.md).
class session_threads {
 public:
  // `threads` in all, the caller's (running `main`) included; the others start now.
  session_threads(boost::asio::io_context& main, unsigned threads);
  // Stops and joins the threads it started; their io_contexts go with it.
  ~session_threads();
  session_threads(const session_threads&) = delete;
  session_threads& operator=(const session_threads&) = delete;

  // `main` first.
  [[nodiscard]] const std::vector<boost::asio::io_context*>& contexts() const { return all_; }
  // Stops the threads it started and waits for them; the caller stops `main`.
  void stop();

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> own_;
  std::vector<boost::asio::io_context*> all_;
  std::vector<std::thread> threads_;
};

class server {
 public:
  struct endpoints {
    boost::asio::ip::tcp::endpoint tls;
    boost::asio::ip::tcp::endpoint plain;
    std::optional<boost::asio::ip::tcp::endpoint> preview;  // with --preview-listen
  };

  // Serves with the policies and certificate `state` publishes, and counts into its metrics.
  // Listeners, health connections and the drain live on `ioc`; admission connections on the
  // io_contexts of `sessions` (its contexts() must outlive the server), else on `ioc` too.
  server(boost::asio::io_context& ioc, session_limits limits, server_state& state,
         const session_threads* sessions = nullptr);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and starts accepting; a bind failure is a start-up error. `preview_listen` with no
  // host: no previews' port.
  [[nodiscard]] core::result<endpoints> start(const inputs::endpoint_spec& tls_listen,
                                              const inputs::endpoint_spec& plain_listen,
                                              const inputs::endpoint_spec& preview_listen = {});
  // The SIGTERM drain: /readyz answers 503 at once so that endpoints drop this pod, and every
  // answer from now on says Connection: close, so that keep-alive clients leave after their next
  // request instead of having a connection closed under one. Serving goes on for `delay`, then
  // new connections are refused, connections idle since before the drain began (which no answer
  // could tell) are closed, and busy ones close after the answer they are giving. `drained` runs
  // once, on the io_context, with true when no connection is left, or with false at `deadline`
  // (counted from now). A second call while draining does nothing.
  void drain(std::chrono::milliseconds delay, std::chrono::milliseconds deadline,
             std::function<void(bool in_time)> drained);
  // Stops accepting new connections; connections already open run to their end.
  void stop_accepting();
  // Closes idle keep-alive connections now, and every other one after the answer it is giving.
  void close_connections();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace trainenv::server
