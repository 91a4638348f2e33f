#include "trainenv/server/server.hpp"

#include "trainenv/server/tls_stream.hpp"

#include <spdlog/spdlog.h>
#include <list>
#include <mutex>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace trainenv::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

bool is_parse_error(const boost::system::error_code& ec) {
  return ec.category() == beast::http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

// Reads and drops whatever the client still sends, for a bounded time and at most as many bytes
// as a body may have, so that closing with unread data does not reset the connection before the
// client has read our answer. A client that keeps sending past that is cut off: a refused body
// is not read in full, however fast it comes.
template <class Stream>
asio::awaitable<void> linger(Stream& stream, const session_limits& limits) {
  beast::get_lowest_layer(stream).expires_after(limits.linger_timeout);
  std::array<char, 16 * 1024> sink{};
  std::size_t left = limits.max_body_bytes;
  for (;;) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_nothrow);
    if (ec || n >= left) co_return;
    left -= n;
  }
}

http_response too_large(const session_limits& limits) {
  return error_response(http::status::payload_too_large,
                        "request body exceeds " + std::to_string(limits.max_body_bytes) + " bytes",
                        11, false);
}

// What shutdown needs to reach one connection: whether it waits between requests, and its
// socket to cancel that wait. Touched only on the session's strand.
struct session_handle {
  beast::tcp_stream* socket = nullptr;  // null once the session has ended
  bool idle = false;
};

// The open sessions, so that shutdown can close idle keep-alive connections at once and let
// busy ones finish their request. Locked only when a connection opens or closes.
class session_registry {
 public:
  using entry = std::pair<asio::any_io_executor, std::shared_ptr<session_handle>>;

  std::list<entry>::iterator add(asio::any_io_executor executor,
                                 std::shared_ptr<session_handle> handle) {
    std::lock_guard lock(mutex_);
    return sessions_.emplace(sessions_.end(), std::move(executor), std::move(handle));
  }
  void remove(std::list<entry>::iterator it) {
    std::lock_guard lock(mutex_);
    sessions_.erase(it);
  }
  // Marks the server closing and cancels every idle wait, each on its own strand.
  void close_idle() {
    closing_.store(true);
    std::lock_guard lock(mutex_);
    for (auto& [executor, handle] : sessions_) {
      asio::post(executor, [handle = handle] {
        boost::system::error_code ignored;
        if (handle->socket != nullptr && handle->idle) handle->socket->socket().cancel(ignored);
      });
    }
  }
  [[nodiscard]] bool closing() const { return closing_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::list<entry> sessions_;
  std::atomic<bool> closing_{false};
};

// Registers a session for as long as it runs. Sessions share ownership of the registry: their
// frames may be destroyed with the io_context, after the server.
class registered_session {
 public:
  registered_session(std::shared_ptr<session_registry> registry, beast::tcp_stream& socket)
      : registry_(std::move(registry)), handle_(std::make_shared<session_handle>()) {
    handle_->socket = &socket;
    it_ = registry_->add(socket.get_executor(), handle_);
  }
  ~registered_session() {
    handle_->socket = nullptr;
    registry_->remove(it_);
  }
  registered_session(const registered_session&) = delete;
  registered_session& operator=(const registered_session&) = delete;
  session_handle& handle() { return *handle_; }

