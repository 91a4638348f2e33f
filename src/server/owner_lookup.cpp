// The shell's half of the owner walk: the core names an owner, the cache fetches it, the core
// is asked again. One deadline for the whole walk, so a pod with four owners to read waits no
// longer than one with one.
#include "trainenv/server/owner_lookup.hpp"

namespace trainenv::server {
namespace {

owner_lookup_label label_of(const lookup_result& r) {
  if (r.ok()) {
    switch (r.source) {
      case lookup_source::cached:
        return owner_lookup_label::hit;
      case lookup_source::shared:
        return owner_lookup_label::shared;
      case lookup_source::fetched:
        break;
    }
    return owner_lookup_label::ok;
  }
  // lookup_status and owner_lookup_label name the failures in the same order.
  return static_cast<owner_lookup_label>(static_cast<std::size_t>(owner_lookup_label::ok) +
                                         static_cast<std::size_t>(r.status));
}

}  // namespace

core::lookup_failure failure_of(lookup_status status) {
  using core::lookup_failure;
  switch (status) {
    case lookup_status::not_found:
      return lookup_failure::not_found;
    case lookup_status::unauthorized:
      return lookup_failure::unauthorized;
    case lookup_status::forbidden:
      return lookup_failure::forbidden;
    case lookup_status::server_error:
      return lookup_failure::server_error;
    case lookup_status::malformed:
      return lookup_failure::malformed;
    case lookup_status::too_large:
      return lookup_failure::too_large;
    case lookup_status::timeout:
      return lookup_failure::timeout;
    case lookup_status::unreachable:
      return lookup_failure::unreachable;
    case lookup_status::uid_mismatch:
      return lookup_failure::uid_mismatch;
    case lookup_status::ok:
      break;
  }
  return lookup_failure::server_error;  // not reached: ok is no failure
}

boost::asio::awaitable<core::decision> decide_with_owners(const nlohmann::json& pod,
                                                          const core::policy_set& policies,
                                                          const core::mutate_options& options,
                                                          const owner_lookup& lookup, metrics& m) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + lookup.budget;
  // Owners in the cache are handed to the walk as it asks, so a pod whose owners are all
  // cached is decided in one pass; the loop below fetches the rest one at a time.
  core::owner_values::at_hand_function at_hand;
  if (lookup.cache && !lookup.file) {
    at_hand = [&](const core::owner_ref& ref) -> std::shared_ptr<const nlohmann::json> {
      const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
      if (kind == nullptr) return nullptr;
      auto hit = lookup.cache->cached(ref.uid.empty() ? kind->api_path(ref) : ref.uid);
      if (!hit) return nullptr;
      m.on_owner_lookup(kind->name, owner_lookup_label::hit, hit->latency);
      return std::move(hit->object);
    };
  }
  core::owner_values owners(std::move(at_hand));
  for (int fetches = 0;; ++fetches) {
    auto step = core::evaluate(pod, policies, owners, options);
    if (auto* d = std::get_if<core::decision>(&step)) co_return std::move(*d);
    auto ref = std::get<core::owner_ref>(std::move(step));
    if (fetches == core::max_owner_fetches) co_return core::owner_chain_too_long(ref);

    const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
    const std::string kind_label = kind != nullptr ? kind->name : "unknown";
    if (kind == nullptr) {
      // The core asks only for kinds it knows; a stale policy set is the one way here.
      m.on_owner_lookup(kind_label, owner_lookup_label::not_found, {});
      owners.add_failure(std::move(ref), core::lookup_failure::not_found, "not a known owner kind");
      continue;
    }
    if (lookup.file) {
      lookup.file->answer(ref, owners);
      const auto* fetched = owners.find(ref);
      auto label = owner_lookup_label::ok;
      if (fetched != nullptr && fetched->failure) {
        label = *fetched->failure == core::lookup_failure::uid_mismatch
                    ? owner_lookup_label::uid_mismatch
                    : owner_lookup_label::not_found;
      }
      m.on_owner_lookup(kind_label, label, {});
      continue;
    }
    if (!lookup.cache) {
      m.on_owner_lookup(kind_label, owner_lookup_label::no_access, {});
      owners.add_failure(std::move(ref), core::lookup_failure::no_access, lookup.no_access);
      continue;
    }
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (remaining.count() <= 0) {
      m.on_owner_lookup(kind_label, owner_lookup_label::timeout, {});
      owners.add_failure(std::move(ref), core::lookup_failure::timeout,
                         "the lookup budget of " + std::to_string(lookup.budget.count()) +
                             " ms was spent on the pod's other owners");
      continue;
    }
    auto found = co_await lookup.cache->get(kind->api_path(ref), ref.uid, remaining);
    m.on_owner_lookup(kind_label, label_of(found), found.latency);
    if (found.ok()) {
      owners.add(std::move(ref), std::move(found.object));
    } else {
      owners.add_failure(std::move(ref), failure_of(found.status), std::move(found.message));
    }
  }
}

boost::asio::awaitable<std::vector<nlohmann::json>> fetch_objects(
    std::vector<core::owner_ref> refs, const core::policy_set& policies,
    const owner_lookup& lookup) {
  std::vector<nlohmann::json> out;
  const auto deadline = std::chrono::steady_clock::now() + lookup.budget;
  for (const auto& ref : refs) {
    if (lookup.file) {
      if (const auto* object = lookup.file->find(ref)) out.push_back(*object);
      continue;
    }
    const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
    if (kind == nullptr || !lookup.cache) continue;
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) break;
    auto found = co_await lookup.cache->get(kind->api_path(ref), ref.uid, remaining);
    if (found.ok()) out.push_back(*found.object);
  }
  co_return out;
}

}  // namespace trainenv::server
