// The fake API server's implementation (fake_apiserver.hpp says what it does): the server
// itself, behind the header's handle, so its Beast, Asio and OpenSSL code compiles once for
// every test that uses it.
#include "fake_apiserver.hpp"

#include <atomic>
#include <cctype>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace trainenv::test {

class fake_apiserver::server {
 public:
  explicit server(fake_apiserver_options options)
      : options_(std::move(options)),
        ca_(make_cert({.common_name = "fake apiserver CA", .is_ca = true})),
        serving_(make_cert({.common_name = "kube-apiserver"}, &ca_)),
        tls_(boost::asio::ssl::context::tls_server),
        acceptor_(ioc_),
        lifetime_(ioc_) {
    namespace ssl = boost::asio::ssl;
    tls_.use_certificate_chain(boost::asio::buffer(serving_.cert));
    tls_.use_private_key(boost::asio::buffer(serving_.key), ssl::context::pem);
    if (options_.require_client_cert) {
      tls_.add_certificate_authority(boost::asio::buffer(ca_.cert));
      tls_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    const tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    boost::asio::co_spawn(ioc_, accept_loop(), boost::asio::detached);
    lifetime_.expires_after(options_.max_lifetime);
    lifetime_.async_wait([this](boost::system::error_code ec) {
      if (!ec) ioc_.stop();
    });
    thread_ = std::thread([this] { ioc_.run(); });
  }

  ~server() {
    ioc_.stop();
    thread_.join();
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  [[nodiscard]] unsigned short port() const { return port_; }
  [[nodiscard]] const pem_pair& ca() const { return ca_; }

  [[nodiscard]] inputs::kube_credentials credentials(
      const std::string& token = "test-token") const {
    inputs::kube_credentials c;
    c.host = "127.0.0.1";
    c.port = port_;
    c.ca_pem = ca_.cert;
    c.token = token;
    c.source = "fake apiserver";
    return c;
  }

  std::string write_kubeconfig(const std::filesystem::path& path,
                               const std::string& user = "token: test-token") const {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\n"
                        << "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:"
                        << port_
                        << "\n    certificate-authority-data: " << core::base64_encode(ca_.cert)
                        << "\n"
                        << "users:\n- name: tester\n  user:\n    " << user << "\n"
                        << "contexts:\n- name: fake\n  context: {cluster: fake, user: tester}\n"
                        << "current-context: fake\n";
    return path.string();
  }

  static std::string path_of(const nlohmann::json& object) {
    const std::string api_version = object.at("apiVersion");
    const std::string kind = object.at("kind");
    std::string resource;
    for (const char c : kind) {
      resource += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    resource += "s";
    const auto& metadata = object.at("metadata");
    std::string out = api_version.find('/') == std::string::npos ? "/api/" : "/apis/";
    out += api_version;
    if (metadata.contains("namespace"))
      out += "/namespaces/" + metadata["namespace"].get<std::string>();
    return out + "/" + resource + "/" + metadata.at("name").get<std::string>();
  }

  std::string add_object(const nlohmann::json& object) {
    auto path = path_of(object);
    const std::lock_guard lock(mutex_);
    objects_[path] = object.dump();
    return path;
  }
  void remove_object(const std::string& path) {
    const std::lock_guard lock(mutex_);
    objects_.erase(path);
  }
  std::vector<std::string> load_yaml(const std::string& file) {
    auto docs = inputs::parse_documents(read_file(file));
    if (!docs) throw std::runtime_error(file + ": " + docs.message());
    std::vector<std::string> paths;
    for (const auto& doc : *docs) paths.push_back(add_object(doc));
    return paths;
  }

  void set_tokens(std::set<std::string> tokens) {
    const std::lock_guard lock(mutex_);
    options_.tokens = std::move(tokens);
  }
  void misbehave(const std::string& path, misbehaviour m) {
    const std::lock_guard lock(mutex_);
    per_path_[path] = m;
  }
  void misbehave(misbehaviour m) {
    const std::lock_guard lock(mutex_);
    global_ = m;
  }
  void behave() {
    const std::lock_guard lock(mutex_);
    per_path_.clear();
    global_ = {};
  }

  [[nodiscard]] std::size_t gets(const std::string& path) const {
    const std::lock_guard lock(mutex_);
    const auto it = gets_.find(path);
    return it == gets_.end() ? 0 : it->second;
  }
  [[nodiscard]] std::size_t total_gets() const {
    const std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [path, count] : gets_) n += count;
    return n;
  }
  [[nodiscard]] std::size_t gets_with(const std::string& token) const {
    const std::lock_guard lock(mutex_);
    const auto it = gets_by_token_.find(token);
    return it == gets_by_token_.end() ? 0 : it->second;
  }
  [[nodiscard]] std::vector<std::string> targets() const {
    const std::lock_guard lock(mutex_);
    return targets_;
  }
  [[nodiscard]] std::size_t token_reviews() const { return token_reviews_.load(); }
  [[nodiscard]] std::size_t accepts() const { return accepts_.load(); }
  [[nodiscard]] std::size_t handshakes() const { return handshakes_.load(); }

  using tcp = boost::asio::ip::tcp;
  using stream_type = boost::asio::ssl::stream<boost::beast::tcp_stream>;
  using response_type = boost::beast::http::response<boost::beast::http::string_body>;
  static constexpr auto use_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);
  static constexpr std::size_t huge_bytes = 64 * 1024 * 1024;

  static nlohmann::json status_object(int code, const std::string& reason,
                                      const std::string& message,
                                      nlohmann::json details = nullptr) {
    nlohmann::json s = {
        {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
        {"status", "Failure"}, {"message", message}, {"reason", reason}};
    if (!details.is_null()) s["details"] = std::move(details);
    s["code"] = code;
    return s;
  }

  // group, resource and name of an object path, as the API server's messages name them.
  struct path_parts {
    std::string group, resource, name;
  };
  static path_parts parts_of(const std::string& path) {
    std::vector<std::string> segments;
    std::size_t start = 1;
    while (start <= path.size()) {
      const auto end = path.find('/', start);
      segments.push_back(path.substr(start, end == std::string::npos ? end : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    path_parts p;
    if (segments.size() >= 2) {
      p.name = segments.back();
      p.resource = segments[segments.size() - 2];
    }
    if (segments.size() >= 3 && segments[0] == "apis") p.group = segments[1];
    return p;
  }

  static std::string qualified(const path_parts& p) {
    return p.group.empty() ? p.resource : p.resource + "." + p.group;
  }

  misbehaviour behaviour_for(const std::string& path) const {
    const std::lock_guard lock(mutex_);
    const auto it = per_path_.find(path);
    return it != per_path_.end() ? it->second : global_;
  }

  boost::asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_nothrow);
      if (ec) co_return;
      ++accepts_;
      const auto m = behaviour_for("");
      if (m.what == fault::refuse) {
        socket.close(ec);
        continue;
      }
      if (m.what == fault::stall) {
        boost::asio::co_spawn(ioc_, hold(std::move(socket), m.delay), boost::asio::detached);
        continue;
      }
      boost::asio::co_spawn(ioc_, session(std::move(socket)), boost::asio::detached);
    }
  }

  // Keeps the accepted socket open, unread, for `delay` (it lives in this frame).
  boost::asio::awaitable<void> hold([[maybe_unused]] tcp::socket socket,
                                    std::chrono::milliseconds delay) {
    boost::asio::steady_timer timer(ioc_, delay);
    co_await timer.async_wait(use_nothrow);
  }

  boost::asio::awaitable<void> session(tcp::socket socket) {
    namespace http = boost::beast::http;
    stream_type stream(boost::beast::tcp_stream(std::move(socket)), tls_);
    auto& lowest = boost::beast::get_lowest_layer(stream);
    lowest.expires_after(std::chrono::seconds(5));
    if (auto [ec] =
            co_await stream.async_handshake(boost::asio::ssl::stream_base::server, use_nothrow);
        ec) {
      co_return;
    }
    ++handshakes_;
    boost::beast::flat_buffer buffer;
    for (;;) {
      lowest.expires_after(std::chrono::seconds(10));
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 * 1024);
      if (auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow); ec) {
        co_return;
      }
      const auto& request = parser.get();
      const std::string target(request.target());
      const std::string path = target.substr(0, target.find('?'));
      if (request.method() == http::verb::get) {
        const std::lock_guard lock(mutex_);
        ++gets_[path];
        ++gets_by_token_[bearer_of(request)];
        targets_.push_back(target);
      }
      const auto m = behaviour_for(path);
      if (m.delay.count() > 0) {
        boost::asio::steady_timer timer(ioc_, m.delay);
        co_await timer.async_wait(use_nothrow);
      }
      lowest.expires_after(std::chrono::seconds(10));
      const auto raw = [&](std::string bytes) -> boost::asio::awaitable<bool> {
        auto [ec, n] =
            co_await boost::asio::async_write(stream, boost::asio::buffer(bytes), use_nothrow);
        co_return !ec;
      };
      switch (m.what) {
        case fault::huge: {
          if (!co_await raw(
                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(huge_bytes) + "\r\n\r\n{\"junk\":\"")) {
            co_return;
          }
          co_await raw(std::string(1024 * 1024, 'x'));
          lowest.close();
          co_return;
        }
        case fault::huge_unannounced: {
          if (!co_await raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: "
                            "close\r\n\r\n{\"junk\":\"")) {
            co_return;
          }
          const std::string chunk(64 * 1024, 'x');
          for (std::size_t sent = 0; sent < huge_bytes; sent += chunk.size()) {
            if (!co_await raw(chunk)) break;
          }
          lowest.close();
          co_return;
        }
        case fault::drop_mid_response: {
          const std::string body = object_body(path).value_or("{\"kind\":\"Job\"}");
          co_await raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, body.size() / 2));
          lowest.close();
          co_return;
        }
        default:
          break;
      }
      auto response = answer(request, path, m.what, stream);
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      if (auto [ec, n] = co_await http::async_write(stream, response, use_nothrow); ec) co_return;
      if (!response.keep_alive()) co_return;
      if (m.what == fault::close_after_answer) {
        lowest.close();
        co_return;
      }
    }
  }

  std::optional<std::string> object_body(const std::string& path) const {
    const std::lock_guard lock(mutex_);
    const auto it = objects_.find(path);
    if (it == objects_.end()) return std::nullopt;
    return it->second;
  }

  static std::string bearer_of(
      const boost::beast::http::request<boost::beast::http::string_body>& request) {
    const auto header = request[boost::beast::http::field::authorization];
    return header.starts_with("Bearer ") ? std::string(header.substr(7)) : std::string();
  }

  bool authenticated(const boost::beast::http::request<boost::beast::http::string_body>& request,
                     stream_type& stream) const {
    if (options_.require_client_cert && SSL_get0_peer_certificate(stream.native_handle())) {
      return true;
    }
    const auto token = bearer_of(request);
    const std::lock_guard lock(mutex_);
    return !token.empty() && options_.tokens.contains(token);
  }

  // Whether the request's token may read in the namespace of `path` (RBAC, by namespace).
  bool permitted(const boost::beast::http::request<boost::beast::http::string_body>& request,
                 const std::string& path) const {
    const std::lock_guard lock(mutex_);
    const auto rights = options_.namespaces_of.find(bearer_of(request));
    if (rights == options_.namespaces_of.end()) return true;
    const auto at = path.find("/namespaces/");
    std::string ns;
    if (at != std::string::npos) {
      ns = path.substr(at + 12);
      ns = ns.substr(0, ns.find('/'));
    }
    return rights->second.contains(ns);
  }

  // POST .../tokenreviews: {"status": {"authenticated", "user": {"username"}}} for the token in
  // spec.token, as the API server's TokenReview answers.
  std::string token_review(const std::string& body) const {
    ++token_reviews_;
    const auto review = nlohmann::json::parse(body, nullptr, false);
    std::string token;
    if (review.is_object() && review.contains("spec") && review["spec"].is_object())
      token = review["spec"].value("token", "");
    bool known = false;
    {
      const std::lock_guard lock(mutex_);
      known = !token.empty() && options_.tokens.contains(token);
    }
    nlohmann::json status = {{"authenticated", known}};
    if (known) {
      status["user"] = {{"username", "user-" + token},
                        {"uid", "uid-" + token},
                        {"groups", {"system:authenticated"}}};
    } else {
      status["error"] = "invalid bearer token";
    }
    return nlohmann::json{{"kind", "TokenReview"},
                          {"apiVersion", "authentication.k8s.io/v1"},
                          {"metadata", {{"creationTimestamp", nullptr}}},
                          {"spec", {{"token", token}}},
                          {"status", status}}
        .dump();
  }

  response_type answer(const boost::beast::http::request<boost::beast::http::string_body>& request,
                       const std::string& path, fault what, stream_type& stream) const {
    namespace http = boost::beast::http;
    const auto make = [&](http::status status, std::string body) {
      response_type r{status, request.version()};
      r.set(http::field::content_type, "application/json");
      r.body() = std::move(body);
      return r;
    };
    const auto p = parts_of(path);
    const auto status = [&](http::status code, const std::string& reason,
                            const std::string& message, nlohmann::json details = nullptr) {
      return make(
          code, status_object(static_cast<int>(code), reason, message, std::move(details)).dump());
    };
    const auto unauthorized = [&] {
      return status(http::status::unauthorized, "Unauthorized", "Unauthorized");
    };
    switch (what) {
      case fault::unauthorized:
        return unauthorized();
      case fault::forbidden:
        return status(http::status::forbidden, "Forbidden",
                      qualified(p) + " \"" + p.name +
                          "\" is forbidden: User \"system:serviceaccount:trainenv:trainenv\" "
                          "cannot get resource \"" +
                          p.resource + "\" in API group \"" + p.group + "\"",
                      {{"name", p.name}, {"group", p.group}, {"kind", p.resource}});
      case fault::server_error:
        return status(http::status::internal_server_error, "InternalError",
                      "Internal error occurred: etcdserver: request timed out");
      case fault::garbage:
        return make(http::status::ok, "<html><body>502 Bad Gateway</body></html>");
      case fault::not_object:
        return make(http::status::ok, "[{\"kind\":\"Job\"}]");
      default:
        break;
    }
    if (!authenticated(request, stream)) return unauthorized();
    if (request.method() == http::verb::post &&
        path == "/apis/authentication.k8s.io/v1/tokenreviews") {
      return make(http::status::created, token_review(request.body()));
    }
    if (request.method() != http::verb::get) {
      return status(http::status::method_not_allowed, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource");
    }
    if (!permitted(request, path)) {
      return status(http::status::forbidden, "Forbidden",
                    qualified(p) + " \"" + p.name + "\" is forbidden: User \"user-" +
                        bearer_of(request) + "\" cannot get resource \"" + p.resource +
                        "\" in API group \"" + p.group + "\"",
                    {{"name", p.name}, {"group", p.group}, {"kind", p.resource}});
    }
    if (auto body = object_body(path)) return make(http::status::ok, std::move(*body));
    nlohmann::json details = {{"name", p.name}};
    if (!p.group.empty()) details["group"] = p.group;
    details["kind"] = p.resource;
    return status(http::status::not_found, "NotFound",
                  qualified(p) + " \"" + p.name + "\" not found", std::move(details));
  }

  fake_apiserver_options options_;
  pem_pair ca_;
  pem_pair serving_;
  boost::asio::ssl::context tls_;
  boost::asio::io_context ioc_;
  tcp::acceptor acceptor_;
  boost::asio::steady_timer lifetime_;
  unsigned short port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> objects_;
  std::map<std::string, misbehaviour> per_path_;
  misbehaviour global_;
  std::map<std::string, std::size_t> gets_;
  std::map<std::string, std::size_t> gets_by_token_;
  std::vector<std::string> targets_;
  mutable std::atomic<std::size_t> token_reviews_{0};
  std::atomic<std::size_t> accepts_{0};
  std::atomic<std::size_t> handshakes_{0};
};

