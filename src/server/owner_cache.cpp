#include "trainenv/server/owner_cache.hpp"

#include <exception>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

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

// Objects and remembered 404s live for different times; each list holds one kind of entry, so
// each is in the order its entries expire: the expired are freed from the fronts at each store,
// and when the cache is full the entry that would expire first goes.
enum class shelf : std::uint8_t { object, not_found };

struct entry {
  std::shared_ptr<const core::owner_object> object;  // null: a remembered failure
  core::lookup_failure failure = core::lookup_failure::not_found;
  std::string message;
  clock_type::time_point stored;
  clock_type::time_point expires;
  std::size_t bytes = 0;
  shelf on = shelf::object;
  std::list<std::string>::iterator expiry;
};

// The key: whose rights, then the path (group, version, resource, namespace, name) and the uid.
// A newline cannot occur in a path or a uid the walk asks for.
std::string key_of(const std::string& path, const std::string& uid, const read_rights& rights) {
  std::string key;
  key.reserve(rights.key.size() + path.size() + uid.size() + 2);
  key += rights.key;
  key += '\n';
  key += path;
  key += '\n';
  key += uid;
  return key;
}

std::string_view uid_of(const nlohmann::json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return {};
  const auto uid = metadata->find("uid");
  return uid != metadata->end() && uid->is_string() ? uid->get_ref<const std::string&>()
                                                    : std::string_view();
}

// A found object whose uid is not the expected one becomes uid_mismatch. Neither uid is said:
// an answer never echoes an object's uid (docs/security.md).
void check_uid(lookup_result& result, const std::string& expected_uid) {
  if (!result.ok() || expected_uid.empty()) return;
  if (uid_of(result.object->json()) == expected_uid) return;
  result.failure = core::lookup_failure::uid_mismatch;
  result.message = "its metadata.uid is not the owner reference's (the object was recreated)";
  result.object.reset();
}

// Remembered: a 404, and an object of that name under another uid (both mean the owner this
// reference names is gone, and stays gone: a uid is never reused).
bool remembered(const lookup_result& result) {
  return result.failure == core::lookup_failure::not_found ||
         result.failure == core::lookup_failure::uid_mismatch;
}

std::chrono::microseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start);
}

// What one entry costs beyond its object: the key (twice: the map and the expiry list), the map
// and list nodes, the entry itself.
constexpr std::size_t entry_overhead = 256;

}  // namespace

std::size_t approximate_bytes(const nlohmann::json& value) {
  constexpr std::size_t node = sizeof(nlohmann::json);
  constexpr std::size_t inline_chars = 15;  // libstdc++'s short-string buffer
  constexpr std::size_t map_node = 48;      // a std::map node's links and colour
  const auto string_bytes = [](std::size_t size) { return size > inline_chars ? size + 1 : 0; };
  std::size_t total = node;
  std::vector<const nlohmann::json*> pending{&value};
  while (!pending.empty()) {
    const auto* v = pending.back();
    pending.pop_back();
    if (v->is_string()) {
      total += sizeof(std::string) + string_bytes(v->get_ref<const std::string&>().size());
    } else if (v->is_object()) {
      total += 48;  // the std::map itself, on the heap
      for (auto it = v->begin(); it != v->end(); ++it) {
        total += map_node + sizeof(std::string) + string_bytes(it.key().size()) + node;
        pending.push_back(&it.value());
      }
    } else if (v->is_array()) {
      total += sizeof(std::vector<nlohmann::json>) + v->size() * node;
      for (const auto& element : *v) pending.push_back(&element);
    }
  }
  return total;
}

struct owner_cache::state {
  state(asio::any_io_executor executor, fetch_function fetch, owner_cache_options options)
      : executor(std::move(executor)), fetch(std::move(fetch)), options(std::move(options)) {}

  std::list<std::string>& list_of(shelf s) { return s == shelf::object ? objects : not_found; }

  // Frees what has expired, from the front of each list.
  void free_expired_locked(clock_type::time_point now) {
    for (auto* list : {&objects, &not_found}) {
      while (!list->empty() && entries.at(list->front()).expires <= now)
        erase_locked(list->front());
    }
  }

  // The key of the entry that expires first, of either list.
  const std::string& first_to_expire_locked() {
    if (not_found.empty()) return objects.front();
    if (objects.empty()) return not_found.front();
    return entries.at(objects.front()).expires <= entries.at(not_found.front()).expires
               ? objects.front()
               : not_found.front();
  }

  void erase_locked(const std::string& key) {
    const auto it = entries.find(key);
    total_bytes -= it->second.bytes;
    list_of(it->second.on).erase(it->second.expiry);
    entries.erase(it);
  }