 private:
  std::shared_ptr<session_registry> registry_;
  std::shared_ptr<session_handle> handle_;
  std::list<session_registry::entry>::iterator it_;
};

// Serves requests on one connection until it closes, errs, times out or the server closes.
template <class Stream>
asio::awaitable<void> serve_requests(Stream& stream, const session_limits& limits,
                                     const router& routes,
                                     const std::shared_ptr<session_registry>& registry) {
  auto& socket = beast::get_lowest_layer(stream);
  registered_session registration(registry, socket);
  beast::flat_buffer buffer;
  const auto send = [&](http_response& response) -> asio::awaitable<bool> {
    socket.expires_after(limits.write_timeout);
    auto [ec, n] = co_await http::async_write(stream, response, use_nothrow);
    co_return !ec;
  };
  // Answer, then close: used when the rest of the request will not be read.
  const auto refuse = [&](http_response response) -> asio::awaitable<void> {
    routes.count_refused(http_request{});
    response.keep_alive(false);
    if (co_await send(response)) co_await linger(stream, limits);
  };

  for (;;) {
    if (buffer.size() == 0) {
      // Idle between requests: the long timeout applies until the next request's first byte.
      if (registry->closing()) co_return;
      socket.expires_after(limits.idle_timeout);
      registration.handle().idle = true;
      // An idle connection keeps no request buffer: the apiserver holds many of them open.
      buffer.shrink_to_fit();
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(1024), use_nothrow);
      registration.handle().idle = false;
      if (ec) co_return;
      buffer.commit(n);
    }
    socket.expires_after(limits.read_timeout);
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes);
    if (auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_nothrow); ec) {
      if (ec == http::error::header_limit) {
        co_await refuse(error_response(http::status::request_header_fields_too_large,
                                       "request header fields too large", 11, false));
      } else if (ec == http::error::body_limit) {  // Content-Length over the limit: refuse unread
        co_await refuse(too_large(limits));
      } else if (is_parse_error(ec)) {
        co_await refuse(error_response(http::status::bad_request,
                                       "malformed HTTP request: " + ec.message(), 11, false));
      }
      co_return;
    }

    // 404, 405 and 415 are known from the header; the body is still read (within the limits)
    // so that the connection stays usable, except where the client waits for 100-continue.
    auto early = routes.check_header(parser.get());
    if (!parser.is_done()) {
      const bool expects_continue =
          beast::iequals(parser.get()[http::field::expect], "100-continue");
      if (early && expects_continue) {
        co_await refuse(std::move(*early));
        co_return;
      }
      if (expects_continue) {
        http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
        socket.expires_after(limits.write_timeout);
        if (auto [ec, n] = co_await http::async_write(stream, go_on, use_nothrow); ec) co_return;
        socket.expires_after(limits.read_timeout);
      }
      if (auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow); ec) {
        if (ec == http::error::body_limit) {
          co_await refuse(too_large(limits));
        } else if (is_parse_error(ec)) {
          co_await refuse(error_response(http::status::bad_request,
                                         "malformed HTTP request: " + ec.message(), 11, false));
        }
        co_return;
      }
    }

    if (early) routes.count_refused(parser.get());
    auto response = early ? std::move(*early) : routes.handle(parser.get());
    // While closing, each connection ends after the answer it is giving.
    if (registry->closing()) response.keep_alive(false);
    if (!co_await send(response) || !response.keep_alive()) co_return;
  }
}

// Counts a connection open for as long as its session runs.
class connection_guard {
 public:
  explicit connection_guard(metrics& m) : m_(m) {
    m_.open_connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~connection_guard() { m_.open_connections.fetch_sub(1, std::memory_order_relaxed); }
  connection_guard(const connection_guard&) = delete;
  connection_guard& operator=(const connection_guard&) = delete;

 private:
  metrics& m_;
};

asio::awaitable<void> tls_session(tcp::socket socket, std::shared_ptr<const tls_bundle> tls,
                                  session_limits limits, const router& routes, metrics& m,
                                  std::shared_ptr<session_registry> registry) {
  const connection_guard counted(m);
  tls_stream stream(beast::tcp_stream(std::move(socket)), *tls->context);
  beast::get_lowest_layer(stream).expires_after(limits.handshake_timeout);
  if (auto [ec, n] = co_await stream.async_handshake(use_nothrow); ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
    co_return;
  }
  co_await serve_requests(stream, limits, routes, registry);
  // close_notify, without waiting for the peer's (tls_stream never does).
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  co_await stream.async_shutdown(use_nothrow);
}

asio::awaitable<void> plain_session(tcp::socket socket, session_limits limits, const router& routes,
                                    metrics& m, std::shared_ptr<session_registry> registry) {
  const connection_guard counted(m);
  beast::tcp_stream stream(std::move(socket));
  co_await serve_requests(stream, limits, routes, registry);
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

core::result<tcp::acceptor> bind(asio::io_context& ioc, const inputs::endpoint_spec& spec,
                                 const char* what) {
  boost::system::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(spec.host, ec), spec.port);
  tcp::acceptor acceptor(ioc);
  const auto failed = [&](const char* step) {
    return core::error{std::string("cannot ") + step + " " + what + " address " + spec.host + ":" +
                       std::to_string(spec.port) + ": " + ec.message()};
  };
  if (acceptor.open(endpoint.protocol(), ec); ec) return failed("open");
  if (acceptor.set_option(asio::socket_base::reuse_address(true), ec); ec)
    return failed("configure");
  if (acceptor.bind(endpoint, ec); ec) return failed("bind");
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec)
    return failed("listen on");
  return acceptor;
}

}  // namespace

