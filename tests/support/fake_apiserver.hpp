// A real-shaped fake Kubernetes API server for the owner-lookup tests: HTTPS on 127.0.0.1
// (port 0) with a CA and serving certificate minted here, bearer tokens checked, RBAC by
// namespace per token (403 Status as the API server words it), TokenReview answered for the
// tokens it knows, objects served by API path from YAML documents, 404 and 401/403/500 answered
// with real Status objects, and misbehaviour on demand (slow, garbage, huge, dropped
// mid-answer, refused at accept). It counts the GETs per path and per token, the TokenReviews
// and the TCP connections. One thread of its own; every connection bounded in time; the whole
// server stops by itself after `max_lifetime`. Compiled once (fake_apiserver.cpp, in the
// trainenv_test_support library): its Beast and Asio code was most of each test batch's build.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "test_certs.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/inputs/kube_credentials.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::test {

enum class fault {
  none,
  unauthorized,        // 401 Status, whatever the token
  forbidden,           // 403 Status (RBAC)
  server_error,        // 500 Status
  garbage,             // 200 with a body that is not JSON
  not_object,          // 200 with a JSON array
  huge,                // 200 announcing 64 MiB (sends 1 MiB of it, then closes)
  huge_unannounced,    // 200 without a length, streaming up to 64 MiB until the client leaves
  drop_mid_response,   // half of a 200 answer, then the TCP connection closes
  close_after_answer,  // a normal kept-alive answer, then the connection closes (idle close)
  refuse,              // the connection is closed at accept (global only)
  stall,               // the connection is held without a handshake for `delay` (global only)
};

struct misbehaviour {
  std::chrono::milliseconds delay{0};  // before answering
  fault what = fault::none;
};

// One rule of a ClusterRole: what it grants, on every namespace.
struct rbac_rule {
  std::set<std::string> api_groups;  // "" for the core group
  std::set<std::string> resources;
  std::set<std::string> verbs;  // "get" (one object), "list" (a collection)
};

struct fake_apiserver_options {
  std::set<std::string> tokens = {"test-token"};
  bool require_client_cert = false;  // a client certificate from ca() authenticates instead
  std::chrono::seconds max_lifetime{120};
  // RBAC: the namespaces a token may GET in; "" stands for cluster-scoped objects. A token not
  // listed may read everything (the webhook's own, in most tests).
  std::map<std::string, std::set<std::string>> namespaces_of = {};
  // RBAC by rules: a token listed may only GET and LIST what one of its rules grants.
  std::map<std::string, std::vector<rbac_rule>> rules_of = {};
};

class fake_apiserver {
 public:
  explicit fake_apiserver(fake_apiserver_options options = {});
  ~fake_apiserver();
  fake_apiserver(const fake_apiserver&) = delete;
  fake_apiserver& operator=(const fake_apiserver&) = delete;

  [[nodiscard]] unsigned short port() const;
  [[nodiscard]] const pem_pair& ca() const;

  // Credentials for a client of this server with `token`.
  [[nodiscard]] inputs::kube_credentials credentials(const std::string& token = "test-token") const;

  // A kubeconfig at `path` whose current context is this server, its CA inline, and `user` as
  // the kubeconfig's user entry (a token, or a tokenFile); its path.
  std::string write_kubeconfig(const std::filesystem::path& path,
                               const std::string& user = "token: test-token") const;

  // The API path of an object, from its apiVersion, kind, namespace and name.
  static std::string path_of(const nlohmann::json& object);

  std::string add_object(const nlohmann::json& object);
  void remove_object(const std::string& path);
  // Every document of a YAML file; returns their paths.
  std::vector<std::string> load_yaml(const std::string& file);

  // What GET .../namespaces/NS/pods/POD/log?container=C answers (text/plain), the run before
  // the container's restart with `previous` (&previous=true); a log not set is the API server's
  // 400 for it.
  void set_log(const std::string& ns, const std::string& pod, const std::string& container,
               std::string text, bool previous = false);

  void set_tokens(std::set<std::string> tokens);
  void misbehave(const std::string& path, misbehaviour m);
  void misbehave(misbehaviour m);
  void behave();

  [[nodiscard]] std::size_t gets(const std::string& path) const;
  [[nodiscard]] std::size_t total_gets() const;
  // GETs made with `token` as their bearer token ("" for those with none, or a client
  // certificate).
  [[nodiscard]] std::size_t gets_with(const std::string& token) const;
  // Every path GET asked for, in order, as it came on the wire (query strings included).
  [[nodiscard]] std::vector<std::string> targets() const;
  // What was read, as RBAC names it: "get pods", "list endpointslices.discovery.k8s.io".
  [[nodiscard]] std::set<std::string> reads() const;
  [[nodiscard]] std::size_t token_reviews() const;
  [[nodiscard]] std::size_t accepts() const;
  // Connections whose TLS handshake completed.
  [[nodiscard]] std::size_t handshakes() const;

 private:
  class server;
  std::unique_ptr<server> server_;
};

}  // namespace trainenv::test
