#include "trainenv/server/kube_client.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/server/memory_budget.hpp"

namespace trainenv::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using core::lookup_failure;

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t max_header_bytes = 64 * 1024;

#ifdef TRAINENV_VERSION
constexpr const char* user_agent = "trainenv/" TRAINENV_VERSION;
#else
constexpr const char* user_agent = "trainenv";
#endif

bool is_ip_address(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// The bearer token: a literal, or a file that is re-read when its size or mtime changes
// (checked at most every `recheck`) and whenever a 401 says the one we sent is stale. The last
// value read stays in use while the file cannot be read, as in client-go.
class token_source {
 public:
  token_source(std::string literal, std::string file, std::chrono::milliseconds recheck,
               metrics* events)
      : token_(std::move(literal)), file_(std::move(file)), recheck_(recheck), events_(events) {
    if (!file_.empty()) {
      const std::lock_guard lock(mutex_);
      read_locked(true);
    }
  }

  std::string current() {
    const std::lock_guard lock(mutex_);
    if (!file_.empty() && clock_type::now() - checked_ >= recheck_) read_locked(false);
    return token_;
  }

  std::string reload() {
    const std::lock_guard lock(mutex_);
    if (!file_.empty()) read_locked(true);
    return token_;
  }

 private:
  // A few hundred bytes from a local file (a tmpfs in a pod), at most every few seconds.
  void read_locked(bool always) {
    namespace fs = std::filesystem;
    checked_ = clock_type::now();
    std::error_code ec;
    const auto mtime = fs::last_write_time(file_, ec);
    const auto size = ec ? 0 : fs::file_size(file_, ec);
    if (ec) return;
    if (!always && mtime == mtime_ && size == size_) return;
    auto token = inputs::read_token_file(file_);
    if (!token) return;
    mtime_ = mtime;
    size_ = size;
    if (*token != token_ && events_ != nullptr) events_->count(counter::api_token_reloads);
    token_ = std::move(*token);
  }

  std::mutex mutex_;
  std::string token_;
  const std::string file_;
  const std::chrono::milliseconds recheck_;
  metrics* events_;
  clock_type::time_point checked_{};
  std::filesystem::file_time_type mtime_{};
  std::uintmax_t size_ = 0;
};

// One TLS connection to the API server. Its socket and timer live on its own strand; a lookup
// uses it only from there, and only one lookup at a time (it is taken out of the pool).
struct connection {
  connection(const asio::any_io_executor& executor, ssl::context& context)
      : stream(beast::tcp_stream(asio::make_strand(executor)), context) {}
  ssl::stream<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  clock_type::time_point idle_since{};
};

// Object paths are made of DNS-1123 names, resources and API versions. Anything else (a CR or
// LF from a hostile ownerReference could split the request) never reaches the wire.
// The core checks names before it asks for an object (core::unreadable_reference); this is the
// last line: no empty, "." or ".." segment either, which a server or a proxy would resolve.
bool is_api_path(std::string_view path) {
  if (path.empty() || path.front() != '/' || path.size() > 1024) return false;
  const bool characters_ok = std::all_of(path.begin(), path.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '/' || c == '-' || c == '.' ||
           c == '_' || c == ':' || c == '~';
  });
  if (!characters_ok) return false;
  for (std::size_t start = 1; start <= path.size();) {
    const auto end = std::min(path.find('/', start), path.size());
    const auto segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = end + 1;
  }
  return true;
}

// The Status object's message when the body is one, else the status line.
std::string failure_message(unsigned code, std::string_view reason, const std::string& body) {
  std::string out = "HTTP " + std::to_string(code);
  if (!reason.empty()) out += " " + std::string(reason);
  auto parsed = core::parse_json(body);
  if (parsed && parsed->is_object()) {
    const auto it = parsed->find("message");
    if (it != parsed->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      return out + ": " + it->get<std::string>();
    }
  }
  return out;
}

// One request to the API server: a GET of an object, or a POST of a JSON body.
struct api_call {
  http::verb method = http::verb::get;
  std::string path;
  std::string body;   // a POST's
  bool text = false;  // the answer is text (a pod's log), kept as it is rather than parsed
};

