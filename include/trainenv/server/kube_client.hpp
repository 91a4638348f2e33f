// A small Kubernetes API client for owner lookups: one GET of one object, over kept-alive TLS
// connections (the server's certificate checked against the cluster CA and host name), with
// the bearer token re-read when its file changes and after a 401. No list, no watch.
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

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/kube_credentials.hpp"
#include "trainenv/server/lookup_result.hpp"
#include "trainenv/server/metrics.hpp"

namespace trainenv::server {

struct kube_client_options {
  // Larger answers are refused (when announced, without reading them). A JobSet or Trainer
  // runtime with big pod templates is tens of KiB; the API server's own limit is 3 MiB.
  std::size_t max_response_bytes = std::size_t{4} * 1024 * 1024;
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
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(
      std::string path, std::chrono::milliseconds budget = std::chrono::milliseconds(2000),
      object_reader read = {}) const;

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

// The resource (plural) of a kind, as the API server names the kinds trainenv reads:
// lower case plus "s" (Job → jobs, JobSet → jobsets, MPIJob → mpijobs).
[[nodiscard]] std::string resource_of_kind(std::string_view kind);

}  // namespace trainenv::server
