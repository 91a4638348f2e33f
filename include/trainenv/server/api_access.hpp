// The API clients a serving process reads the cluster with (docs/security.md), each on
// connections of its own, so that nothing queues /mutate's reads: /mutate's owners with the
// webhook's own credentials; with a previews' port, the reads made with each caller's own token
// (through a client that presents no certificate of the webhook's) and the TokenReviews that
// say who the caller is.
#pragma once

#include <chrono>
#include <cstddef>

#include <boost/asio/io_context.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/kube_credentials.hpp"
#include "trainenv/server/state.hpp"

namespace trainenv::server {

struct api_access_options {
  std::chrono::milliseconds lookup_budget{core::default_lookup_budget};  // --lookup-timeout
  std::chrono::milliseconds cache_ttl{10'000};                           // --owner-cache-ttl
  std::size_t cache_bytes = std::size_t{32} * 1024 * 1024;               // --owner-cache-bytes
  bool previews = false;                                                 // --preview-listen
  std::size_t owner_connections = 32;  // /mutate's, to the API server at once
  std::size_t caller_connections = 8;  // the previews' reads
  std::size_t review_connections = 4;  // the TokenReviews
};

// An API client on `ioc` for `credentials`, counting into state.metrics and holding its answers
// within state.memory, or why it cannot be made.
[[nodiscard]] core::result<kube_client> make_api_client(boost::asio::io_context& ioc,
                                                        server_state& state,
                                                        inputs::kube_credentials credentials,
                                                        std::size_t connections);

// Sets state.owners' cache (and, with previews, state.preview_callers and state.preview_owners)
// to read through `own`: the webhook's credentials. Call before the server starts, after
// state.memory is final.
[[nodiscard]] core::result<bool> connect_api(boost::asio::io_context& ioc, server_state& state,
                                             const inputs::kube_credentials& own,
                                             const api_access_options& options);

// Closes what connect_api opened (its pooled connections are sockets of the io_context, which
// must outlive them).
void disconnect_api(server_state& state);

}  // namespace trainenv::server
