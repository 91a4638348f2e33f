#include "trainenv/server/api_access.hpp"

namespace trainenv::server {

core::result<kube_client> make_api_client(boost::asio::io_context& ioc, server_state& state,
                                          inputs::kube_credentials credentials,
                                          std::size_t connections) {
  kube_client_options client_options;
  client_options.events = &state.metrics;
  client_options.memory = state.memory.get();
  client_options.max_connections = connections;
  return kube_client::create(ioc.get_executor(), std::move(credentials), client_options);
}

core::result<bool> connect_api(boost::asio::io_context& ioc, server_state& state,
                               const inputs::kube_credentials& own,
                               const api_access_options& options) {
  const auto cache_of = [&](kube_client client, std::size_t bytes) {
    return owner_cache(ioc.get_executor(), std::move(client),
                       {.ttl = options.cache_ttl, .max_bytes = bytes, .events = &state.metrics});
  };
  auto owners = make_api_client(ioc, state, own, options.owner_connections);
  if (!owners) return std::move(owners).take_error();
  state.owners.budget = options.lookup_budget;
  state.owners.cache.emplace(cache_of(std::move(*owners), options.cache_bytes));
  if (!options.previews) return true;

  auto reviews = make_api_client(ioc, state, own, options.review_connections);
  if (!reviews) return std::move(reviews).take_error();
  state.preview_callers.emplace(std::move(*reviews), state.metrics, preview_access::options{});
  // The API server authenticates a client certificate before a bearer token: the callers'
  // client presents none, and no token of its own.
  auto callers = own;
  callers.client_cert_pem.clear();
  callers.client_key_pem.clear();
  callers.token.clear();
  callers.token_file.clear();
  auto reads = make_api_client(ioc, state, std::move(callers), options.caller_connections);
  if (!reads) return std::move(reads).take_error();
  state.preview_owners.budget = options.lookup_budget;
  state.preview_owners.cache.emplace(cache_of(std::move(*reads), options.cache_bytes / 4));
  return true;
}

void disconnect_api(server_state& state) {
  state.owners.cache.reset();
  state.preview_owners.cache.reset();
  state.preview_callers.reset();
}

}  // namespace trainenv::server