struct attempt {
  lookup_result result;
  memory_budget::share held;  // the answer's share of the memory budget, until it is kept
  nlohmann::json value;       // a 200: the object, made into result.object by the lookup's reader
  std::string text;           // a 200 to a text call: the answer's body
  bool retry_fresh = false;   // a reused connection failed before any answer: try a new one
  std::shared_ptr<connection> reusable;  // the connection, when the answer leaves it open
};

// The free slots, one token each (max_connections in all): a lookup holds one while it runs.
using slot_channel = asio::experimental::concurrent_channel<void(boost::system::error_code)>;

}  // namespace

struct kube_client::state {
  state(asio::any_io_executor executor, inputs::kube_credentials credentials,
        kube_client_options options, ssl::context context)
      : executor(std::move(executor)),
        credentials(std::move(credentials)),
        options(std::move(options)),
        tls(std::move(context)),
        tokens(this->credentials.token, this->credentials.token_file, this->options.token_recheck,
               this->options.events),
        host_header(this->credentials.authority()),
        slots(this->executor, std::max<std::size_t>(this->options.max_connections, 1)) {
    for (std::size_t i = 0; i < std::max<std::size_t>(this->options.max_connections, 1); ++i) {
      give_back(nullptr);
    }
  }

  // Takes a slot within the budget (nullopt: all were busy until `deadline`), with the idle
  // connection used last if one is young enough to reuse (nullptr: open one). A channel of
  // tokens, not a lock and a count: a slot given back while a lookup is about to wait for one is
  // still received. There are never more idle connections than free slots.
  asio::awaitable<std::optional<std::shared_ptr<connection>>> take_slot(
      clock_type::time_point deadline) {
    if (!slots.try_receive([](boost::system::error_code) {})) {
      asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
      auto [order, timer_ec, slot_ec] =
          co_await asio::experimental::make_parallel_group(timer.async_wait(asio::deferred),
                                                           slots.async_receive(asio::deferred))
              .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
      if (slot_ec) co_return std::nullopt;  // cancelled when the budget ran out
    }
    const std::lock_guard lock(idle_mutex);
    while (!idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      if (clock_type::now() - c->idle_since < options.max_idle_age) co_return c;
      const auto strand = c->stream.get_executor();  // closed where its socket lives
      asio::post(strand, [old = std::move(c)] {});
    }
    co_return std::shared_ptr<connection>();
  }

  // A new connection, its TLS peer check set: OpenSSL checks the name or address during the
  // handshake (RFC 6125); no SNI for an address (RFC 6066 §3).
  std::shared_ptr<connection> open_connection() {
    auto c = std::make_shared<connection>(executor, tls);
    const auto& name = credentials.verify_name();
    SSL* native = c->stream.native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(native);
    if (is_ip_address(name)) {
      X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      SSL_set_tlsext_host_name(native, name.c_str());
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    }
    return c;
  }

  // Gives a slot back: with `c`, kept for the next lookup; without, free to open a new one.
  void give_back(std::shared_ptr<connection> c) {
    if (c != nullptr) {
      c->idle_since = clock_type::now();
      const std::lock_guard lock(idle_mutex);
      idle.push_back(std::move(c));
    }
    (void)slots.try_send(boost::system::error_code{});  // never full: one token per slot taken
  }

  asio::awaitable<attempt> exchange(std::shared_ptr<connection> c, bool reused, api_call call,
                                    std::string token, clock_type::time_point deadline,
                                    std::chrono::milliseconds budget);

  // One call within the budget: a slot, a connection (kept alive), a retry on a fresh connection
  // when a kept one was closed under it, and (with the client's own token) one more after a 401
  // with the token read again. `token` empty: the client's own.
  asio::awaitable<attempt> call(api_call what, const std::string& caller_token,
                                std::chrono::milliseconds budget);

  asio::any_io_executor executor;
  inputs::kube_credentials credentials;
  kube_client_options options;
  ssl::context tls;
  token_source tokens;
  std::string host_header;
  slot_channel slots;
  std::mutex idle_mutex;
  std::vector<std::shared_ptr<connection>> idle;  // the last given back last
};

