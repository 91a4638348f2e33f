// Deciding a pod with its owners read from the Kubernetes API (docs/contract.md §2.1):
// core::evaluate in a loop, each owner object it asks for fetched through the owner cache,
// the whole walk within one time budget. The walk suspends on the lookups; it never blocks an
// I/O thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "trainenv/core/decision.hpp"
#include "trainenv/core/engine.hpp"
#include "trainenv/core/owners.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/server/lookup_result.hpp"
#include "trainenv/server/metrics.hpp"
#include "trainenv/server/owner_cache.hpp"

namespace trainenv::server {

struct owner_lookup {
  std::optional<owner_cache> cache;        // none: no API access (every needed owner is no_access)
  std::chrono::milliseconds budget{2000};  // --lookup-timeout: for all the lookups of one pod
  // serve --owners FILE: the owners from a file instead of the API (a local server, no cluster).
  std::shared_ptr<const inputs::owner_file> file;
};

// The core's name for a lookup's failure (not ok).
[[nodiscard]] core::lookup_failure failure_of(lookup_status status);

// core::decide, with each owner fetched through `lookup` and counted in `m`.
[[nodiscard]] boost::asio::awaitable<core::decision> decide_with_owners(
    const nlohmann::json& pod, const core::policy_set& policies,
    const core::mutate_options& options, const owner_lookup& lookup, metrics& m);

}  // namespace trainenv::server
