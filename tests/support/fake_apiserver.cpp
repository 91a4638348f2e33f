// The fake API server's implementation (fake_apiserver.hpp says what it does): the server
// itself, behind the header's handle, so its Beast, Asio and OpenSSL code compiles once for
// every test that uses it.
#include "fake_apiserver.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdint>
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
namespace {

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      unsigned value = 0;
      const auto* first = text.data() + i + 1;
      if (std::from_chars(first, first + 2, value, 16).ptr == first + 2) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += text[i] == '+' ? ' ' : text[i];
  }
  return out;
}

// The value of `key` in the request target's query string, decoded; "" when absent.
std::string query_value(std::string_view target, std::string_view key) {
  const auto question = target.find('?');
  if (question == std::string_view::npos) return {};
  auto query = target.substr(question + 1);
  while (!query.empty()) {
    const auto amp = std::min(query.find('&'), query.size());
    const auto pair = query.substr(0, amp);
    const auto eq = pair.find('=');
    if (percent_decoded(pair.substr(0, eq)) == key)
      return eq == std::string_view::npos ? std::string() : percent_decoded(pair.substr(eq + 1));
    query = query.substr(std::min(amp + 1, query.size()));
  }
  return {};
}

std::size_t count_or(std::string_view text, std::size_t otherwise) {
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() ? n : otherwise;
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return std::string(text);
}

// The requirements of a selector, split at the commas outside parentheses.
std::vector<std::string> requirements(std::string_view selector) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= selector.size(); ++i) {
    if (i < selector.size() && selector[i] == '(') ++depth;
    if (i < selector.size() && selector[i] == ')') --depth;
    if (i == selector.size() || (selector[i] == ',' && depth == 0)) {
      if (auto r = trimmed(selector.substr(start, i - start)); !r.empty()) out.push_back(r);
      start = i + 1;
    }
  }
  return out;
}

