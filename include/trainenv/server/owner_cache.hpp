// Owner objects by key (the owner's uid when the reference gives one, else its API path): a
// short-lived, size-bounded cache in front of the API client, where concurrent lookups of one
// key share a single GET (the 1,000 pods of one job cost one call, not 1,000). Only objects
// are cached; failures are not (see docs/owner-lookup.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/lookup_result.hpp"
#include "trainenv/server/metrics.hpp"

namespace trainenv::server {

struct owner_cache_options {
  // Long enough for a controller's burst of pod creations (the Job controller's slow start
  // creates a 1,000-pod job in seconds), short enough that a rescaled owner is seen soon.
  std::chrono::milliseconds ttl{10'000};
  // Enough for the owners of ~1,000 jobs starting within one ttl, their pods interleaved (a
  // Trainer job has three objects of its own and shares its runtime); beyond it the entries that
  // would expire first go. A Job is ~10 KiB in memory, a JobSet with its templates some tens:
  // a full cache is ~100 MiB at the most, and entries are freed when they expire, not only when
  // touched (serve --owner-cache-entries; docs/owner-lookup.md).
  std::size_t max_entries = 4096;
  // A test seam: runs between a joining lookup's decision to wait and its wait (the window in
  // which the GET it joined may end); production leaves it empty.
  std::function<void()> before_joined_wait{};
  // Where evictions are counted (the server's metrics, which must outlive the cache); none: not
  // counted.
  metrics* events = nullptr;
};

// Lookups are counted by whoever asks for them (metrics' on_owner_lookup, by owner kind, from
// each result's source and failure); the cache counts only what no result shows.

class owner_cache {
 public:
  // One GET of an API path within a time budget; kube_client::get, or a stand-in in tests.
  using fetch_function = std::function<boost::asio::awaitable<lookup_result>(
      std::string path, std::chrono::milliseconds budget, object_reader read)>;

  owner_cache(boost::asio::any_io_executor executor, fetch_function fetch,
              owner_cache_options options = {});
  // Fetches through `client`.
  owner_cache(boost::asio::any_io_executor executor, kube_client client,
              owner_cache_options options = {});

  // The object at `path`. With `expected_uid`, it is the key, and an object whose
  // metadata.uid differs is a uid_mismatch (a recreated object of the same name is not the
  // owner). A lookup that joins another's GET waits for it at most its own `budget`, then
  // answers timeout (the GET goes on, and fills the cache). `refresh`: not from what is stored
  // (the copy held is contradicted); a GET under way is joined, and what it reads is stored.
  // `read` makes the object stored from the JSON fetched (see object_reader); a lookup that joins
  // another's GET gets the object that one's reader made, as the same path is the same kind.
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(
      std::string path, std::string expected_uid,
      std::chrono::milliseconds budget = std::chrono::milliseconds(2000), bool refresh = false,
      object_reader read = {}) const;

  // The stored object under `key` (the owner's uid when the reference names one, else its API
  // path: what get() keys by) if it is still fresh, without waiting (a hit); nullopt when only
  // get() can answer.
  [[nodiscard]] std::optional<lookup_result> cached(const std::string& key) const;

  [[nodiscard]] std::size_t size() const;  // objects stored now

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace trainenv::server
