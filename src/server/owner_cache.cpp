#include "trainenv/server/owner_cache.hpp"

#include <exception>
#include <list>
#include <mutex>
#include <unordered_map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace trainenv::server {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using clock_type = std::chrono::steady_clock;

namespace {

// One GET in flight. The lookups that join it wait for `ended` to close, each within its own
// budget: a closed channel answers every receive at once, those already waiting and those not
// yet begun, so a GET that ends between a joiner's decision to wait and its wait cannot be
// missed (a timer cancelled before its wait begins would be: the joiner slept its budget).
struct flight {
  explicit flight(const asio::any_io_executor& executor) : ended(executor) {}
  asio::experimental::concurrent_channel<void(boost::system::error_code)> ended;
  bool done = false;  // with result, written under the cache's lock before `ended` closes
  lookup_result result;
};

// Entries are kept in the order they expire (every entry lives one ttl from its store), so the
// expired are freed from the front at each store, and when the cache is full the entry that
// would expire first goes.
struct entry {
  std::shared_ptr<const core::owner_object> object;
  clock_type::time_point expires;
  std::list<std::string>::iterator expiry;
};

std::string_view uid_of(const nlohmann::json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return {};
  const auto uid = metadata->find("uid");
  return uid != metadata->end() && uid->is_string() ? uid->get_ref<const std::string&>()
                                                    : std::string_view();
}

// A found object whose uid is not the expected one becomes uid_mismatch.
void check_uid(lookup_result& result, const std::string& expected_uid) {
  if (!result.ok() || expected_uid.empty()) return;
  const auto uid = uid_of(result.object->json());
  if (uid == expected_uid) return;
  result.failure = core::lookup_failure::uid_mismatch;
  result.message = "metadata.uid is " + core::quote(uid) + ", the owner reference's is " +
                   core::quote(expected_uid) + " (the object was recreated)";
  result.object.reset();
}

std::chrono::microseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start);
}

}  // namespace

struct owner_cache::state {
  state(asio::any_io_executor executor, fetch_function fetch, owner_cache_options options)
      : executor(std::move(executor)), fetch(std::move(fetch)), options(std::move(options)) {}

  // Stores `object` for one ttl, freeing the expired entries and, beyond the bound, those that
  // would expire first (counted as evictions).
  void store_locked(const std::string& key, std::shared_ptr<const core::owner_object> object) {
    if (options.ttl.count() <= 0 || options.max_entries == 0) return;
    const auto now = clock_type::now();
    while (!expiry.empty() && entries.at(expiry.front()).expires <= now) erase_first_locked();
    if (auto it = entries.find(key); it != entries.end()) {
      it->second.object = std::move(object);
      it->second.expires = now + options.ttl;
      expiry.splice(expiry.end(), expiry, it->second.expiry);
      return;
    }
    while (entries.size() >= options.max_entries) {
      erase_first_locked();
      if (options.events != nullptr) options.events->count(counter::owner_cache_evictions);
    }
    expiry.push_back(key);
    entries.emplace(key, entry{std::move(object), now + options.ttl, std::prev(expiry.end())});
  }

  void erase_first_locked() {
    entries.erase(expiry.front());
    expiry.pop_front();
  }

  // The stored object for `key` if it is still fresh.
  std::shared_ptr<const core::owner_object> find_locked(const std::string& key) const {
    const auto it = entries.find(key);
    if (it == entries.end() || clock_type::now() >= it->second.expires) return nullptr;
    return it->second.object;
  }

  // A fresh stored object as a hit. Keyed by uid, it was checked against that uid
  // when stored; keyed by path, there is no uid to check.
  std::optional<lookup_result> hit_locked(const std::string& key,
                                          clock_type::time_point start) const {
    auto object = find_locked(key);
    if (object == nullptr) return std::nullopt;
    lookup_result hit;
    hit.object = std::move(object);
    hit.http_status = 200;
    hit.source = lookup_source::cached;
    hit.latency = since(start);
    return hit;
  }

  asio::any_io_executor executor;
  fetch_function fetch;
  owner_cache_options options;
  mutable std::mutex mutex;
  std::unordered_map<std::string, entry> entries;
  std::list<std::string> expiry;  // keys, the first to expire first
  std::unordered_map<std::string, std::shared_ptr<flight>> in_flight;
};

owner_cache::owner_cache(asio::any_io_executor executor, fetch_function fetch,
                         owner_cache_options options)
    : state_(std::make_shared<state>(std::move(executor), std::move(fetch), std::move(options))) {}

owner_cache::owner_cache(asio::any_io_executor executor, kube_client client,
                         owner_cache_options options)
    : owner_cache(
          std::move(executor),
          [client = std::move(client)](std::string path, std::chrono::milliseconds budget,
                                       object_reader read) {
            return client.get(std::move(path), budget, std::move(read));
          },
          std::move(options)) {}

asio::awaitable<lookup_result> owner_cache::get(std::string path, std::string expected_uid,
                                                std::chrono::milliseconds budget, bool refresh,
                                                object_reader read) const {
  const auto s = state_;
  const auto start = clock_type::now();
  const std::string key = expected_uid.empty() ? path : expected_uid;
  std::shared_ptr<flight> f;
  bool leader = false;
  {
    const std::lock_guard lock(s->mutex);
    if (!refresh) {
      if (auto hit = s->hit_locked(key, start)) co_return std::move(*hit);
    }
    auto& slot = s->in_flight[key];
    if (!slot) {
      slot = std::make_shared<flight>(s->executor);
      leader = true;
    }
    f = slot;
  }

  if (!leader) {
    // Joined another lookup's GET: wait for it, but no longer than this lookup's own budget
    // (the GET goes on, and fills the cache for whoever asks next).
    if (s->options.before_joined_wait) s->options.before_joined_wait();
    asio::steady_timer deadline(co_await asio::this_coro::executor, budget);
    co_await (f->ended.async_receive(asio::as_tuple(asio::use_awaitable)) ||
              deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    lookup_result joined;
    {
      const std::lock_guard lock(s->mutex);  // f->result was written under it
      if (f->done) {
        joined = f->result;
      } else {
        joined.failure = core::lookup_failure::timeout;
        joined.message = "waited " + std::to_string(budget.count()) +
                         " ms, the lookup's budget, on another request's GET of the same object";
      }
    }
    joined.source = lookup_source::shared;
    joined.latency = since(start);
    co_return joined;
  }

  lookup_result fetched;
  try {
    fetched = co_await s->fetch(path, budget, std::move(read));
  } catch (const std::exception& e) {  // out of memory and the like: waiters must still wake
    fetched = lookup_result{};
    fetched.failure = core::lookup_failure::server_error;
    fetched.message = std::string("lookup failed: ") + e.what();
  }
  check_uid(fetched, expected_uid);
  fetched.source = lookup_source::fetched;
  {
    const std::lock_guard lock(s->mutex);
    if (fetched.ok()) s->store_locked(key, fetched.object);
    f->result = fetched;
    f->done = true;
    s->in_flight.erase(key);
  }
  f->ended.close();
  fetched.latency = since(start);
  co_return fetched;
}

std::optional<lookup_result> owner_cache::cached(const std::string& key) const {
  const auto start = clock_type::now();
  const std::lock_guard lock(state_->mutex);
  return state_->hit_locked(key, start);
}

std::size_t owner_cache::size() const {
  const std::lock_guard lock(state_->mutex);
  return state_->entries.size();
}

}  // namespace trainenv::server
