// The shell's half of the owner walk: the core names an owner, the cache fetches it, the core
// is asked again. One deadline for the whole walk, so a pod with four owners to read waits no
// longer than one with one.
#include "trainenv/server/owner_lookup.hpp"

namespace trainenv::server {
namespace {

// Makes a fetched object read as `kind`, the object `ref` names. `kind` lives in the policy set
// the lookup's caller holds while it awaits the GET, which is when this runs.
object_reader read_as(const core::owner_kind& kind, core::owner_ref ref) {
  return [&kind, ref = std::move(ref)](nlohmann::json value) {
    return std::make_shared<const core::owner_object>(std::move(value), kind, ref);
  };
}

}  // namespace

boost::asio::awaitable<core::decision> decide_with_owners(const core::subject& what,
                                                          const core::policy_set& policies,
                                                          const core::mutate_options& options,
                                                          const owner_lookup& lookup, metrics& m,
                                                          const read_rights& rights) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + lookup.budget;
  // Owners in the cache are handed to the walk as it asks, so a pod whose owners are all
  // cached is decided in one pass; the loop below fetches the rest one at a time. The hits are
  // counted from what the walk took (owner_fetch::cached), once it has decided.
  core::owner_values::at_hand_function at_hand;
  if (lookup.cache && !lookup.file) {
    at_hand = [&](const core::owner_ref& ref) -> std::shared_ptr<const core::owner_object> {
      const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
      if (kind == nullptr) return nullptr;
      auto hit = lookup.cache->cached(kind->api_path(ref), ref.uid, rights);
      return hit ? std::move(hit->object) : nullptr;
    };
  }
  core::owner_values owners(std::move(at_hand));
  const auto count_hits = [&] {
    for (const auto& f : owners.all()) {
      if (!f.cached) continue;
      const auto* kind = policies.owner_kinds().find(f.ref.api_version, f.ref.kind);
      m.on_owner_lookup(kind != nullptr ? kind->name : "unknown", lookup_source::cached,
                        std::nullopt, {});
    }
  };
  for (int fetches = 0;; ++fetches) {
    auto step = core::evaluate(what, policies, owners, options);
    if (auto* d = std::get_if<core::decision>(&step)) {
      count_hits();
      co_return std::move(*d);
    }
    auto ref = std::get<core::owner_ref>(std::move(step));
    if (fetches == core::max_owner_fetches) {
      count_hits();
      co_return core::owner_chain_too_long(ref);
    }

    const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
    const std::string kind_label = kind != nullptr ? kind->name : "unknown";
    if (kind == nullptr) {
      // The core asks only for kinds it knows; a stale policy set is the one way here.
      m.on_owner_lookup(kind_label, lookup_source::fetched, core::lookup_failure::not_found, {});
      owners.add_failure(std::move(ref), core::lookup_failure::not_found, "not a known owner kind");
      continue;
    }
    if (lookup.file) {
      lookup.file->answer(ref, owners);
      const auto* fetched = owners.find(ref);
      m.on_owner_lookup(
          kind_label, lookup_source::fetched,
          fetched != nullptr ? fetched->failure : std::optional(core::lookup_failure::not_found),
          {});
      continue;
    }
    if (!lookup.cache) {
      m.on_owner_lookup(kind_label, lookup_source::fetched, core::lookup_failure::no_access, {});
      owners.add_failure(std::move(ref), core::lookup_failure::no_access, lookup.no_access);
      continue;
    }
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (remaining.count() <= 0) {
      m.on_owner_lookup(kind_label, lookup_source::fetched, core::lookup_failure::timeout, {});
      owners.add_failure(std::move(ref), core::lookup_failure::timeout,
                         "the lookup budget of " + std::to_string(lookup.budget.count()) +
                             " ms was spent on the pod's other owners");
      continue;
    }
    auto found = co_await lookup.cache->get(kind->api_path(ref), ref.uid, remaining, ref.fresh,
                                            read_as(*kind, ref), rights);
    m.on_owner_lookup(kind_label, found.source, found.failure, found.latency);
    if (found.failure) {
      owners.add_failure(std::move(ref), *found.failure, std::move(found.message));
    } else {
      owners.add(std::move(ref), std::move(found.object));
    }
  }
}

boost::asio::awaitable<core::result<inputs::preview_answer>> preview_with_owners(
    std::string_view text, const core::policy_set& policies, const core::mutate_options& options,
    const owner_lookup& lookup, metrics& m, const read_rights& rights) {
  auto input = inputs::read_preview(text);
  if (!input) co_return std::move(input).take_error();
  const core::subject what{input->view, input->review()};
  auto d = co_await decide_with_owners(what, policies, options, lookup, m, rights);
  co_return inputs::answer_preview(std::move(*input), std::move(d));
}

boost::asio::awaitable<std::vector<nlohmann::json>> fetch_objects(std::vector<core::owner_ref> refs,
                                                                  const core::policy_set& policies,
                                                                  const owner_lookup& lookup,
                                                                  const read_rights& rights) {
  std::vector<nlohmann::json> out;
  const auto deadline = std::chrono::steady_clock::now() + lookup.budget;
  for (const auto& ref : refs) {
    // Only what the walk itself may read: a DNS name, in the job's own namespace.
    if (core::unreadable_reference(ref, policies.owner_kinds(), ref.namespace_name)) continue;
    if (lookup.file) {
      if (const auto* object = lookup.file->find(ref)) out.push_back(*object);
      continue;
    }
    const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
    if (kind == nullptr || !lookup.cache) continue;
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) break;
    auto found = co_await lookup.cache->get(kind->api_path(ref), ref.uid, remaining, false,
                                            read_as(*kind, ref), rights);
    if (found.ok()) out.push_back(found.object->json());
  }
  co_return out;
}

}  // namespace trainenv::server
