// Owner objects by whose rights read them and by their identity (API path, which names the
// group, version, kind, namespace and name, and the uid the reference carries): a short-lived
// cache bounded in bytes in front of the API client, where concurrent lookups of one key share a
// single GET (the 1,000 pods of one job cost one call, not 1,000). A 404 is remembered briefly;
// a forced re-read of one object is made at most once per interval (docs/owner-lookup.md,
// docs/security.md).
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
  // How long a 404 (or an object whose uid is not the reference's) is remembered: a flood of pods
  // naming an owner that is gone costs one GET per interval, not one per pod. Keyed by the uid
  // too, so an owner created later (under a new uid) is never hidden by it.
  std::chrono::milliseconds not_found_ttl{2'000};
  // A stored object the pod contradicts is read again (docs/contract.md §2.1), but one object at
  // most once per this interval: a re-read asked for sooner waits for it (within its budget),
  // so pods crafted to contradict the copy cost one GET per interval, not one each.
  std::chrono::milliseconds min_refresh_interval{500};
  // The bytes the stored objects take (an estimate of their JSON in memory and what was read of
  // them); beyond it the entries that would expire first go. An object larger than a quarter
  // of it is used but not stored. ~1,000 jobs starting within one ttl fit: a Job is ~10 KiB in
  // memory, a JobSet with its templates some tens (serve --owner-cache-bytes).
  std::size_t max_bytes = std::size_t{32} * 1024 * 1024;
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
  // One GET of an API path within a time budget, with whose rights; kube_client::get, or a
  // stand-in in tests.
  using fetch_function = std::function<boost::asio::awaitable<lookup_result>(
      std::string path, std::chrono::milliseconds budget, object_reader read, read_rights rights)>;

  owner_cache(boost::asio::any_io_executor executor, fetch_function fetch,
              owner_cache_options options = {});
  // Fetches through `client`.
  owner_cache(boost::asio::any_io_executor executor, kube_client client,
              owner_cache_options options = {});

  // The object at `path`, read with `rights`. An object whose metadata.uid is not
  // `expected_uid` is a uid_mismatch (a recreated object of the same name is not the owner); an
  // empty `expected_uid` is checked against nothing (a runtimeRef's object). What is stored is
  // found again only under the same rights, path and uid: a caller's read never answers the
  // webhook's, nor a pod of one namespace another's. A lookup that joins another's GET waits for
  // it at most its own `budget`, then answers timeout (the GET goes on, and fills the cache).
  // `refresh`: not from what is stored (the copy held is contradicted): read again, once
  // min_refresh_interval has passed since it was read (waited for within `budget`; past it, the
  // copy held is the answer); a GET under way is joined, and what it reads is stored. `read`
  // makes the object stored from the JSON fetched (see object_reader); a lookup that joins
  // another's GET gets the object that one's reader made, as the same path is the same kind.
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(std::string path,
                                                          std::string expected_uid,
                                                          std::chrono::milliseconds budget,
                                                          bool refresh, object_reader read,
                                                          read_rights rights) const;
  // With the webhook's own rights. (An overload, not a default argument: GCC 12 destroys twice
  // a defaulted argument of class type in a co_await'ed call.)
  [[nodiscard]] boost::asio::awaitable<lookup_result> get(
      std::string path, std::string expected_uid,
      std::chrono::milliseconds budget = core::default_lookup_budget, bool refresh = false,
      object_reader read = {}) const {
    return get(std::move(path), std::move(expected_uid), budget, refresh, std::move(read),
               read_rights{});
  }

  // What get() would answer from what is stored, without waiting (a hit, or a remembered 404);
  // nullopt when only get() can answer.
  [[nodiscard]] std::optional<lookup_result> cached(const std::string& path,
                                                    const std::string& expected_uid,
                                                    const read_rights& rights = {}) const;

  [[nodiscard]] std::size_t size() const;   // entries stored now, objects and 404s
  [[nodiscard]] std::size_t bytes() const;  // what they take, as estimated

  struct state;

 private:
  std::shared_ptr<state> state_;
};

// The bytes `value` takes in memory as nlohmann builds it, estimated from its shape: a node is
// 16 bytes, a string its characters past the 15 kept inline, an object's member a map node and
// its key, an array its elements.
[[nodiscard]] std::size_t approximate_bytes(const nlohmann::json& value);

}  // namespace trainenv::server