session_limits limits_from(const inputs::serve_config& config) {
  session_limits limits;
  limits.max_body_bytes = config.max_body_bytes;
  limits.max_header_bytes = config.max_header_bytes;
  limits.handshake_timeout = config.handshake_timeout;
  limits.read_timeout = config.read_timeout;
  limits.idle_timeout = config.idle_timeout;
  limits.write_timeout = config.read_timeout;
  limits.max_connections = config.max_connections;
  return limits;
}

struct server::impl {
  impl(asio::io_context& ioc, session_limits limits, server_state& state)
      : ioc(ioc),
        limits(limits),
        state(state),
        admission_routes(state, true),
        health_routes(state, false),
        tls_acceptor(ioc),
        plain_acceptor(ioc) {}

  // `start_session` receives each accepted socket, already on its own strand.
  template <class StartSession>
  asio::awaitable<void> accept(tcp::acceptor& acceptor, StartSession start_session) {
    asio::steady_timer backoff(ioc);
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), use_nothrow);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of descriptors and the like: pause rather than spin.
        spdlog::warn("accept failed: {}", ec.message());
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(use_nothrow);
        continue;
      }
      // Beyond the limit, close at once: the client sees a closed connection and retries another
      // replica; connections already open are untouched.
      if (limits.max_connections != 0 &&
          state.metrics.open_connections.load(std::memory_order_relaxed) >=
              static_cast<std::int64_t>(limits.max_connections)) {
        state.metrics.refused_connections.fetch_add(1, std::memory_order_relaxed);
        socket.close(ec);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      start_session(std::move(socket));
    }
  }

  asio::io_context& ioc;
  session_limits limits;
  server_state& state;
  router admission_routes;
  router health_routes;
  tcp::acceptor tls_acceptor;
  tcp::acceptor plain_acceptor;
  std::shared_ptr<session_registry> sessions = std::make_shared<session_registry>();
};

server::server(asio::io_context& ioc, session_limits limits, server_state& state)
    : impl_(std::make_unique<impl>(ioc, limits, state)) {}

server::~server() = default;

core::result<server::endpoints> server::start(const inputs::endpoint_spec& tls_listen,
                                              const inputs::endpoint_spec& plain_listen) {
  auto tls_acceptor = bind(impl_->ioc, tls_listen, "--listen");
  if (!tls_acceptor) return std::move(tls_acceptor).take_error();
  auto plain_acceptor = bind(impl_->ioc, plain_listen, "--metrics-listen");
  if (!plain_acceptor) return std::move(plain_acceptor).take_error();
  impl_->tls_acceptor = std::move(*tls_acceptor);
  impl_->plain_acceptor = std::move(*plain_acceptor);

  auto* self = impl_.get();
  asio::co_spawn(impl_->ioc,
                 self->accept(self->tls_acceptor,
                              [self](tcp::socket socket) {
                                auto executor = socket.get_executor();
                                asio::co_spawn(executor,
                                               tls_session(std::move(socket), self->state.certificate.read(),
                                                           self->limits, self->admission_routes,
                                                           self->state.metrics, self->sessions),
                                               asio::detached);
                              }),
                 asio::detached);
  asio::co_spawn(impl_->ioc,
                 self->accept(self->plain_acceptor,
                              [self](tcp::socket socket) {
                                auto executor = socket.get_executor();
                                asio::co_spawn(executor,
                                               plain_session(std::move(socket), self->limits,
                                                             self->health_routes,
                                                             self->state.metrics, self->sessions),
                                               asio::detached);
                              }),
                 asio::detached);
  return endpoints{impl_->tls_acceptor.local_endpoint(), impl_->plain_acceptor.local_endpoint()};
}

void server::close_connections() {
  impl_->sessions->close_idle();
}

void server::stop_accepting() {
  asio::post(impl_->ioc, [self = impl_.get()] {
    boost::system::error_code ignored;
    self->tls_acceptor.close(ignored);
    self->plain_acceptor.close(ignored);
  });
}

}  // namespace trainenv::server