// One attempt, top to bottom as a coroutine: connect or reuse, handshake, write, read under one
// deadline. Its branches are the failure kinds, each one line; splitting the coroutine would
// scatter the shared deadline, so the complexity check is waived here.
// NOLINTNEXTLINE(readability-function-cognitive-complexity)
asio::awaitable<attempt> kube_client::state::exchange(std::shared_ptr<connection> c, bool reused,
                                                      api_call call, std::string token,
                                                      clock_type::time_point deadline,
                                                      std::chrono::milliseconds budget) {
  attempt out;
  const auto fail = [&](core::lookup_failure failure, std::string message) {
    out.result.failure = failure;
    out.result.message = std::move(message);
    return std::move(out);
  };
  const auto timed_out = [&](const boost::system::error_code& ec, const char* phase) {
    return ec == beast::error::timeout || clock_type::now() >= deadline
               ? std::optional(fail(
                     lookup_failure::timeout,
                     "no answer within " + std::to_string(budget.count()) + " ms (" + phase + ")"))
               : std::nullopt;
  };
  auto& socket = beast::get_lowest_layer(c->stream);
  const auto executor = c->stream.get_executor();
  const std::string where = credentials.authority();

  if (!reused) {
    std::vector<tcp::endpoint> endpoints;
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(credentials.host, ec);
    if (!ec) {
      endpoints.emplace_back(address, credentials.port);
    } else {
      // The resolver has no timer of its own: one cancels it at the deadline.
      struct resolving {
        explicit resolving(const asio::any_io_executor& e) : resolver(e) {}
        tcp::resolver resolver;
      };
      auto r = std::make_shared<resolving>(executor);
      asio::steady_timer timer(executor, deadline);
      timer.async_wait([r](boost::system::error_code e) {
        if (!e) r->resolver.cancel();
      });
      auto [rec, results] = co_await r->resolver.async_resolve(
          credentials.host, std::to_string(credentials.port), use_nothrow);
      timer.cancel();
      if (rec) {
        if (auto t = timed_out(rec, "resolving the host")) co_return std::move(*t);
        co_return fail(lookup_failure::unreachable,
                       "cannot resolve " + credentials.host + ": " + rec.message());
      }
      for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }
    socket.expires_at(deadline);
    if (auto [cec, ep] = co_await socket.async_connect(endpoints, use_nothrow); cec) {
      if (auto t = timed_out(cec, "connecting")) co_return std::move(*t);
      co_return fail(lookup_failure::unreachable,
                     "cannot connect to " + where + ": " + cec.message());
    }
    socket.socket().set_option(tcp::no_delay(true), ec);
    if (options.events != nullptr) options.events->count(counter::api_connections);
    if (auto [hec] = co_await c->stream.async_handshake(ssl::stream_base::client, use_nothrow);
        hec) {
      if (auto t = timed_out(hec, "TLS handshake")) co_return std::move(*t);
      // OpenSSL's first queued error is often a detail (an EVP failure inside a signature
      // check); the verification result says what an operator needs to know.
      const long verified = SSL_get_verify_result(c->stream.native_handle());
      co_return fail(lookup_failure::unreachable,
                     "TLS handshake with " + where + " failed: " +
                         (verified != X509_V_OK ? std::string("certificate verify failed: ") +
                                                      X509_verify_cert_error_string(verified)
                                                : hec.message()));
    }
  }
  socket.expires_at(deadline);

  http::request<http::string_body> request{call.method, credentials.base_path + call.path, 11};
  request.set(http::field::host, host_header);
  request.set(http::field::user_agent, user_agent);
  request.set(http::field::accept, call.text ? "text/plain" : "application/json");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  if (call.method == http::verb::post) {
    request.set(http::field::content_type, "application/json");
    request.body() = std::move(call.body);
    request.prepare_payload();
  }
  if (options.events != nullptr) options.events->count(counter::api_requests);
  http::response_parser<http::string_body> parser;
  parser.header_limit(max_header_bytes);
  parser.body_limit(options.max_response_bytes);
  const auto lost = [&](const boost::system::error_code& ec, const char* phase) {
    if (auto t = timed_out(ec, phase)) return std::move(*t);
    // The server may close a kept-alive connection at any time; the request was not answered,
    // and both a GET and a TokenReview change nothing, so a fresh connection may try again.
    if (reused && !parser.got_some()) out.retry_fresh = true;
    if (ec == http::error::body_limit) {
      const auto announced = parser.content_length();
      return fail(lookup_failure::too_large,
                  "answer larger than " + std::to_string(options.max_response_bytes) + " bytes" +
                      (announced ? " (" + std::to_string(*announced) + " announced)" : ""));
    }
    return fail(lookup_failure::unreachable,
                std::string(parser.got_some() ? "connection lost mid-answer from "
                                              : "connection lost before an answer from ") +
                    where + ": " + ec.message());
  };
  if (auto [ec, n] = co_await http::async_write(c->stream, request, use_nothrow); ec) {
    co_return lost(ec, "sending the request");
  }
  if (auto [ec, n] = co_await http::async_read_header(c->stream, c->buffer, parser, use_nothrow);
      ec) {
    co_return lost(ec, "waiting for the answer");
  }
  // The answer's share of the memory budget, taken before its body is read: what it announces,
  // else (chunked) a step at a time as it comes, times what parsing it costs. The connection is
  // closed when the share cannot be had: the rest of the answer is not read.
  memory_budget::share held;
  const auto share_for = [&](std::size_t body_bytes) -> asio::awaitable<bool> {
    if (options.memory == nullptr) co_return true;
    const auto wanted = body_bytes * memory_budget::built_factor;
    if (wanted <= held.bytes()) co_return true;
    auto more = co_await options.memory->take(wanted - held.bytes(), deadline);
    if (!more) co_return false;
    held.absorb(std::move(*more));
    co_return true;
  };
  const auto over_budget = [&](std::size_t body_bytes) {
    out.result.failure = lookup_failure::too_large;
    out.result.message = "an answer of " + std::to_string(body_bytes) +
                         " bytes found no room in the memory budget (--max-request-memory) " +
                         "within the lookup's budget";
    return std::move(out);
  };
  constexpr std::size_t step = std::size_t{256} * 1024;
  const auto announced = parser.content_length();
  if (!co_await share_for(announced ? static_cast<std::size_t>(*announced) : step)) {
    co_return over_budget(announced ? static_cast<std::size_t>(*announced) : step);
  }
  while (!parser.is_done()) {
    auto [ec, n] = co_await http::async_read_some(c->stream, c->buffer, parser, use_nothrow);
    if (ec) co_return lost(ec, "reading the answer");
    const auto have = parser.get().body().size() + c->buffer.size();
    if (!announced && !co_await share_for(have + step)) co_return over_budget(have + step);
  }

  auto& response = parser.get();
  const unsigned code = response.result_int();
  out.result.http_status = static_cast<int>(code);
  if (response.keep_alive()) {
    beast::get_lowest_layer(c->stream).expires_never();
    out.reusable = std::move(c);
  }
  if ((code == 200 || code == 201) && call.text) {
    out.text = std::move(response.body());
    co_return out;
  }
  if (code == 200 || code == 201) {
    auto parsed = core::parse_json(response.body());
    if (!parsed)
      co_return fail(lookup_failure::malformed, "answer is not JSON: " + parsed.message());
    if (!parsed->is_object()) co_return fail(lookup_failure::malformed, "answer is not an object");
    out.value = std::move(*parsed);
    out.held = std::move(held);
    co_return out;
  }
  const auto failure = code == 401   ? lookup_failure::unauthorized
                       : code == 403 ? lookup_failure::forbidden
                       : code == 404 ? lookup_failure::not_found
                                     : lookup_failure::server_error;
  co_return fail(failure, failure_message(code, response.reason(), response.body()));
}

