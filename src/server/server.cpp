#include "trainenv/server/server.hpp"

#include "trainenv/server/tls_stream.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <functional>
#include <list>
#include <mutex>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
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

// The method and target of a request whose header could not be parsed whole (431, 400), read
// from its request line in `buffer` so that the router can name the path it was for.
http_request request_line(const beast::flat_buffer& buffer) {
  const auto* data = static_cast<const char*>(buffer.data().data());
  std::string_view line(data, buffer.size());
  line = line.substr(0, line.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  http_request header;
  const auto space = line.find(' ');
  if (space == std::string_view::npos) return header;
  header.method_string(line.substr(0, space));
  auto rest = line.substr(space + 1);
  header.target(rest.substr(0, rest.find(' ')));
  return header;
}

// The header as far as the parser got: the parsed one once its request line was read, else
// the request line in the buffer.
http_request header_so_far(const http::request_parser<http::string_body>& parser,
                           const beast::flat_buffer& buffer) {
  if (!parser.get().target().empty()) return http_request(parser.get().base());
  return request_line(buffer);
}

// Moves into `buffer` what the stream has already received, without waiting: the rest of a
// request that arrived in one TLS record. A plain connection (metrics, probes) waits for it.
// An error is returned for whoever would stop at it; the stream meets it again on its next read.
boost::system::error_code take_received(tls_stream& stream, beast::flat_buffer& buffer) {
  constexpr std::size_t step = std::size_t{16} * 1024;
  boost::system::error_code ec;
  while (const auto n = stream.read_available(buffer.prepare(step), ec)) buffer.commit(n);
  return ec;
}
boost::system::error_code take_received(beast::tcp_stream& /*stream*/,
                                        beast::flat_buffer& /*buffer*/) {
  return {};
}

// Feeds the parser what `buffer` holds, without reading: the common case of a request that is
// already whole needs no asynchronous read. need_more is not an error here.
boost::system::error_code parse_received(http::request_parser<http::string_body>& parser,
                                         beast::flat_buffer& buffer) {
  boost::system::error_code ec;
  while (buffer.size() != 0 && !parser.is_done()) {
    const auto used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) return {};
    if (ec || used == 0) return ec;
  }
  return ec;
}

