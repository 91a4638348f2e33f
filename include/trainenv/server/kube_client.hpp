// A small Kubernetes API client for owner lookups: one GET of one object, over kept-alive TLS
// connections (the server's certificate checked against the cluster CA and host name), with
// the bearer token re-read when its file changes and after a 401, or a caller's own token sent
// as it is (docs/security.md: previews read as their caller). One POST: a TokenReview. For
// `trainenv doctor`, whole reads: an object or one page of a LIST, status kept. No watch.
//
// Every lookup runs on a strand of the connection it uses and is bounded by its own time
// budget (resolve, connect, TLS, request and answer together), so it never holds up the
// io_context's other work, with any number of threads running it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/kube_credentials.hpp"
#include "trainenv/server/lookup_result.hpp"
#include "trainenv/server/memory_budget.hpp"
#include "trainenv/server/metrics.hpp"

namespace trainenv::server {

struct kube_client_options {
  // Larger answers are refused (when announced, without reading them). A JobSet or Trainer
  // runtime with big pod templates is tens of KiB; etcd keeps no object over 1.5 MiB unless told
  // to, and the API server takes no request over 3 MiB.
  std::size_t max_response_bytes = std::size_t{3} * 1024 * 1024;
  // Where an answer takes its share before its body is read (memory_budget::built_factor per
  // byte); none: not bounded but by max_response_bytes.
  memory_budget* memory = nullptr;
  // Connections to the API server open at once, each kept alive between lookups (client-go
  // keeps its connections too, and multiplexes them with HTTP/2; this client speaks HTTP/1.1,
  // one lookup per connection at a time). A lookup that finds them all busy waits for one,
  // within its budget, rather than opening one more to close after one GET. asio's TLS stream
  // keeps ~70 KiB of buffers while a lookup runs, none while idle.
  std::size_t max_connections = 32;
  // An idle connection older than this is closed rather than reused (below the 90 s idle
  // timeout of Go's HTTP clients, which the API server and the proxies before it expect).
  std::chrono::milliseconds max_idle_age{60'000};
  // How often, at most, the token file's size and mtime are checked (client-go re-reads it
  // every minute; kubelet rotates projected tokens at 80% of their life, 48 min at the least).
  std::chrono::milliseconds token_recheck{5'000};
  std::string user_agent = "trainenv";
  // Where its connections, requests and token reloads are counted (the server's metrics, which
  // must outlive the client); none: not counted.
  metrics* events = nullptr;
};

// A whole answer of the API: an object or a List page as the API server gave it, status included.
// (clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.)
struct api_answer {  // NOLINT(bugprone-exception-escape)
  // None: had. As lookup_result's: not_found, unauthorized, forbidden, server_error, malformed,
  // too_large, timeout, unreachable.
  std::optional<core::lookup_failure> failure;
  std::string message;   // a failure: what failed, one line (the Status message when there is one)
  int http_status = 0;   // 0 when no answer came
  nlohmann::json value;  // a JSON answer
  std::string text;      // a text answer (a pod's log)

  [[nodiscard]] bool ok() const { return !failure; }
};

// How an answer is read: parsed as JSON, or kept as text (GET .../pods/NAME/log).
enum class answer_form : std::uint8_t { json, text };

// Whose rights a request to the API server uses (docs/security.md).
struct read_rights {
  // Empty: the client's own credentials (the webhook's service account, or the kubeconfig's
  // user). Else a caller's bearer token, sent as it is, so that the API server's RBAC decides.
  std::string bearer;
  // What a cache keys what these rights read by: "" for the client's own, "caller:" and a
  // SHA-256 digest of the token for a caller's (never the token itself).
  std::string key;

  [[nodiscard]] static read_rights of_caller(std::string_view token);
  [[nodiscard]] bool is_callers() const { return !bearer.empty(); }
};

// What a TokenReview said of a token.
struct token_review {
  bool authenticated = false;
  std::string username;  // when authenticated
  std::string error;     // the API's status.error, or why the review itself failed
  bool failed = false;   // the review could not be had (network, 5xx, 403): not the token's fault
};

class kube_client {
 public:
  // Builds the TLS context from the credentials' PEM text: an error names what is wrong.
  [[nodiscard]] static core::result<kube_client> create(boost::asio::any_io_executor executor,
                                                        inputs::kube_credentials credentials,
                                                        kube_client_options options = {});

  // GET `path` (e.g. "/apis/batch/v1/namespaces/team-a/jobs/x"): the object, or a failure kind
  // and message. Never throws for network or server trouble. The client may be destroyed
  // while lookups are in flight (they hold its state); the io_context must outlive them.
  // `read` makes the owner_object; none: one read as no kind.
  // With a caller's `rights`, the caller's token is sent instead of the client's own, and a 401
  // is the caller's answer (no token re-read); a client that presents a certificate of its own
  // refuses to (the API server would authenticate the certificate, not the token). The object is
  // kept without what no reading uses (metadata.managedFields, status, the last-applied
  // annotation).
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(std::string path,
                                                          std::chrono::milliseconds budget,
                                                          object_reader read,
                                                          read_rights rights) const;
  // With the client's own rights. (An overload, not a default argument: GCC 12 destroys twice a
  // defaulted argument of class type in a co_await'ed call.)
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(
      std::string path, std::chrono::milliseconds budget = core::default_lookup_budget,
      object_reader read = {}) const {
    return get(std::move(path), budget, std::move(read), read_rights{});
  }

  // GET `path` with `query` (each value percent-encoded here: labelSelector, fieldSelector,
  // limit, continue, container, tailLines) with the client's own credentials, and the answer
  // whole: a live object with its status, one page of a LIST, or a pod's log as text. The same
  // bounds as get().
  [[nodiscard]] boost::asio::awaitable<api_answer> read(
      std::string path, std::vector<std::pair<std::string, std::string>> query,
      std::chrono::milliseconds budget, answer_form form = answer_form::json) const;

  // POST /apis/authentication.k8s.io/v1/tokenreviews with the client's own credentials (RBAC:
  // create tokenreviews, as system:auth-delegator grants): who `token` is, if anyone.
  [[nodiscard]] boost::asio::awaitable<token_review> review_token(
      std::string token, std::chrono::milliseconds budget) const;

  [[nodiscard]] const inputs::kube_credentials& credentials() const;

  struct state;

 private:
  explicit kube_client(std::shared_ptr<state> s) : state_(std::move(s)) {}
  std::shared_ptr<state> state_;
};

// The API path of one object: the core group ("v1") under /api, the others under /apis;
// cluster-scoped objects (empty namespace) without /namespaces/.
[[nodiscard]] std::string api_path(std::string_view api_version, std::string_view resource,
                                   std::string_view ns, std::string_view name);

// The path a LIST reads: api_path without the name.
[[nodiscard]] std::string collection_path(std::string_view api_version, std::string_view resource,
                                          std::string_view ns);

// The resource (plural) of a kind, as the API server names the kinds trainenv reads:
// lower case plus "s" (Job → jobs, JobSet → jobsets, MPIJob → mpijobs).
[[nodiscard]] std::string resource_of_kind(std::string_view kind);

}  // namespace trainenv::server
