#include "trainenv//inputs/kube_credentials.hpp"
#include "trainenv/core/text/names.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/admission.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Credentials and CA bundles are small; a bigger file is a wrong path (a log, an image).
constexpr std::uintmax_t max_credential_file_bytes = std::uintmax_t{1024} * 1024;

core::result<std::string> read_small_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return core::error{"cannot read " + path + ": " + ec.message()};
  if (size > max_credential_file_bytes) {
    return core::error{"cannot read " + path + ": larger than " +
                       std::to_string(max_credential_file_bytes) + " bytes"};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::error{"cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

core::result<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 1 || value > 65535) {
    return core::error{"port " + core::quote(text) + " is not a number from 1 to 65535"};
  }
  return static_cast<std::uint16_t>(value);
}

// The parts of an https URL that a connection needs (client-go accepts a host without a scheme
// too, and a path prefix, which some proxies in front of the API server use).
struct server_url {
  std::string host;
  std::uint16_t port = 443;
  std::string base_path;
};

core::result<server_url> parse_server_url(std::string_view url) {
  std::string_view rest = url;
  if (const auto scheme = rest.find("://"); scheme != std::string_view::npos) {
    if (rest.substr(0, scheme) != "https") {
      return core::error{core::quote(url) +
                         " is not an https URL (a bearer token is never sent in clear text)"};
    }
    rest.remove_prefix(scheme + 3);
  }
  const auto path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  server_url out;
  if (path_start != std::string_view::npos) {
    if (rest[path_start] != '/') return core::error{core::quote(url) + " has a query or fragment"};
    out.base_path = std::string(rest.substr(path_start));
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  }
  if (authority.find('@') != std::string_view::npos) {
    return core::error{core::quote(url) + " carries user information; use the user's fields"};
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return core::error{core::quote(url) + ": unclosed '['"};
    out.host = std::string(authority.substr(1, close - 1));
    const auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return core::error{core::quote(url) + ": junk after ']'"};
      port_text = after.substr(1);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    out.host = std::string(authority.substr(0, colon));
    port_text = authority.substr(colon + 1);
  } else {
    out.host = std::string(authority);
  }
  if (out.host.empty()) return core::error{core::quote(url) + " has no host"};
  if (!port_text.empty() || authority.ends_with(':')) {
    auto port = parse_port(port_text);
    if (!port) return core::error{core::quote(url) + ": " + port.message()};
    out.port = *port;
  }
  return out;
}

// Reads a kubeconfig: "kubeconfig FILE: <what>" for every complaint.
class kubeconfig_reader {
 public:
  kubeconfig_reader(std::string path, json doc)
      : path_(std::move(path)), dir_(fs::path(path_).parent_path()), doc_(std::move(doc)) {}

  core::result<kube_credentials> read() {
    if (!doc_.is_object()) return fail("not a YAML mapping");
    const auto* current = string_at(doc_, "current-context");
    if (current == nullptr || current->empty()) return fail("current-context is not set");
    const auto* context = named("contexts", "context", *current);
    if (context == nullptr) {
      return fail("current-context " + core::quote(*current) + " is not in contexts");
    }
    const auto* cluster_name = string_at(*context, "cluster");
    const auto* user_name = string_at(*context, "user");
    if (cluster_name == nullptr)
      return fail("context " + core::quote(*current) + " has no cluster");
    const auto* cluster = named("clusters", "cluster", *cluster_name);
    if (cluster == nullptr) {
      return fail("cluster " + core::quote(*cluster_name) + " (of context " +
                  core::quote(*current) + ") is not in clusters");
    }
    kube_credentials out;
    out.source = path_;
    if (const auto* ns = string_at(*context, "namespace")) out.namespace_name = *ns;
    if (auto done = read_cluster(*cluster_name, *cluster, out); !done) {
      return std::move(done).take_error();
    }
    if (user_name != nullptr && !user_name->empty()) {
      const auto* user = named("users", "user", *user_name);
      if (user == nullptr) {
        return fail("user " + core::quote(*user_name) + " (of context " + core::quote(*current) +
                    ") is not in users");
      }
      if (auto done = read_user(*user_name, *user, out); !done) return std::move(done).take_error();
    }
    if (!type_error_.empty()) return fail(type_error_);
    return out;
  }

 private:
  // A member of the wrong type, met on the way, is the better explanation.
  core::error fail(const std::string& what) const {
    return core::error{"kubeconfig " + path_ + ": " + (type_error_.empty() ? what : type_error_)};
  }

  // A string member, or null when absent; a member of another type is remembered as an error.
  const std::string* string_at(const json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    if (!it->is_string()) {
      if (type_error_.empty()) type_error_ = std::string(key) + " is not a string";
      return nullptr;
    }
    return &it->get_ref<const std::string&>();
  }