core::result<kube_client> kube_client::create(asio::any_io_executor executor,
                                              inputs::kube_credentials credentials,
                                              kube_client_options options) {
  ssl::context context(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  // Idle pooled connections keep no record buffers.
  SSL_CTX_set_mode(context.native_handle(), SSL_MODE_RELEASE_BUFFERS);
  context.set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  const std::string from = " (" + credentials.source + ")";
  if (credentials.ca_pem.empty()) {
    context.set_default_verify_paths(ec);
    if (ec) return core::error{"cannot load the system's CA certificates: " + ec.message()};
  } else if (context.add_certificate_authority(asio::buffer(credentials.ca_pem), ec); ec) {
    return core::error{"the cluster CA is not a PEM certificate" + from + ": " + ec.message()};
  }
  if (!credentials.client_cert_pem.empty()) {
    if (context.use_certificate_chain(asio::buffer(credentials.client_cert_pem), ec); ec) {
      return core::error{"the client certificate is not PEM" + from + ": " + ec.message()};
    }
    if (context.use_private_key(asio::buffer(credentials.client_key_pem), ssl::context::pem, ec);
        ec) {
      // OpenSSL also refuses here a key that is not the certificate's.
      return core::error{"the client key is not a PEM key of the client certificate" + from + ": " +
                         ec.message()};
    }
  }
  if (credentials.host.empty()) return core::error{"no API server host" + from};
  return kube_client(std::make_shared<state>(std::move(executor), std::move(credentials),
                                             std::move(options), std::move(context)));
}

namespace {

// What no reading of an owner uses, and what makes most of a large object's bytes: dropped
// before the object is kept, so the cache holds only what its readings use.
void drop_unread(nlohmann::json& object) {
  object.erase("status");
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return;
  metadata->erase("managedFields");
  const auto annotations = metadata->find("annotations");
  if (annotations != metadata->end() && annotations->is_object())
    annotations->erase("kubectl.kubernetes.io/last-applied-configuration");
}

lookup_result failure_result(lookup_failure failure, std::string message) {
  lookup_result out;
  out.failure = failure;
  out.message = std::move(message);
  return out;
}

}  // namespace

asio::awaitable<attempt> kube_client::state::call(api_call what, const std::string& caller_token,
                                                  std::chrono::milliseconds budget) {
  const auto start = clock_type::now();
  const auto deadline = start + budget;
  auto slot = co_await take_slot(deadline);
  if (!slot) {
    attempt busy;
    busy.result = failure_result(lookup_failure::timeout,
                                 "all " + std::to_string(options.max_connections) +
                                     " connections to the API server were busy for the lookup's "
                                     "budget (" +
                                     std::to_string(budget.count()) + " ms)");
    co_return busy;
  }
  // The slot goes back however this ends: with the connection when its last answer left it open.
  struct slot_return {
    state* s;
    std::shared_ptr<connection> keep;
    ~slot_return() { s->give_back(std::move(keep)); }
  } slot_back{this, nullptr};
  auto c = std::move(*slot);
  const bool own_token = caller_token.empty();
  std::string token = own_token ? tokens.current() : caller_token;
  bool retried_connection = false;
  bool retried_token = false;
  for (;;) {
    const bool reused = c != nullptr;
    if (!reused) c = open_connection();
    const auto executor = c->stream.get_executor();
    // The connection moves into the exchange, which ends it on its strand or hands it back.
    auto a = co_await asio::co_spawn(executor,
                                     exchange(std::move(c), reused, what, token, deadline, budget),
                                     asio::use_awaitable);
    c = std::move(a.reusable);
    if (a.retry_fresh && !retried_connection && clock_type::now() < deadline) {
      retried_connection = true;
      continue;
    }
    // The token may have rotated since it was last read: read it again and retry once. A
    // caller's token is the caller's: its 401 is the answer.
    if (own_token && a.result.failure == lookup_failure::unauthorized && !retried_token &&
        clock_type::now() < deadline) {
      retried_token = true;
      token = tokens.reload();
      continue;
    }
    slot_back.keep = std::move(c);
    co_return a;
  }
}

asio::awaitable<lookup_result> kube_client::get(std::string path, std::chrono::milliseconds budget,
                                                object_reader read, read_rights rights) const {
  const auto s = state_;
  const auto start = clock_type::now();
  const auto took = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start);
  };
  if (!is_api_path(path)) {
    // No object can have such a path; nothing is sent.
    co_return failure_result(lookup_failure::not_found,
                             "not an API object path: " + core::quote(path));
  }
  if (rights.is_callers() && !s->credentials.client_cert_pem.empty()) {
    // The API server authenticates a client certificate before a bearer token: the read would
    // be the webhook's, not the caller's.
    co_return failure_result(lookup_failure::no_access,
                             "this API client presents a client certificate of its own; a "
                             "caller's read needs one that presents none");
  }
  // Named, not a temporary: GCC 12 destroys a temporary argument of a co_await'ed call twice.
  api_call what{http::verb::get, std::move(path), {}};
  auto a = co_await s->call(std::move(what), rights.bearer, budget);
  auto out = std::move(a.result);
  if (out.ok()) {
    drop_unread(a.value);
    out.object = read ? read(std::move(a.value))
                      : std::make_shared<const core::owner_object>(std::move(a.value));
  }
  out.latency = took();
  co_return out;
}