fake_apiserver::fake_apiserver(fake_apiserver_options options)
    : server_(std::make_unique<server>(std::move(options))) {}
fake_apiserver::~fake_apiserver() = default;

unsigned short fake_apiserver::port() const {
  return server_->port();
}
const pem_pair& fake_apiserver::ca() const {
  return server_->ca();
}
inputs::kube_credentials fake_apiserver::credentials(const std::string& token) const {
  return server_->credentials(token);
}
std::string fake_apiserver::write_kubeconfig(const std::filesystem::path& path,
                                             const std::string& user) const {
  return server_->write_kubeconfig(path, user);
}
std::string fake_apiserver::path_of(const nlohmann::json& object) {
  return server::path_of(object);
}
std::string fake_apiserver::add_object(const nlohmann::json& object) {
  return server_->add_object(object);
}
void fake_apiserver::remove_object(const std::string& path) {
  server_->remove_object(path);
}
std::vector<std::string> fake_apiserver::load_yaml(const std::string& file) {
  return server_->load_yaml(file);
}
void fake_apiserver::set_tokens(std::set<std::string> tokens) {
  server_->set_tokens(std::move(tokens));
}
void fake_apiserver::misbehave(const std::string& path, misbehaviour m) {
  server_->misbehave(path, m);
}
void fake_apiserver::misbehave(misbehaviour m) {
  server_->misbehave(m);
}
void fake_apiserver::behave() {
  server_->behave();
}
std::size_t fake_apiserver::gets(const std::string& path) const {
  return server_->gets(path);
}
std::size_t fake_apiserver::total_gets() const {
  return server_->total_gets();
}
std::size_t fake_apiserver::gets_with(const std::string& token) const {
  return server_->gets_with(token);
}
std::vector<std::string> fake_apiserver::targets() const {
  return server_->targets();
}
std::size_t fake_apiserver::token_reviews() const {
  return server_->token_reviews();
}
std::size_t fake_apiserver::accepts() const {
  return server_->accepts();
}
std::size_t fake_apiserver::handshakes() const {
  return server_->handshakes();
}

}  // namespace trainenv::test