  // Stores what a GET gave (an object, or a failure to remember) for its time, freeing the
  // expired entries and, beyond the byte bound, those that would expire first (counted).
  void store_locked(const std::string& key, const lookup_result& fetched) {
    const bool object = fetched.ok();
    const auto ttl = object ? options.ttl : options.not_found_ttl;
    if (ttl.count() <= 0 || options.max_bytes == 0) return;
    const auto bytes =
        entry_overhead + 2 * key.size() +
        (object ? approximate_bytes(fetched.object->json()) * 5 / 4 : fetched.message.size());
    if (bytes > options.max_bytes / 4) return;  // used once, not kept: it would flush the rest
    const auto now = clock_type::now();
    free_expired_locked(now);
    if (entries.count(key) != 0) erase_locked(key);
    while (!entries.empty() && total_bytes + bytes > options.max_bytes) {
      erase_locked(first_to_expire_locked());
      if (options.events != nullptr) options.events->count(counter::owner_cache_evictions);
    }
    const auto on = object ? shelf::object : shelf::not_found;
    auto& list = list_of(on);
    list.push_back(key);
    entry e;
    e.object = fetched.object;
    e.failure = fetched.failure.value_or(core::lookup_failure::not_found);
    e.message = fetched.message;
    e.stored = now;
    e.expires = now + ttl;
    e.bytes = bytes;
    e.on = on;
    e.expiry = std::prev(list.end());
    entries.emplace(key, std::move(e));
    total_bytes += bytes;
  }

  // The stored answer for `key`, if still fresh: an object (a hit), or a remembered failure.
  // `refresh`: an object only if read within min_refresh_interval.
  std::optional<lookup_result> hit_locked(const std::string& key, clock_type::time_point start,
                                          bool refresh) const {
    const auto it = entries.find(key);
    if (it == entries.end() || start >= it->second.expires) return std::nullopt;
    const auto& e = it->second;
    // A re-read: only what was read since the lookup began will do.
    if (refresh && (!e.object || e.stored < start)) return std::nullopt;
    lookup_result hit;
    hit.source = lookup_source::cached;
    hit.latency = since(start);
    if (e.object) {
      hit.object = e.object;
      hit.http_status = 200;
    } else {
      hit.failure = e.failure;
      hit.message = e.message;
      hit.http_status = 404;
    }
    return hit;
  }

  asio::any_io_executor executor;
  fetch_function fetch;
  owner_cache_options options;
  mutable std::mutex mutex;
  std::unordered_map<std::string, entry> entries;
  std::list<std::string> objects;    // keys of stored objects, the first to expire first
  std::list<std::string> not_found;  // keys of remembered failures, likewise
  std::size_t total_bytes = 0;
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
                                       object_reader read, read_rights rights) {
            return client.get(std::move(path), budget, std::move(read), std::move(rights));
          },
          std::move(options)) {}

asio::awaitable<lookup_result> owner_cache::get(std::string path, std::string expected_uid,
                                                std::chrono::milliseconds budget, bool refresh,
                                                object_reader read, read_rights rights) const {
  const auto s = state_;
  const auto start = clock_type::now();
  const std::string key = key_of(path, expected_uid, rights);
  if (refresh) {
    // A re-read of an object read less than min_refresh_interval ago waits for the interval to
    // pass (within its budget): a pod created right after a resize still sees the new size, and
    // pods crafted to contradict the copy cost one GET per interval, not one each.
    std::optional<clock_type::time_point> stored;
    {
      const std::lock_guard lock(s->mutex);
      if (const auto it = s->entries.find(key); it != s->entries.end() && it->second.object)
        stored = it->second.stored;
    }
    const auto allowed_at = stored ? *stored + s->options.min_refresh_interval : start;
    if (allowed_at > start) {
      asio::steady_timer wait(co_await asio::this_coro::executor,
                              std::min(allowed_at, start + budget));
      co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
      // What another lookup read meanwhile, since this one began, is fresh enough; past the
      // budget, the copy held is the answer.
      const std::lock_guard lock(s->mutex);
      const auto it = s->entries.find(key);
      if (it != s->entries.end() && it->second.object &&
          (it->second.stored >= start || clock_type::now() >= start + budget)) {
        if (auto hit = s->hit_locked(key, start, false)) co_return std::move(*hit);
      }
    }
  }
  std::shared_ptr<flight> f;
  bool leader = false;
  {
    const std::lock_guard lock(s->mutex);
    if (auto hit = s->hit_locked(key, start, refresh)) co_return std::move(*hit);
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
    fetched = co_await s->fetch(path, budget, std::move(read), std::move(rights));
  } catch (const std::exception& e) {  // out of memory and the like: waiters must still wake
    fetched = lookup_result{};
    fetched.failure = core::lookup_failure::server_error;
    fetched.message = std::string("lookup failed: ") + e.what();
  }
  check_uid(fetched, expected_uid);
  fetched.source = lookup_source::fetched;
  {
    const std::lock_guard lock(s->mutex);
    if (fetched.ok() || remembered(fetched)) s->store_locked(key, fetched);
    f->result = fetched;
    f->done = true;
    s->in_flight.erase(key);
  }
  f->ended.close();
  fetched.latency = since(start);
  co_return fetched;
}

std::optional<lookup_result> owner_cache::cached(const std::string& path,
                                                 const std::string& expected_uid,
                                                 const read_rights& rights) const {
  const auto start = clock_type::now();
  const auto key = key_of(path, expected_uid, rights);
  const std::lock_guard lock(state_->mutex);
  return state_->hit_locked(key, start, false);
}

std::size_t owner_cache::size() const {
  const std::lock_guard lock(state_->mutex);
  return state_->entries.size();
}

std::size_t owner_cache::bytes() const {
  const std::lock_guard lock(state_->mutex);
  return state_->total_bytes;
}

}  // namespace trainenv::server
