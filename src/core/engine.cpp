// Bytes are decoded elsewhere; here the data flow of one pod: recognise -> its runtime (Trainer)
// -> select a policy -> check the pod's shape -> its place in the job's layout (its owners, when
// the pod alone cannot tell) -> render -> diff. Each step
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

decision deny(std::string message, std::string policy = {}, int code = 400) {
  decision d;
  d.allowed = false;
  d.message = std::move(message);
  d.policy = std::move(policy);
  d.code = code;
  return d;
}

decision deny(const error& e, std::string policy = {}) {
  return deny(e.message, std::move(policy), e.code);
}

decision pass(std::string why) {
  decision d;
  d.message = std::move(why);
  return d;
}

// Allowed unchanged, and said so to the user: `why` is the warning too.
decision pass_with_warning(const std::string& why) {
  auto d = pass(why);
  d.warnings.push_back(make_warning(why));
  return d;
}

// An explicit count annotation wins (docs/contract.md §2.1); when the owners were read anyway and
// say otherwise, the user hears about it.
void add_disagreements(const pod_view& pod, const owner_counts& owners, const topology& t,
                       decision& d) {
  if (pod.annotation(keys::num_nodes) != nullptr) {
    // The owner's own count of the layout's nodes, before the annotation.
    std::int64_t nodes = 0;
    for (const auto r : t.layout.nodes) {
      if (const auto* counted = owners.find(t.layout.roles[r].name)) nodes += counted->pods;
    }
    if (nodes != t.num_nodes) {
      d.warnings.push_back(make_warning(
          "trainenv: kept annotation " + std::string(keys::num_nodes) + "=" +
          std::to_string(t.num_nodes) + "; " + owners.owner + " runs " + std::to_string(nodes)));
    }
  }
  if (const auto* given = pod.annotation(keys::replicas)) {
    auto parsed = parse_replicas(*given);
    if (!parsed) return;
    for (const auto& [role, count] : *parsed) {
      const auto* r = owners.find(role);
      if (r != nullptr && r->pods != count) {
        d.warnings.push_back(make_warning(
            "trainenv: kept annotation " + std::string(keys::replicas) + " " + role + "=" +
            std::to_string(count) + "; " + owners.owner + " runs " + std::to_string(r->pods)));
      }
    }
  }
}

// The pod's place in its job, and the owner that gave its layout if one was read.
struct placement {
  result<topology> topo;
  std::optional<owner_counts> owners;
};

// From the pod alone when its annotations and labels tell all that the policy uses for it (no
// API call); else from its owners, asking for the next one to read. An owner already at hand
// (read to recognise the pod, or cached) is always used.
owner_step<placement> place(const pod_view& view, const policy& p, std::size_t target,
                            const owner_values& owners, const owner_kind_set& kinds,
                            const trainer_settings* trainer) {
  topology_sources src;
  src.kinds = &kinds;
  src.trainer = trainer;
  src.has_owner = has_controller(view);
  if (!src.has_owner || !uses_counts(p))
    return placement{resolve_topology(view, p, target, src), std::nullopt};

  auto found = counts_from_owners(view, pod_role(view), owners, kinds);
  auto* read = std::get_if<result<std::optional<owner_counts>>>(&found);
  if (read != nullptr && *read && **read) {
    placement out{error{}, std::move(***read)};
    src.owners = &*out.owners;
    out.topo = resolve_topology(view, p, target, src);
    return out;
  }
  // Not read (or not readable): the pod alone, if it tells all this pod needs. What the pod
  // itself says wrong (a bad annotation) is its own violation, owners or not.
  auto alone = resolve_topology(view, p, target, src);
  if (!alone) return placement{std::move(alone), std::nullopt};
  const auto used = p.variables_used_for(alone->role, alone->training_role);
  if ((alone->owner_open & used) == 0) return placement{std::move(alone), std::nullopt};
  if (const auto* ref = needed(found)) return *ref;
  if (read != nullptr && !*read) {
    // Sizing fails closed: a silently wrong count is worse than a retried pod creation.
    return placement{
        error{"trainenv: cannot read the pod counts: " + read->message() + "; set annotation " +
                  std::string(keys::num_nodes) + " (or " + std::string(keys::replicas) +
                  ") on the pod template to skip the lookup",
              read->code()},
        std::nullopt};
  }
  return placement{std::move(alone), std::nullopt};  // no owner after all: its own answer
}

}  // namespace