// The response's bytes, header and body, as http::async_write would send them: written here in
// one piece, they leave in one TLS write instead of a chain of Beast's write operations.
std::string wire_bytes(http_response& response) {
  http::serializer<false, http::string_body> serializer(response);
  std::string out;
  boost::system::error_code ec;
  while (!ec && !serializer.is_done()) {
    serializer.next(ec, [&](boost::system::error_code& /*ec*/, const auto& buffers) {
      for (const auto b : beast::buffers_range_ref(buffers))
        out.append(static_cast<const char*>(b.data()), b.size());
      serializer.consume(beast::buffer_bytes(buffers));
    });
  }
  return out;
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

// Waits, idle, for the next request to begin. A TLS connection waits for ciphertext without a
// plaintext buffer and takes the request whole into `buffer`; a record that carries no request
// (a KeyUpdate) leaves it idle, unless the server is closing. A plain connection (metrics,
// probes) reads the request's start.
asio::awaitable<boost::system::error_code> wait_for_request(tls_stream& stream,
                                                            beast::flat_buffer& buffer,
                                                            const session_registry& registry) {
  for (;;) {
    auto [ec, n] = co_await stream.async_wait_readable(use_nothrow);
    if (ec) co_return ec;
    const auto failed = take_received(stream, buffer);
    // A request (or part of one) first: an error after it is met again by the next read.
    if (buffer.size() != 0 || stream.mid_record()) co_return boost::system::error_code{};
    if (failed) co_return failed;
    // close_idle may have found this connection idle after its wait had already completed.
    if (registry.closing()) co_return asio::error::operation_aborted;
  }
}
asio::awaitable<boost::system::error_code> wait_for_request(beast::tcp_stream& stream,
                                                            beast::flat_buffer& buffer,
                                                            const session_registry& /*registry*/) {
  auto [ec, n] = co_await stream.async_read_some(buffer.prepare(1024), use_nothrow);
  buffer.commit(n);
  co_return ec;
}

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
    const auto bytes = wire_bytes(response);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(bytes), use_nothrow);
    co_return !ec;
  };
  // Answer, then close: used when the rest of the request will not be read.
  const auto close_with = [&](http_response response) -> asio::awaitable<void> {
    response.keep_alive(false);
    if (co_await send(response)) co_await linger(stream, limits);
  };
  // The router's answer to a request that could not be read whole.
  const auto refusal_for =
      [&](const boost::system::error_code& ec,
          const http::request_parser<http::string_body>& parser) -> std::optional<http_response> {
    const auto header = header_so_far(parser, buffer);
    if (ec == http::error::header_limit) return routes.refuse(header, refusal::header_too_large);
    if (ec == http::error::body_limit) return routes.refuse(header, refusal::body_too_large);
    if (is_parse_error(ec)) return routes.refuse(header, refusal::malformed, ec.message());
    return std::nullopt;  // the connection failed or timed out: nobody to answer
  };

  // The request's header (and what of its body came with it) from what has arrived when that
  // is whole, as it usually is; else read on.
  const auto read_header = [&](http::request_parser<http::string_body>& parser)
      -> asio::awaitable<boost::system::error_code> {
    take_received(stream, buffer);
    if (auto ec = parse_received(parser, buffer); ec || parser.is_header_done()) co_return ec;
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_nothrow);
    co_return ec;
  };

  for (;;) {
    if (buffer.size() == 0) {
      // Idle between requests: the long timeout applies until the next request's first byte.
      if (registry->closing()) co_return;
      socket.expires_after(limits.idle_timeout);
      registration.handle().idle = true;
      // An idle connection keeps no request buffer: the apiserver holds many of them open.
      buffer.shrink_to_fit();
      const auto ec = co_await wait_for_request(stream, buffer, *registry);
      registration.handle().idle = false;
      if (ec) co_return;
    }
    socket.expires_after(limits.read_timeout);
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes);
    // A Content-Length over the limit is refused here, unread.
    if (const auto ec = co_await read_header(parser); ec) {
      if (auto refused = refusal_for(ec, parser)) co_await close_with(std::move(*refused));
      co_return;
    }

    // 404, 405 and 415 are known from the header; the body is still read (within the limits)
    // so that the connection stays usable, except where the client waits for 100-continue.
    if (!parser.is_done()) {
      const bool expects_continue =
          beast::iequals(parser.get()[http::field::expect], "100-continue");
      if (expects_continue && routes.check_header(parser.get())) {
        auto refused = co_await routes.handle(parser.get());
        co_await close_with(std::move(refused));
        co_return;
      }
      if (expects_continue) {
        http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
        socket.expires_after(limits.write_timeout);
        if (auto [ec, n] = co_await http::async_write(stream, go_on, use_nothrow); ec) co_return;
        socket.expires_after(limits.read_timeout);
      }
      if (auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow); ec) {
        if (auto refused = refusal_for(ec, parser)) co_await close_with(std::move(*refused));
        co_return;
      }
    }

    auto response = co_await routes.handle(parser.get());
    // While closing, each connection ends after the answer it is giving.
    if (registry->closing()) response.keep_alive(false);
    if (!co_await send(response) || !response.keep_alive()) co_return;
  }
}

