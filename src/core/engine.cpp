// Bytes are decoded elsewhere; here the data flow of one pod: recognise -> select a policy ->
// check the pod's shape -> the counts its owners give -> topology -> render -> diff. Each step
// that needs an owner object the shell has not fetched yet names it instead of answering.
#include "trainenv/core/engine.hpp"

#include "trainenv/core/diff.hpp"
#include "trainenv/core/keys.hpp"
#include "trainenv/core/owner_walk.hpp"
#include "trainenv/core/pod_shape.hpp"
#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/render.hpp"
#include "trainenv/core/selection.hpp"
#include "trainenv/core/topology.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

decision deny(std::string message, std::string policy = {}) {
  decision d;
  d.allowed = false;
  d.message = std::move(message);
  d.policy = std::move(policy);
  return d;
}

decision pass(std::string why) {
  decision d;
  d.message = std::move(why);
  return d;
}

// An explicit count annotation wins (docs/contract.md §2.1); when an owner was read anyway (to
// recognise the pod or find its framework) and says otherwise, the user hears about it.
void add_disagreements(const pod_view& pod, const policy& p, const owner_values& owners,
                       const owner_kind_set& kinds, const topology& t, decision& d) {
  if (!has_explicit_counts(pod) || owners.all().empty()) return;
  const auto found = counts_from_owners(pod, t.role, owners, kinds);
  if (needed(found) != nullptr) return;  // not read: nothing to compare with
  const auto& read = std::get<result<std::optional<owner_counts>>>(found);
  if (!read || !*read) return;
  const auto& counts = **read;
  if (pod.annotation(keys::num_nodes) != nullptr) {
    const auto nodes = owner_nodes(counts, p, t.role);
    if (nodes != t.num_nodes) {
      d.warnings.push_back(make_warning(
          "trainenv: kept annotation " + std::string(keys::num_nodes) + "=" +
          std::to_string(t.num_nodes) + "; " + counts.owner + " runs " + std::to_string(nodes)));
    }
  }
  if (pod.annotation(keys::replicas) != nullptr) {
    for (const auto& [role, count] : t.replicas) {
      const auto* r = counts.find(role);
      if (r != nullptr && r->pods != count) {
        d.warnings.push_back(make_warning(
            "trainenv: kept annotation " + std::string(keys::replicas) + " " + role + "=" +
            std::to_string(count) + "; " + counts.owner + " runs " + std::to_string(r->pods)));
      }
    }
  }
}

}  // namespace

decision owner_chain_too_long(const owner_ref& last) {
  return deny("trainenv: the pod's owners took more than " + std::to_string(max_owner_fetches) +
              " reads to size it (the last: " + last.display() + "); set annotation " +
              std::string(keys::num_nodes) + " and " + std::string(keys::policy));
}

owner_step<decision> evaluate(const json& pod, const policy_set& policies,
                              const owner_values& owners, const mutate_options& options) {
  if (!pod.is_object()) return deny("trainenv: the object is not a Pod (expected a JSON object)");
  const pod_view view(pod);
  const auto& kinds = policies.owner_kinds();

  const auto recognised = recognise(view, owners);
  if (const auto* ref = needed(recognised)) return *ref;
  const auto& verdict = std::get<recognition>(recognised);
  switch (verdict.kind) {
    case recognition::verdict::not_training:
      return pass(verdict.reason);
    case recognition::verdict::unknown: {
      // Recognising fails open: a pod not known to be ours is not ours to block.
      auto d = pass(verdict.reason);
      d.warnings.push_back(make_warning(verdict.reason));
      d.unrecognised = true;
      return d;
    }
    case recognition::verdict::training:
    case recognition::verdict::through_job:
      break;
  }
  if (const auto* inject = view.annotation(keys::inject); inject != nullptr && *inject == "false") {
    return pass("opted out: annotation " + std::string(keys::inject) + " is \"false\"");
  }

  // Trainer's layout: only the runtime names the framework.
  std::optional<framework_found> runtime;
  if (verdict.kind == recognition::verdict::through_job && options.forced_policy.empty() &&
      view.annotation(keys::policy) == nullptr && view.label(keys::framework) == nullptr) {
    const auto found = framework_from_runtime(view, *verdict.job, owners, kinds);
    if (const auto* ref = needed(found)) return *ref;
    const auto& framework = std::get<result<runtime_framework>>(found);
    if (!framework) return deny(framework.message());
    if (framework->framework) runtime = framework_found{*framework->framework, framework->source};
  }
  const auto selected =
      select_policy(view, policies, options.forced_policy, runtime ? &*runtime : nullptr);
  if (selected.chosen == nullptr) return deny(selected.violation);
  const policy& p = *selected.chosen;

  std::size_t target = 0;
  if (auto problem = check_pod_shape(view, p, target); !problem.empty())
    return deny(std::move(problem), p.name);

  // The counts the owners give, when the annotations leave them open and the policy uses them.
  std::optional<owner_counts> counts;
  if (!has_explicit_counts(view) && uses_counts(p)) {
    const auto found = counts_from_owners(view, pod_role(view), owners, kinds);
    if (const auto* ref = needed(found)) return *ref;
    const auto& read = std::get<result<std::optional<owner_counts>>>(found);
    if (!read) {
      // Sizing fails closed: a silently wrong count is worse than a retried pod creation.
      return deny("trainenv: cannot read the pod counts: " + read.message() + "; set annotation " +
                      std::string(keys::num_nodes) + " (or " + std::string(keys::replicas) +
                      ") on the pod template to skip the lookup",
                  p.name);
    }
    counts = *read;
  }

  auto topo = resolve_topology(view, p, target, counts ? &*counts : nullptr);
  if (!topo) return deny(topo.message(), p.name);
  auto want = render(p, *topo, view);
  if (!want) return deny(want.message(), p.name);
  if (!want->applies) {
    return pass("policy " + quote(p.name) + " does not apply: its condition " +
                quote(p.when_source) + " is false");
  }
  auto d = build_patch(pod, *want, p.name);
  d.sources = std::move(topo->sources);
  if (runtime) d.sources.push_back({"framework", runtime->value, runtime->source});
  add_disagreements(view, p, owners, kinds, *topo, d);
  return d;
}

decision mutate_pod(const json& pod, const policy_set& policies, const mutate_options& options) {
  return decide(pod, policies, options, [](const owner_ref& ref, owner_values& owners) {
    owners.add_failure(ref, lookup_failure::no_access, "no API access (this path reads no owners)");
  });
}

decision mutate(const admission_request& request, const policy_set& policies,
                const mutate_options& options) {
  if (!request.is_pod_create()) {
    return pass("not a pod CREATE: " + request.operation + " of " + request.resource);
  }
  return mutate_pod(request.object, policies, options);
}

}  // namespace trainenv::core