decision owner_chain_too_long(const owner_ref& last) {
  return deny("trainenv: the pod's owners took more than " + std::to_string(max_owner_fetches) +
              " reads to size it (the last: " + last.display() + "); set annotation " +
              std::string(keys::num_nodes) + " and " + std::string(keys::policy));
}

owner_step<decision> evaluate(const pod_view& view, const policy_set& policies,
                              const owner_values& owners, const mutate_options& options) {
  if (!view.json().is_object())
    return deny("trainenv: the object is not a Pod (expected a JSON object)");
  const auto& kinds = policies.owner_kinds();

  const auto recognised = recognise(view, owners);
  if (const auto* ref = needed(recognised)) return *ref;
  const auto& verdict = std::get<recognition>(recognised);
  switch (verdict.kind) {
    case recognition::verdict::not_training:
      return pass(verdict.reason);
    case recognition::verdict::unknown: {
      // Recognising fails open: a pod not known to be ours is not ours to block.
      auto d = pass_with_warning(verdict.reason);
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
  if (const auto* wired = wired_owner(view, kinds)) {
    return pass_with_warning("trainenv: passed unchanged: the pod's " + wired->kind + " (" +
                             wired->group + ") is wired by " + wired->wired_by);
  }

  // Trainer's layout: the runtime names the framework and the MPI settings.
  std::optional<trainer_settings> trainer;
  if (verdict.kind == recognition::verdict::through_job) {
    const auto found = trainer_runtime(view, *verdict.job, owners, kinds);
    if (const auto* ref = needed(found)) return *ref;
    const auto& settings = std::get<result<trainer_settings>>(found);
    if (!settings) return deny(error{settings.message(), settings.code()});
    if (settings->found) trainer = *settings;
  }
  const auto selected = select_policy(view, policies, options.forced_policy,
                                      trainer ? &*trainer : nullptr, pod_owner_kind(view, kinds));
  if (!selected.pass.empty()) {
    auto d = pass_with_warning(selected.pass);
    d.unknown_framework = true;
    return d;
  }
  if (selected.chosen == nullptr) return deny(selected.violation);
  const policy& p = *selected.chosen;

  std::size_t target = 0;
  if (auto problem = check_pod_shape(view, p, target); !problem.empty())
    return deny(std::move(problem), p.name);

  const auto placed = place(view, p, target, owners, kinds, trainer ? &*trainer : nullptr);
  if (const auto* ref = needed(placed)) return *ref;
  const auto& [topo, layout_owner] = std::get<placement>(placed);
  if (!topo) return deny(error{topo.message(), topo.code()}, p.name);
  auto want = render(p, *topo, view);
  if (!want) return deny(want.message(), p.name);
  if (!want->applies) {
    return pass("policy " + quote(p.name) + " does not apply: its condition " +
                quote(p.when_source) + " is false");
  }
  // A layout with nothing to train on cannot be named (no master): said, never guessed.
  if (topo->counts_known && !topo->layout.no_nodes.empty() && uses_counts(p))
    return deny(topo->layout.no_nodes, p.name);
  auto d = build_patch(view, *want, p.name);
  d.sources = topo->sources;
  if (trainer) {
    const auto& value = trainer->framework ? trainer->framework : trainer->ml_policy;
    if (value) {
      d.sources.push_back(
          {"framework", *value,
           trainer->framework ? trainer->framework_source : trainer->ml_policy_source});
    }
  }
  if (layout_owner) add_disagreements(view, *layout_owner, *topo, d);
  return d;
}

decision mutate_pod(const pod_view& pod, const policy_set& policies,
                    const mutate_options& options) {
  return decide(pod, policies, options, [](const owner_ref& ref, owner_values& owners) {
    owners.add_failure(ref, lookup_failure::no_access, "no API access (this path reads no owners)");
  });
}

decision mutate_pod(const json& pod, const policy_set& policies, const mutate_options& options) {
  return mutate_pod(pod_view(pod), policies, options);
}

decision mutate(const admission_request& request, const policy_set& policies,
                const mutate_options& options) {
  if (!request.is_pod_create()) {
    return pass("not a pod CREATE: " + request.operation + " of " + request.resource);
  }
  return mutate_pod(request.pod(), policies, options);
}

}  // namespace trainenv::core