  // doc[list][i][field] where doc[list][i].name == name.
  const json* named(const char* list, const char* field, const std::string& name) const {
    const auto it = doc_.find(list);
    if (it == doc_.end() || !it->is_array()) return nullptr;
    for (const auto& entry : *it) {
      if (!entry.is_object()) continue;
      const auto n = entry.find("name");
      if (n == entry.end() || !n->is_string() || n->get_ref<const std::string&>() != name) continue;
      const auto body = entry.find(field);
      static const json empty = json::object();
      return body != entry.end() && body->is_object() ? &*body : &empty;
    }
    return nullptr;
  }

  std::string resolve(const std::string& file) const {
    const fs::path p(file);
    // Joined and cleaned, as Go's filepath.Join: "./get-token" is dir/get-token.
    return p.is_absolute() || dir_.empty() ? file : (dir_ / p).lexically_normal().string();
  }

  // `-data` (base64) wins over the file, as in client-go.
  core::result<std::string> data_or_file(const json& object, const std::string& owner,
                                         const char* file_key, const char* data_key) {
    if (const auto* data = string_at(object, data_key); data != nullptr && !data->empty()) {
      std::string compact;
      for (const char c : *data) {
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') compact += c;
      }
      auto decoded = core::base64_decode(compact);
      if (!decoded) return fail(owner + ": " + data_key + " is not valid base64");
      return std::move(*decoded);
    }
    if (const auto* file = string_at(object, file_key); file != nullptr && !file->empty()) {
      auto text = read_small_file(resolve(*file));
      if (!text) return fail(owner + ": " + file_key + ": " + text.message());
      return std::move(*text);
    }
    return std::string();
  }

  core::result<bool> read_cluster(const std::string& name, const json& cluster,
                                  kube_credentials& out) {
    const std::string owner = "cluster " + core::quote(name);
    const auto* server = string_at(cluster, "server");
    if (server == nullptr || server->empty()) return fail(owner + ": server is not set");
    auto url = parse_server_url(*server);
    if (!url) return fail(owner + ": server " + url.message());
    out.host = std::move(url->host);
    out.port = url->port;
    out.base_path = std::move(url->base_path);
    if (const auto it = cluster.find("insecure-skip-tls-verify");
        it != cluster.end() && *it == true) {
      return fail(owner + ": insecure-skip-tls-verify is not supported (give the cluster's CA)");
    }
    if (const auto it = cluster.find("proxy-url"); it != cluster.end() && !it->is_null()) {
      return fail(owner + ": proxy-url is not supported");
    }
    if (const auto* sni = string_at(cluster, "tls-server-name")) out.server_name = *sni;
    auto ca = data_or_file(cluster, owner, "certificate-authority", "certificate-authority-data");
    if (!ca) return std::move(ca).take_error();
    out.ca_pem = std::move(*ca);
    return true;
  }

  core::result<bool> read_user(const std::string& name, const json& user, kube_credentials& out) {
    const std::string owner = "user " + core::quote(name);
    if (const auto it = user.find("auth-provider"); it != user.end() && !it->is_null()) {
      return fail(owner +
                  ": auth-provider credentials are not supported (client-go dropped its "
                  "providers); give an exec plugin, token, tokenFile or a client certificate");
    }
    if (const auto* token = string_at(user, "token")) out.token = std::string(core::trim(*token));
    if (const auto* file = string_at(user, "tokenFile"); file != nullptr && !file->empty()) {
      out.token_file = resolve(*file);
      auto token = read_token_file(out.token_file);
      if (!token) return fail(owner + ": tokenFile: " + token.message());
      out.token = std::move(*token);
    }
    auto cert = data_or_file(user, owner, "client-certificate", "client-certificate-data");
    if (!cert) return std::move(cert).take_error();
    auto key = data_or_file(user, owner, "client-key", "client-key-data");
    if (!key) return std::move(key).take_error();
    if (cert->empty() != key->empty()) {
      return fail(owner + ": " + (cert->empty() ? "client-key" : "client-certificate") +
                  " is given without " + (cert->empty() ? "client-certificate" : "client-key"));
    }
    out.client_cert_pem = std::move(*cert);
    out.client_key_pem = std::move(*key);
    // As client-go: a plugin runs only when no token or certificate is given.
    if (const auto it = user.find("exec"); it != user.end() && !it->is_null()) {
      auto plugin = read_exec(owner, *it, out);
      if (!plugin) return std::move(plugin).take_error();
      if (out.token.empty() && out.client_cert_pem.empty()) out.exec = std::move(*plugin);
      return true;
    }
    if (out.token.empty() && out.client_cert_pem.empty()) {
      return fail(owner + ": no credentials (token, tokenFile, client-certificate or exec)");
    }
    return true;
  }