// Counts a connection open for as long as its session runs.
class connection_guard {
 public:
  explicit connection_guard(metrics& m) : m_(m) { m_.add(gauge::open_connections, 1); }
  ~connection_guard() { m_.add(gauge::open_connections, -1); }
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

session_threads::session_threads(asio::io_context& main, unsigned threads) : all_{&main} {
  for (unsigned i = 1; i < threads; ++i) {
    // Concurrency hint 1: one thread runs it (others still post to it, under its lock).
    own_.push_back(std::make_unique<asio::io_context>(1));
    all_.push_back(own_.back().get());
  }
  for (auto& context : own_) {
    threads_.emplace_back([&context = *context] {
      const auto work = asio::make_work_guard(context);  // waits for connections while it has none
      context.run();
    });
  }
}

session_threads::~session_threads() {
  stop();
}

void session_threads::stop() {
  for (auto& context : own_) context->stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

struct server::impl {
  impl(asio::io_context& ioc, session_limits limits, server_state& state,
       const session_threads* sessions)
      : ioc(ioc),
        limits(limits),
        state(state),
        admission_routes(state, true, limits.max_body_bytes),
        health_routes(state, false, limits.max_body_bytes),
        tls_acceptor(ioc),
        plain_acceptor(ioc) {
    if (sessions != nullptr) session_contexts = sessions->contexts();
    if (session_contexts.empty()) session_contexts.push_back(&ioc);
  }

  // The io_context of the next admission connection, in turn. Only the accept loop asks.
  asio::io_context& next_session_context() {
    auto& context = *session_contexts[next_session % session_contexts.size()];
    ++next_session;
    return context;
  }

  // `socket` (accepted on `ioc`) on a strand of its own on `context`. Accepted on `ioc` and then
  // handed over: an accept pending on `ioc` never holds a socket of another io_context, which may
  // be gone before `ioc` is. Empty if the hand-over failed (the connection is then closed).
  std::optional<tcp::socket> hand_over(tcp::socket socket, asio::io_context& context,
                                       const tcp& protocol) {
    if (&context == &ioc) return socket;
    const auto failed = [](const boost::system::error_code& ec) {
      spdlog::debug("a connection could not be handed to its thread: {}", ec.message());
      return std::nullopt;
    };
    boost::system::error_code ec;
    const auto handle = socket.release(ec);
    if (ec) return failed(ec);  // `socket` still holds it, and closes it
    tcp::socket moved(asio::make_strand(context));
    if (moved.assign(protocol, handle, ec); ec) {
      ::close(handle);
      return failed(ec);
    }
    return moved;
  }

  // `start_session` receives each accepted socket, already on its own strand of the io_context
  // `context_for_next()` gives.
  template <class ContextForNext, class StartSession>
  asio::awaitable<void> accept(tcp::acceptor& acceptor, ContextForNext context_for_next,
                               StartSession start_session) {
    asio::steady_timer backoff(ioc);
    const auto protocol = acceptor.local_endpoint().protocol();
    for (;;) {
      auto [ec, accepted] = co_await acceptor.async_accept(asio::make_strand(ioc), use_nothrow);
      tcp::socket socket(std::move(accepted));
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
      if (limits.max_connections != 0 && state.metrics.value(gauge::open_connections) >=
                                             static_cast<double>(limits.max_connections)) {
        state.metrics.count(counter::refused_connections);
        socket.close(ec);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      if (auto handed = hand_over(std::move(socket), context_for_next(), protocol))
        start_session(std::move(*handed));
    }
  }

  asio::io_context& ioc;
  std::vector<asio::io_context*> session_contexts;  // admission connections, in turn
  std::size_t next_session = 0;
  session_limits limits;
  server_state& state;
  router admission_routes;
  router health_routes;
  tcp::acceptor tls_acceptor;
  tcp::acceptor plain_acceptor;
  std::shared_ptr<session_registry> sessions = std::make_shared<session_registry>();

  // The drain's timers; their handlers run on one strand, so `drained` needs no lock.
  asio::strand<asio::io_context::executor_type> drain_strand = asio::make_strand(ioc);
  asio::steady_timer drain_timer{drain_strand};
  asio::steady_timer deadline_timer{drain_strand};
  asio::steady_timer idle_check{drain_strand};
  std::function<void(bool)> drained;  // runs once, then is emptied

  void finish_drain(bool in_time) {
    if (!drained) return;
    auto done = std::move(drained);
    drained = nullptr;
    drain_timer.cancel();
    deadline_timer.cancel();
    idle_check.cancel();
    done(in_time);
  }

  void stop_when_idle() {
    if (state.metrics.value(gauge::open_connections) == 0) {
      finish_drain(true);
      return;
    }
    idle_check.expires_after(std::chrono::milliseconds(20));
    idle_check.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) stop_when_idle();
    });
  }
};

server::server(asio::io_context& ioc, session_limits limits, server_state& state,
               const session_threads* sessions)
    : impl_(std::make_unique<impl>(ioc, limits, state, sessions)) {}

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
                 self->accept(
                     self->tls_acceptor,
                     [self]() -> asio::io_context& { return self->next_session_context(); },
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
                 self->accept(
                     self->plain_acceptor, [self]() -> asio::io_context& { return self->ioc; },
                     [self](tcp::socket socket) {
                       auto executor = socket.get_executor();
                       asio::co_spawn(
                           executor,
                           plain_session(std::move(socket), self->limits, self->health_routes,
                                         self->state.metrics, self->sessions),
                           asio::detached);
                     }),
                 asio::detached);
  return endpoints{impl_->tls_acceptor.local_endpoint(), impl_->plain_acceptor.local_endpoint()};
}

void server::drain(std::chrono::milliseconds delay, std::chrono::milliseconds deadline,
                   std::function<void(bool in_time)> drained) {
  impl_->state.set_ready(false);
  asio::post(impl_->drain_strand, [this, delay, deadline, drained = std::move(drained)]() mutable {
    auto* self = impl_.get();
    if (self->drained) return;  // already draining
    self->drained = std::move(drained);
    self->deadline_timer.expires_after(deadline);
    self->deadline_timer.async_wait([self](const boost::system::error_code& ec) {
      if (ec) return;
      spdlog::warn("shutdown deadline reached with {} connection(s) open",
                   self->state.metrics.value(gauge::open_connections));
      self->finish_drain(false);
    });
    self->drain_timer.expires_after(delay);
    self->drain_timer.async_wait([this, self](const boost::system::error_code& ec) {
      if (ec) return;
      stop_accepting();
      close_connections();
      self->stop_when_idle();
    });
  });
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