namespace {

// RFC 3986's unreserved characters stay; every other byte is %XX.
std::string percent_encoded(std::string_view text) {
  static constexpr std::string_view hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += hex[byte >> 4U];
      out += hex[byte & 0xFU];
    }
  }
  return out;
}

}  // namespace

asio::awaitable<api_answer> kube_client::read(
    std::string path, std::vector<std::pair<std::string, std::string>> query,
    std::chrono::milliseconds budget, answer_form form) const {
  const auto s = state_;
  api_answer out;
  if (!is_api_path(path)) {
    out.failure = lookup_failure::not_found;
    out.message = "not an API path: " + core::quote(path);
    co_return out;
  }
  char separator = '?';
  for (const auto& [key, value] : query) {
    path += separator + percent_encoded(key) + "=" + percent_encoded(value);
    separator = '&';
  }
  api_call what{http::verb::get, std::move(path), {}, form == answer_form::text};
  const std::string own_token;
  auto a = co_await s->call(std::move(what), own_token, budget);
  out.failure = a.result.failure;
  out.message = std::move(a.result.message);
  out.http_status = a.result.http_status;
  if (out.ok()) {
    out.value = std::move(a.value);
    out.text = std::move(a.text);
  }
  co_return out;
}

asio::awaitable<token_review> kube_client::review_token(std::string token,
                                                        std::chrono::milliseconds budget) const {
  const auto s = state_;
  const nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"},
                                 {"kind", "TokenReview"},
                                 {"spec", {{"token", std::move(token)}}}};
  api_call what{http::verb::post, "/apis/authentication.k8s.io/v1/tokenreviews", review.dump()};
  const std::string own_token;
  auto a = co_await s->call(std::move(what), own_token, budget);
  token_review out;
  if (!a.result.ok()) {
    out.failed = true;
    out.error = "TokenReview: " + std::string(core::failure_name(*a.result.failure)) + ": " +
                a.result.message;
    co_return out;
  }
  const auto* status = core::member(a.value, "status");
  const auto* authenticated = status != nullptr ? core::member(*status, "authenticated") : nullptr;
  out.authenticated =
      authenticated != nullptr && authenticated->is_boolean() && authenticated->get<bool>();
  const auto* user = status != nullptr ? core::member(*status, "user") : nullptr;
  if (const auto* name = user != nullptr ? core::string_member(*user, "username") : nullptr)
    out.username = *name;
  if (const auto* error = status != nullptr ? core::string_member(*status, "error") : nullptr)
    out.error = *error;
  if (out.authenticated && out.username.empty()) out.authenticated = false;
  co_return out;
}

read_rights read_rights::of_caller(std::string_view token) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), digest.data(), &length, EVP_sha256(), nullptr);
  constexpr std::string_view hex = "0123456789abcdef";
  std::string key = "caller:";
  for (unsigned int i = 0; i < length; ++i) {
    key += hex[digest[i] >> 4U];
    key += hex[digest[i] & 0xfU];
  }
  return read_rights{std::string(token), std::move(key)};
}

const inputs::kube_credentials& kube_client::credentials() const {
  return state_->credentials;
}

std::string collection_path(std::string_view api_version, std::string_view resource,
                            std::string_view ns) {
  std::string out = api_version.find('/') == std::string_view::npos ? "/api/" : "/apis/";
  out += api_version;
  if (!ns.empty()) {
    out += "/namespaces/";
    out += ns;
  }
  out += "/";
  out += resource;
  return out;
}

std::string api_path(std::string_view api_version, std::string_view resource, std::string_view ns,
                     std::string_view name) {
  auto out = collection_path(api_version, resource, ns);
  out += "/";
  out += name;
  return out;
}

std::string resource_of_kind(std::string_view kind) {
  std::string out;
  out.reserve(kind.size() + 1);
  for (const char c : kind) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out + "s";
}

}  // namespace trainenv::server
