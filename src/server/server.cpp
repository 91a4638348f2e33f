#include "trainenv/server/server.hpp"

#include "trainenv/server/tls_stream.hpp"

#include <openssl/ssl.h>

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
using clock_type = std::chrono::steady_clock;

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
// already whole needs no asynchronous read. need_more is not an error here. `header_only`: stops
// once the header is whole, so that its body is read only once the request is planned.
boost::system::error_code parse_received(http::request_parser<http::string_body>& parser,
                                         beast::flat_buffer& buffer, bool header_only = false) {
  boost::system::error_code ec;
  while (buffer.size() != 0 && !parser.is_done() && !(header_only && parser.is_header_done())) {
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
  // From the drain's start: every answer says Connection: close.
  void start_draining() { draining_.store(true); }
  [[nodiscard]] bool draining() const { return draining_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::list<entry> sessions_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> draining_{false};
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

// What the admission log says of a connection: the peer, and whether it presented a
// certificate (the API server does only when configured to: docs/security.md).
struct connection_facts {
  std::string peer;
  bool client_certificate = false;
};

std::string peer_of(const beast::tcp_stream& stream) {
  boost::system::error_code ec;
  const auto endpoint = stream.socket().remote_endpoint(ec);
  if (ec) return "-";
  const auto address = endpoint.address();
  return (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) + ":" +
         std::to_string(endpoint.port());
}

// One connection's requests, served until it closes, errs, times out or the server closes. The
// steps of each request, top to bottom in serve(): wait for it (the first within the read
// timeout, later ones within the idle timeout), read its header, plan it (the route's refusal,
// the caller, the body limit and its share of the memory budget), take that share, read the
// body, answer.
template <class Stream>
class session {
 public:
  session(Stream& stream, const session_limits& limits, const router& routes,
          const std::shared_ptr<session_registry>& registry, memory_budget& memory,
          const connection_facts& facts)
      : stream_(stream),
        socket_(beast::get_lowest_layer(stream)),
        limits_(limits),
        routes_(routes),
        registry_(registry),
        memory_(memory),
        facts_(facts) {}

  asio::awaitable<void> serve() {
    registered_session registration(registry_, socket_);
    for (bool first = true;; first = false) {
      held_.release();
      if (buffer_.size() == 0) {
        // Idle between requests: the long timeout applies until the next request's first
        // byte, but a connection that has sent nothing yet gets only the read timeout (a silent
        // client holds a slot of its listener's cap no longer than a slow one).
        if (registry_->closing()) co_return;
        socket_.expires_after(first ? limits_.read_timeout : limits_.idle_timeout);
        registration.handle().idle = true;
        // An idle connection keeps no request buffer: the apiserver holds many of them open.
        buffer_.shrink_to_fit();
        const auto ec = co_await wait_for_request(stream_, buffer_, *registry_);
        registration.handle().idle = false;
        if (ec) co_return;
      }
      if (!co_await serve_one()) co_return;
    }
  }

 private:
  using parser_type = http::request_parser<http::string_body>;
  static constexpr std::size_t chunk_step = std::size_t{64} * 1024;

  // One request; false when the connection ends after it (with the last answer, if any: each
  // step that ends the connection leaves it in closing_, sent here, then the connection lingers).
  asio::awaitable<bool> serve_one() {
    const bool goes_on = co_await serve_request();
    if (closing_) {
      closing_->keep_alive(false);
      if (co_await send(*closing_)) co_await linger(stream_, limits_);
      closing_.reset();
    }
    co_return goes_on;
  }

  asio::awaitable<bool> serve_request() {
    socket_.expires_after(limits_.read_timeout);
    const auto read_deadline = clock_type::now() + limits_.read_timeout;
    parser_type parser;
    parser.header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser.body_limit(std::max(limits_.max_body_bytes, limits_.max_preview_body_bytes));
    // A Content-Length over the largest limit is refused here, unread.
    if (const auto ec = co_await read_header(parser); ec) {
      refuse_unread(ec, parser);
      co_return false;
    }
    auto plan = co_await routes_.plan(parser.get());
    socket_.expires_at(read_deadline);
    plan.peer = facts_.peer;
    plan.client_certificate = facts_.client_certificate;
    if (plan.refusal) co_return co_await answer_refusal(parser, plan);
    if (!co_await read_body(parser, plan, read_deadline)) co_return false;
    auto response = co_await routes_.handle(parser.get(), &plan);
    co_return co_await answer(response);
  }

  // Sends `response`, saying Connection: close while the server drains; false when the
  // connection ends after it.
  asio::awaitable<bool> answer(http_response& response) {
    if (registry_->draining() || registry_->closing()) response.keep_alive(false);
    co_return co_await send(response) && response.keep_alive();
  }

  asio::awaitable<bool> send(http_response& response) {
    socket_.expires_after(limits_.write_timeout);
    const auto bytes = wire_bytes(response);
    auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(bytes), use_nothrow);
    co_return !ec;
  }

  // The router's answer to a request that could not be read whole, to close with, if anyone is
  // there to read it (not when the connection failed or timed out).
  void refuse_unread(const boost::system::error_code& ec, const parser_type& parser) {
    const auto header = header_so_far(parser, buffer_);
    if (ec == http::error::header_limit) {
      closing_ = routes_.refuse(header, refusal::header_too_large);
    } else if (ec == http::error::body_limit) {
      closing_ = routes_.refuse(header, refusal::body_too_large);
    } else if (is_parse_error(ec)) {
      closing_ = routes_.refuse(header, refusal::malformed, ec.message());
    }
  }

  // The request's header (and what of its body came with it stays in the buffer) from what has
  // arrived when that is whole, as it usually is; else read on.
  asio::awaitable<boost::system::error_code> read_header(parser_type& parser) {
    take_received(stream_, buffer_);
    if (auto ec = parse_received(parser, buffer_, true); ec || parser.is_header_done())
      co_return ec;
    auto [ec, n] = co_await http::async_read_header(stream_, buffer_, parser, use_nothrow);
    co_return ec;
  }

  // 404, 405, 415, 401 and the like are known before the body: a small one is read and dropped
  // so that the connection stays usable; a large, unannounced or awaited one is not.
  asio::awaitable<bool> answer_refusal(parser_type& parser, request_plan& plan) {
    const auto announced = parser.content_length();
    const bool awaited = beast::iequals(parser.get()[http::field::expect], "100-continue");
    if (!parser.is_done() &&
        (awaited || !announced || *announced > limits_.max_refused_body_bytes)) {
      auto response = co_await routes_.handle(parser.get(), &plan);
      closing_ = std::move(response);
      co_return false;
    }
    parser.body_limit(limits_.max_refused_body_bytes);
    if (!parser.is_done()) {
      if (auto [ec, n] = co_await http::async_read(stream_, buffer_, parser, use_nothrow); ec) {
        refuse_unread(ec, parser);
        co_return false;
      }
    }
    auto response = co_await routes_.handle(parser.get(), &plan);
    co_return co_await answer(response);
  }

  // The body, within its share of the memory budget: a length announced is taken at once (and
  // refused over the route's limit, unread), a chunked body a step at a time as it comes. False:
  // the connection ends (with 413 or 503 in closing_, or no answer).
  asio::awaitable<bool> read_body(parser_type& parser, const request_plan& plan,
                                  clock_type::time_point deadline) {
    parser.body_limit(plan.body_limit);
    const auto announced = parser.content_length();
    if (announced && *announced > plan.body_limit) {
      closing_ = routes_.refuse(parser.get(), refusal::body_too_large);
      co_return false;
    }
    if (!co_await take_share(parser.get(),
                             announced ? static_cast<std::size_t>(*announced) : chunk_step, plan,
                             deadline))
      co_return false;
    if (parser.is_done()) co_return true;
    if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
      http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
      socket_.expires_after(limits_.write_timeout);
      if (auto [ec, n] = co_await http::async_write(stream_, go_on, use_nothrow); ec)
        co_return false;
      socket_.expires_at(deadline);
    }
    // What came with the header first, then the rest as it comes.
    for (auto ec = parse_received(parser, buffer_); !parser.is_done();) {
      std::size_t n = 0;
      if (!ec)
        std::tie(ec, n) = co_await http::async_read_some(stream_, buffer_, parser, use_nothrow);
      if (ec) {
        refuse_unread(ec, parser);
        co_return false;
      }
      const auto have = parser.get().body().size() + buffer_.size();
      if (!announced && !co_await take_share(parser.get(), have + chunk_step, plan, deadline))
        co_return false;
    }
    co_return true;
  }

  // The request's share for `bytes` of body, waited for until `deadline`; none: 503 (in
  // closing_) and the connection closes, the body unread.
  asio::awaitable<bool> take_share(const http_request& header, std::size_t bytes,
                                   const request_plan& plan, clock_type::time_point deadline) {
    const auto wanted = std::max(plan.share_floor, bytes * plan.share_per_byte);
    if (wanted <= held_.bytes()) co_return true;
    auto more = co_await memory_.take(wanted - held_.bytes(), deadline);
    if (!more) {
      closing_ = routes_.refuse(header, refusal::over_budget);
      co_return false;
    }
    held_.absorb(std::move(*more));
    co_return true;
  }

  Stream& stream_;
  beast::tcp_stream& socket_;
  const session_limits& limits_;
  const router& routes_;
  const std::shared_ptr<session_registry>& registry_;
  memory_budget& memory_;
  const connection_facts& facts_;
  beast::flat_buffer buffer_;
  memory_budget::share held_;  // the request's share of the memory budget, while it is served
  std::optional<http_response> closing_;  // the answer to close the connection with
};

template <class Stream>
asio::awaitable<void> serve_requests(Stream& stream, const session_limits& limits,
                                     const router& routes,
                                     const std::shared_ptr<session_registry>& registry,
                                     memory_budget& memory, const connection_facts& facts) {
  session<Stream> s(stream, limits, routes, registry, memory, facts);
  co_await s.serve();
}

// Counts a connection open for as long as its session runs: in the metrics (every listener's)
// and in its listener's own count, which its cap is checked against.
class connection_guard {
 public:
  connection_guard(metrics& m, std::shared_ptr<std::atomic<std::size_t>> listener_count)
      : m_(m), listener_count_(std::move(listener_count)) {
    m_.add(gauge::open_connections, 1);
  }
  ~connection_guard() {
    m_.add(gauge::open_connections, -1);
    listener_count_->fetch_sub(1);
  }
  connection_guard(const connection_guard&) = delete;
  connection_guard& operator=(const connection_guard&) = delete;

 private:
  metrics& m_;
  std::shared_ptr<std::atomic<std::size_t>> listener_count_;  // taken by the accept loop
};

asio::awaitable<void> tls_session(tcp::socket socket, std::shared_ptr<const tls_bundle> tls,
                                  session_limits limits, const router& routes, metrics& m,
                                  std::shared_ptr<session_registry> registry,
                                  std::shared_ptr<std::atomic<std::size_t>> listener_count,
                                  memory_budget& memory) {
  const connection_guard counted(m, std::move(listener_count));
  tls_stream stream(beast::tcp_stream(std::move(socket)), *tls->context);
  connection_facts facts{peer_of(beast::get_lowest_layer(stream)), false};
  beast::get_lowest_layer(stream).expires_after(limits.handshake_timeout);
  if (auto [ec, n] = co_await stream.async_handshake(use_nothrow); ec) {
    spdlog::debug("TLS handshake from {} failed: {}", facts.peer, ec.message());
    co_return;
  }
  facts.client_certificate = SSL_get0_peer_certificate(stream.native_handle()) != nullptr;
  co_await serve_requests(stream, limits, routes, registry, memory, facts);
  // close_notify, without waiting for the peer's (tls_stream never does).
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  co_await stream.async_shutdown(use_nothrow);
}

asio::awaitable<void> plain_session(tcp::socket socket, session_limits limits, const router& routes,
                                    metrics& m, std::shared_ptr<session_registry> registry,
                                    std::shared_ptr<std::atomic<std::size_t>> listener_count,
                                    memory_budget& memory) {
  const connection_guard counted(m, std::move(listener_count));
  beast::tcp_stream stream(std::move(socket));
  const connection_facts facts{peer_of(stream), false};
  co_await serve_requests(stream, limits, routes, registry, memory, facts);
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
  limits.max_preview_body_bytes = config.max_preview_body_bytes;
  limits.max_header_bytes = config.max_header_bytes;
  limits.handshake_timeout = config.handshake_timeout;
  limits.read_timeout = config.read_timeout;
  limits.idle_timeout = config.idle_timeout;
  limits.write_timeout = config.read_timeout;
  limits.max_connections = config.max_connections;
  limits.max_preview_connections = config.max_preview_connections;
  limits.max_metrics_connections = config.max_metrics_connections;
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

// One port: its acceptor, what it serves, its connection cap and how many it has open.
struct listener {
  listener(asio::io_context& ioc, server_state& state, listener_kind kind, body_limits bodies,
           std::size_t cap)
      : acceptor(ioc), routes(state, kind, bodies), cap(cap) {}
  tcp::acceptor acceptor;
  router routes;
  std::size_t cap;  // 0: none
  // Shared with its sessions, whose frames may end after the server.
  std::shared_ptr<std::atomic<std::size_t>> open = std::make_shared<std::atomic<std::size_t>>(0);
};

struct server::impl {
  impl(asio::io_context& ioc, session_limits limits, server_state& state,
       const session_threads* sessions)
      : ioc(ioc),
        limits(limits),
        state(state),
        admission(ioc, state, listener_kind::admission, bodies(), limits.max_connections),
        previews(ioc, state, listener_kind::previews, bodies(), limits.max_preview_connections),
        metrics_port(ioc, state, listener_kind::metrics, bodies(), limits.max_metrics_connections) {
    if (sessions != nullptr) session_contexts = sessions->contexts();
    if (session_contexts.empty()) session_contexts.push_back(&ioc);
  }

  [[nodiscard]] body_limits bodies() const {
    return {limits.max_body_bytes, limits.max_preview_body_bytes};
  }

  // The io_context of the next TLS connection, in turn. Only the accept loops ask.
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
  // `context_for_next()` gives, once it is counted in its listener's `open`.
  template <class ContextForNext, class StartSession>
  asio::awaitable<void> accept(listener& port, ContextForNext context_for_next,
                               StartSession start_session) {
    asio::steady_timer backoff(ioc);
    auto& acceptor = port.acceptor;
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
      // Beyond its listener's cap, close at once: the client sees a closed connection and
      // retries another replica; connections already open, and the other ports, are untouched.
      if (port.cap != 0 && port.open->load() >= port.cap) {
        state.metrics.count(counter::refused_connections);
        socket.close(ec);
        continue;
      }
      port.open->fetch_add(1);
      socket.set_option(tcp::no_delay(true), ec);
      if (auto handed = hand_over(std::move(socket), context_for_next(), protocol)) {
        start_session(std::move(*handed));
      } else {
        port.open->fetch_sub(1);
      }
    }
  }

  // Accepts TLS connections on `port` (the admission port, or the previews').
  void accept_tls(listener& port) {
    asio::co_spawn(ioc,
                   accept(
                       port, [this]() -> asio::io_context& { return next_session_context(); },
                       [this, &port](tcp::socket socket) {
                         auto executor = socket.get_executor();
                         asio::co_spawn(executor,
                                        tls_session(std::move(socket), state.certificate.read(),
                                                    limits, port.routes, state.metrics, sessions,
                                                    port.open, *state.memory),
                                        asio::detached);
                       }),
                   asio::detached);
  }

  asio::io_context& ioc;
  std::vector<asio::io_context*> session_contexts;  // TLS connections, in turn
  std::size_t next_session = 0;
  session_limits limits;
  server_state& state;
  listener admission;
  listener previews;  // its acceptor open only with --preview-listen
  listener metrics_port;
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
                                              const inputs::endpoint_spec& plain_listen,
                                              const inputs::endpoint_spec& preview_listen) {
  auto tls_acceptor = bind(impl_->ioc, tls_listen, "--listen");
  if (!tls_acceptor) return std::move(tls_acceptor).take_error();
  auto plain_acceptor = bind(impl_->ioc, plain_listen, "--metrics-listen");
  if (!plain_acceptor) return std::move(plain_acceptor).take_error();
  std::optional<tcp::acceptor> preview_acceptor;
  if (!preview_listen.host.empty()) {
    auto bound = bind(impl_->ioc, preview_listen, "--preview-listen");
    if (!bound) return std::move(bound).take_error();
    preview_acceptor.emplace(std::move(*bound));
  }
  auto* self = impl_.get();
  self->admission.acceptor = std::move(*tls_acceptor);
  self->metrics_port.acceptor = std::move(*plain_acceptor);
  endpoints out{self->admission.acceptor.local_endpoint(),
                self->metrics_port.acceptor.local_endpoint(), std::nullopt};

  self->accept_tls(self->admission);
  if (preview_acceptor) {
    self->previews.acceptor = std::move(*preview_acceptor);
    out.preview = self->previews.acceptor.local_endpoint();
    self->accept_tls(self->previews);
  }
  asio::co_spawn(self->ioc,
                 self->accept(
                     self->metrics_port, [self]() -> asio::io_context& { return self->ioc; },
                     [self](tcp::socket socket) {
                       auto executor = socket.get_executor();
                       asio::co_spawn(
                           executor,
                           plain_session(std::move(socket), self->limits, self->metrics_port.routes,
                                         self->state.metrics, self->sessions,
                                         self->metrics_port.open, *self->state.memory),
                           asio::detached);
                     }),
                 asio::detached);
  return out;
}

void server::drain(std::chrono::milliseconds delay, std::chrono::milliseconds deadline,
                   std::function<void(bool in_time)> drained) {
  impl_->state.set_ready(false);
  impl_->sessions->start_draining();
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
    for (auto* port : {&self->admission, &self->previews, &self->metrics_port})
      port->acceptor.close(ignored);
  });
}

}  // namespace trainenv::server
