// Deciding a pod with its owners read from the Kubernetes API (docs/contract.md §2.1):
// core::evaluate in a loop, each owner object it asks for fetched through the owner cache,
// the whole walk within one time budget. The walk suspends on the lookups; it never blocks an
// I/O thread.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/preview.hpp"
#include "trainenv/server/lookup_result.hpp"
#include "trainenv/server/metrics.hpp"
#include "trainenv/server/owner_cache.hpp"

namespace trainenv::server {

// The webhook's own rights: the client's credentials (a named object, for the defaults below,
// which are taken by reference).
inline const read_rights own_rights{};

struct owner_lookup {
  std::optional<owner_cache> cache;  // none: no API access (every needed owner is no_access)
  std::chrono::milliseconds budget{
      core::default_lookup_budget};  // --lookup-timeout: for all the lookups of one pod
  // serve --owners FILE: the owners from a file instead of the API (a local server, no cluster).
  std::shared_ptr<const inputs::owner_file> file;
  // With neither: why a needed owner cannot be read, in the words of the caller's flags.
  std::string no_access = "the webhook has no API access (serve --kubeconfig, or run in a cluster)";
};

// core::decide, with each owner fetched through `lookup` with `rights` (the webhook's own, or a
// preview's caller's) and counted in `m`. Every argument is taken by reference and must outlive
// the coroutine: named objects of the caller's, not temporaries (a coroutine spawned to run later
// would read them after they are gone).
[[nodiscard]] boost::asio::awaitable<core::decision> decide_with_owners(
    const core::subject& what, const core::policy_set& policies,
    const core::mutate_options& options, const owner_lookup& lookup, metrics& m,
    const read_rights& rights = own_rights);

// The one preview of a pod for the edges (POST /preview, `trainenv preview`): read the Pod or
// AdmissionReview in `text`, decide it with owners read through `lookup`, answer with the
// patched pod. An error: the input itself is unusable (not JSON or YAML, not a Pod or a review).
[[nodiscard]] boost::asio::awaitable<core::result<inputs::preview_answer>> preview_with_owners(
    std::string_view text, const core::policy_set& policies, const core::mutate_options& options,
    const owner_lookup& lookup, metrics& m, const read_rights& rights = own_rights);

// `work`'s result, stored in `out` (co_spawn's completion needs a default-constructible value;
// a result<T> has none).
template <class T>
boost::asio::awaitable<void> store_result(boost::asio::awaitable<T> work, std::optional<T>& out) {
  out.emplace(co_await std::move(work));
}

// Runs `work` on `ioc` until it ends, and returns its result (or throws its exception): the CLI
// uses the server's own driver this way, on an io_context of its own. `ioc` may have run before
// (a run that ended leaves it stopped until restarted).
template <class T>
T run_to_end(boost::asio::io_context& ioc, boost::asio::awaitable<T> work) {
  std::optional<T> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(ioc, store_result(std::move(work), out),
                        [&](const std::exception_ptr& e) { failure = e; });
  ioc.restart();
  ioc.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

// The objects `refs` name (a TrainJob's runtime, for a job preview), as the webhook reads owners:
// from the --owners file, else through the cache within the lookup budget, with `rights`. One
// that cannot be had (or may not be read: core::unreadable_reference) is left out; the caller
// names what is missing.
[[nodiscard]] boost::asio::awaitable<std::vector<nlohmann::json>> fetch_objects(
    std::vector<core::owner_ref> refs, const core::policy_set& policies, const owner_lookup& lookup,
    const read_rights& rights = own_rights);

}  // namespace trainenv::server