// A label selector as the API server reads one: k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b).
bool labels_match(const nlohmann::json& object, std::string_view selector) {
  static const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json* labels_at = &none;
  if (const auto metadata = object.find("metadata");
      metadata != object.end() && metadata->is_object()) {
    if (const auto it = metadata->find("labels"); it != metadata->end() && it->is_object())
      labels_at = &*it;
  }
  const auto& labels = *labels_at;
  const auto value_of = [&](const std::string& key) -> std::optional<std::string> {
    const auto it = labels.find(key);
    if (it == labels.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  for (const auto& r : requirements(selector)) {
    if (const auto set = r.find(" in ("), notset = r.find(" notin (");
        set != std::string::npos || notset != std::string::npos) {
      const bool in = set != std::string::npos;
      const auto key = trimmed(r.substr(0, in ? set : notset));
      const auto open = r.find('(');
      const auto values = requirements(r.substr(open + 1, r.rfind(')') - open - 1));
      const auto v = value_of(key);
      const bool member = v && std::find(values.begin(), values.end(), *v) != values.end();
      if (in != member) return false;
    } else if (const auto ne = r.find("!="); ne != std::string::npos) {
      if (value_of(trimmed(r.substr(0, ne))) == trimmed(r.substr(ne + 2))) return false;
    } else if (const auto eq = r.find('='); eq != std::string::npos) {
      const auto value_at = r.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      if (value_of(trimmed(r.substr(0, eq))) != trimmed(r.substr(value_at))) return false;
    } else if (r.front() == '!') {
      if (value_of(trimmed(r.substr(1)))) return false;
    } else if (!value_of(r)) {
      return false;
    }
  }
  return true;
}

// A field selector: path=value and path!=value over dotted paths (metadata.name,
// involvedObject.uid, type), a missing field reading as "".
bool fields_match(const nlohmann::json& object, std::string_view selector) {
  for (const auto& r : requirements(selector)) {
    const auto ne = r.find("!=");
    const auto eq = ne != std::string::npos ? ne : r.find('=');
    if (eq == std::string::npos) return false;
    const auto value_at = ne != std::string::npos       ? eq + 2
                          : r.compare(eq, 2, "==") == 0 ? eq + 2
                                                        : eq + 1;
    const nlohmann::json* at = &object;
    std::string_view path = std::string_view(r).substr(0, eq);
    while (at != nullptr && !path.empty()) {
      const auto dot = std::min(path.find('.'), path.size());
      const auto it = at->is_object() ? at->find(std::string(path.substr(0, dot))) : at->end();
      at = at->is_object() && it != at->end() ? &*it : nullptr;
      path = path.substr(std::min(dot + 1, path.size()));
    }
    const std::string value = at != nullptr && at->is_string() ? at->get<std::string>() : "";
    if ((value == r.substr(value_at)) == (ne != std::string::npos)) return false;
  }
  return true;
}

}  // namespace

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
    parsed_[path] = object;
    served_.insert(qualified(parts_of(path)));
    return path;
  }
  void remove_object(const std::string& path) {
    const std::lock_guard lock(mutex_);
    objects_.erase(path);
    parsed_.erase(path);
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
  [[nodiscard]] std::set<std::string> reads() const {
    const std::lock_guard lock(mutex_);
    return reads_;
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

  // group, namespace, resource and name of an API path, as the API server's messages name them;
  // no name: a collection (a LIST).
  struct path_parts {
    std::string api_version, group, ns, resource, name, subresource;
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
    std::size_t at = 0;
    if (!segments.empty() && segments[0] == "apis" && segments.size() >= 3) {
      p.group = segments[1];
      p.api_version = segments[1] + "/" + segments[2];
      at = 3;
    } else if (!segments.empty() && segments[0] == "api" && segments.size() >= 2) {
      p.api_version = segments[1];
      at = 2;
    }
    if (segments.size() >= at + 3 && segments[at] == "namespaces") {
      p.ns = segments[at + 1];
      at += 2;
    }
    if (segments.size() > at) p.resource = segments[at];
    if (segments.size() > at + 1) p.name = segments[at + 1];
    if (segments.size() > at + 2) p.subresource = segments[at + 2];
    return p;
  }

  // As RBAC names what a path reads: "pods", "pods/log", "jobsets.jobset.x-k8s.io".
  static std::string qualified(const path_parts& p) {
    const auto resource = p.subresource.empty() ? p.resource : p.resource + "/" + p.subresource;
    return p.group.empty() ? resource : resource + "." + p.group;
  }

  // RBAC's refusal, worded as the API server's authorizer words it.
  static std::string forbidden_text(const path_parts& p, const std::string& user) {
    const bool list = p.name.empty();
    const auto object = p.group.empty() ? p.resource : p.resource + "." + p.group;
    const auto resource = p.subresource.empty() ? p.resource : p.resource + "/" + p.subresource;
    return object + (list ? "" : " \"" + p.name + "\"") + " is forbidden: User \"" + user +
           "\" cannot " + (list ? "list" : "get") + " resource \"" + resource +
           "\" in API group \"" + p.group + "\"" +
           (p.ns.empty() ? std::string(" at the cluster scope")
                         : " in the namespace \"" + p.ns + "\"");
  }

  // A LIST of the collection at `path` as the API server answers it: {kind: <Kind>List,
  // apiVersion, metadata: {resourceVersion, continue?, remainingItemCount?}, items} with the
  // items' own kind and apiVersion left out, filtered by labelSelector and fieldSelector, in
  // pages of `limit` with an opaque `continue`. None when the cluster serves no such resource:
  // a built-in one, or one of which an object was ever added (a CRD installed).
  std::optional<std::string> list_body(const std::string& path, const std::string& target) const {
    const auto p = parts_of(path);
    static const std::set<std::string> built_in = {"pods",           "services", "events",
                                                   "endpointslices", "jobs",     "configmaps"};
    const auto labels = query_value(target, "labelSelector");
    const auto fields = query_value(target, "fieldSelector");
    std::size_t from = 0;
    if (const auto token = query_value(target, "continue"); !token.empty())
      from = token.rfind("offset-", 0) == 0 ? count_or(token.substr(7), SIZE_MAX) : SIZE_MAX;
    const auto limit_text = query_value(target, "limit");
    const std::size_t limit =
        limit_text.empty() ? SIZE_MAX : std::max<std::size_t>(1, count_or(limit_text, SIZE_MAX));
    nlohmann::json out = {{"kind", p.resource + "List"},
                          {"apiVersion", p.api_version},
                          {"metadata", {{"resourceVersion", "4242"}}},
                          {"items", nlohmann::json::array()}};
    std::size_t matching = 0;
    const std::lock_guard lock(mutex_);
    if (!built_in.contains(p.resource) && !served_.contains(qualified(p))) return std::nullopt;
    // The stored objects, parsed once when added; only the page's items are copied.
    for (const auto& [object_path, object] : parsed_) {
      const auto q = parts_of(object_path);
      // (The real API server converts between versions; this one serves each as added.)
      if (q.api_version != p.api_version || q.resource != p.resource || q.name.empty()) continue;
      if (!p.ns.empty() && q.ns != p.ns) continue;
      if (!labels_match(object, labels) || !fields_match(object, fields)) continue;
      if (matching == 0) out["kind"] = object.value("kind", "") + "List";
      if (matching >= from && matching - from < limit) {
        auto item = object;
        item.erase("kind");
        item.erase("apiVersion");
        out["items"].push_back(std::move(item));
      }
      ++matching;
    }
    if (from != SIZE_MAX && limit != SIZE_MAX && from + limit < matching) {
      out["metadata"]["continue"] = "offset-" + std::to_string(from + limit);
      out["metadata"]["remainingItemCount"] = matching - from - limit;
    }
    return out.dump();
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
        const auto p = parts_of(path);
        reads_.insert(std::string(p.name.empty() ? "list " : "get ") + qualified(p));
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

  void set_log(const std::string& ns, const std::string& pod, const std::string& container,
               std::string text, bool previous) {
    const std::lock_guard lock(mutex_);
    logs_[ns + "/" + pod + "/" + container + (previous ? "/previous" : "")] = std::move(text);
  }
  std::optional<std::string> log_text(const std::string& ns, const std::string& pod,
                                      const std::string& container, bool previous) const {
    const std::lock_guard lock(mutex_);
    const auto it = logs_.find(ns + "/" + pod + "/" + container + (previous ? "/previous" : ""));
    if (it == logs_.end()) return std::nullopt;
    return it->second;
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
    if (const auto rules = options_.rules_of.find(bearer_of(request));
        rules != options_.rules_of.end()) {
      const auto p = parts_of(path);
      const std::string verb = p.name.empty() ? "list" : "get";
      const auto resource = p.subresource.empty() ? p.resource : p.resource + "/" + p.subresource;
      const bool granted =
          std::any_of(rules->second.begin(), rules->second.end(), [&](const rbac_rule& rule) {
            return rule.api_groups.contains(p.group) && rule.resources.contains(resource) &&
                   rule.verbs.contains(verb);
          });
      if (!granted) return false;
    }
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
                      forbidden_text(p, "system:serviceaccount:trainenv:trainenv"),
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
                    forbidden_text(p, "user-" + bearer_of(request)),
                    {{"name", p.name}, {"group", p.group}, {"kind", p.resource}});
    }
    if (p.resource == "pods" && p.subresource == "log") {
      const std::string target(request.target());
      const auto container = query_value(target, "container");
      const bool previous = query_value(target, "previous") == "true";
      if (auto text = log_text(p.ns, p.name, container, previous)) {
        auto r = make(http::status::ok, std::move(*text));
        r.set(http::field::content_type, "text/plain");
        return r;
      }
      return status(http::status::bad_request, "BadRequest",
                    previous ? "previous terminated container \"" + container + "\" in pod \"" +
                                   p.name + "\" not found"
                             : "container \"" + container + "\" in pod \"" + p.name +
                                   "\" is waiting to start: ContainerCreating");
    }
    if (auto body = object_body(path)) return make(http::status::ok, std::move(*body));
    if (p.name.empty() && !p.resource.empty()) {
      if (auto list = list_body(path, std::string(request.target()))) {
        return make(http::status::ok, std::move(*list));
      }
      return status(http::status::not_found, "NotFound",
                    "the server could not find the requested resource",
                    {{"group", p.group}, {"kind", p.resource}});
    }
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
  std::map<std::string, std::string> objects_;    // path -> the object's JSON text (GETs)
  std::map<std::string, nlohmann::json> parsed_;  // the same objects, parsed (LISTs)
  std::set<std::string> served_;  // resource.group of every object added: its CRD is installed
  std::map<std::string, std::string> logs_;  // "ns/pod/container[/previous]" -> text
  std::map<std::string, misbehaviour> per_path_;
  misbehaviour global_;
  std::map<std::string, std::size_t> gets_;
  std::map<std::string, std::size_t> gets_by_token_;
  std::vector<std::string> targets_;
  std::set<std::string> reads_;
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
void fake_apiserver::set_log(const std::string& ns, const std::string& pod,
                             const std::string& container, std::string text, bool previous) {
  server_->set_log(ns, pod, container, std::move(text), previous);
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
std::set<std::string> fake_apiserver::reads() const {
  return server_->reads();
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