  // user.exec, checked as client-go's loader and validation check it (clientcmd/api/v1
  // defaults.go, validation.go; plugin/pkg/client/auth/exec).
  core::result<exec_plugin> read_exec(const std::string& owner, const json& exec,
                                      const kube_credentials& cluster) {
    if (!exec.is_object()) return fail(owner + ": exec is not a mapping");
    exec_plugin plugin;
    const auto* command = string_at(exec, "command");
    if (command == nullptr || command->empty())
      return fail(owner + ": exec: command must be specified");
    // Only a command with a path separator is the kubeconfig's own file; a bare name is
    // looked up in PATH.
    plugin.command = command->find('/') != std::string::npos ? resolve(*command) : *command;
    const auto* version = string_at(exec, "apiVersion");
    if (version == nullptr || version->empty())
      return fail(owner + ": exec: apiVersion must be specified");
    if (*version != "client.authentication.k8s.io/v1" &&
        *version != "client.authentication.k8s.io/v1beta1") {
      return fail(owner + ": exec: invalid apiVersion " + core::quote(*version) +
                  " (client.authentication.k8s.io/v1 or v1beta1)");
    }
    plugin.api_version = *version;
    if (const auto it = exec.find("args"); it != exec.end() && !it->is_null()) {
      if (!it->is_array()) return fail(owner + ": exec: args is not a list");
      for (const auto& arg : *it) {
        if (!arg.is_string()) return fail(owner + ": exec: args holds a value that is no string");
        plugin.args.push_back(arg.get<std::string>());
      }
    }
    if (const auto it = exec.find("env"); it != exec.end() && !it->is_null()) {
      if (!it->is_array()) return fail(owner + ": exec: env is not a list");
      for (const auto& entry : *it) {
        const auto* env_name = entry.is_object() ? string_at(entry, "name") : nullptr;
        if (env_name == nullptr || env_name->empty())
          return fail(owner + ": exec: env variable name must be specified");
        const auto* value = string_at(entry, "value");
        plugin.env.emplace_back(*env_name, value != nullptr ? *value : std::string());
      }
    }
    const auto* mode = string_at(exec, "interactiveMode");
    if (mode == nullptr || mode->empty()) {
      if (plugin.api_version == "client.authentication.k8s.io/v1")
        return fail(owner + ": exec: interactiveMode must be specified for " + plugin.api_version);
      plugin.interactive_mode = "IfAvailable";
    } else if (*mode == "Never" || *mode == "IfAvailable" || *mode == "Always") {
      plugin.interactive_mode = *mode;
    } else {
      return fail(owner + ": exec: invalid interactiveMode " + core::quote(*mode) +
                  " (Never, IfAvailable or Always)");
    }
    if (const auto* hint = string_at(exec, "installHint")) plugin.install_hint = *hint;
    if (const auto it = exec.find("provideClusterInfo"); it != exec.end() && *it == true) {
      json info = {{"server", cluster.server_url()}};
      if (!cluster.server_name.empty()) info["tls-server-name"] = cluster.server_name;
      if (!cluster.ca_pem.empty())
        info["certificate-authority-data"] = core::base64_encode(cluster.ca_pem);
      plugin.cluster_info = info.dump();
    }
    return plugin;
  }

  std::string path_;
  fs::path dir_;
  json doc_;
  std::string type_error_;
};

}  // namespace

std::string kube_credentials::authority() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string kube_credentials::server_url() const {
  return "https://" + authority() + base_path;
}

core::result<std::string> read_token_file(const std::string& path) {
  auto text = read_small_file(path);
  if (!text) return std::move(text).take_error();
  const auto token = core::trim(*text);
  if (token.empty()) return core::error{path + " is empty"};
  return std::string(token);
}

core::result<kube_credentials> load_in_cluster(std::string_view secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  return load_in_cluster(host != nullptr ? host : "", port != nullptr ? port : "", secrets_dir);
}

core::result<kube_credentials> load_in_cluster(std::string_view service_host,
                                               std::string_view service_port,
                                               std::string_view secrets_dir) {
  if (service_host.empty() || service_port.empty()) {
    return core::error{
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(outside a cluster, use --kubeconfig)"};
  }
  kube_credentials out;
  out.source = "in-cluster";
  // The variable holds a bare address; an IPv6 one is bracketed only where it meets a port.
  out.host = std::string(service_host);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  auto port = parse_port(service_port);
  if (!port) return core::error{"KUBERNETES_SERVICE_PORT: " + port.message()};
  out.port = *port;
  const std::string dir(secrets_dir);
  out.token_file = dir + "/token";
  auto token = read_token_file(out.token_file);
  if (!token) return core::error{"service account token: " + token.message()};
  out.token = std::move(*token);
  // client-go goes on with the system's CAs when ca.crt cannot be read; the API server's
  // certificate is signed by the cluster's own CA, so that could only fail later and vaguer.
  auto ca = read_small_file(dir + "/ca.crt");
  if (!ca) return core::error{"service account CA: " + ca.message()};
  out.ca_pem = std::move(*ca);
  // Only commands read it (doctor's default namespace); the webhook reads in each review's.
  if (auto ns = read_small_file(dir + "/namespace"); ns) {
    out.namespace_name = std::string(core::trim(*ns));
  }
  return out;
}

core::result<kube_credentials> load_kubeconfig(const std::string& path) {
  auto text = read_small_file(path);
  if (!text) return core::error{"kubeconfig: " + text.message()};
  auto doc = parse_document(*text);
  if (!doc) return core::error{"kubeconfig " + path + ": " + doc.message()};
  return kubeconfig_reader(path, std::move(*doc)).read();
}

}  // namespace trainenv::inputs
