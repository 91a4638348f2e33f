// Bytes are decoded elsewhere; here the data flow of one pod:
// recognise -> select a policy -> check the pod's shape -> topology -> render -> diff.
#include "trainenv/core/engine.hpp"

#include "trainenv/core/diff.hpp"
#include "trainenv/core/keys.hpp"
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

}  // namespace

decision mutate_pod(const json& pod, const policy_set& policies, const mutate_options& options) {
  if (!pod.is_object()) return deny("trainenv: the object is not a Pod (expected a JSON object)");
  const pod_view view(pod);
  const auto* step = view.label(keys::ancestor_step);
  if (step == nullptr || *step != "trainer") {
    return pass("not a training pod: label " + std::string(keys::ancestor_step) +
                " is not \"trainer\"");
  }
  if (const auto* inject = view.annotation(keys::inject); inject != nullptr && *inject == "false") {
    return pass("opted out: annotation " + std::string(keys::inject) + " is \"false\"");
  }

  const auto selected = select_policy(view, policies, options.forced_policy);
  if (selected.chosen == nullptr) return deny(selected.violation);
  const policy& p = *selected.chosen;

  std::size_t target = 0;
  if (auto problem = check_pod_shape(view, p, target); !problem.empty())
    return deny(std::move(problem), p.name);
  auto topo = resolve_topology(view, p, target);
  if (!topo) return deny(topo.message(), p.name);
  auto want = render(p, *topo, view);
  if (!want) return deny(want.message(), p.name);
  if (!want->applies) {
    return pass("policy " + quote(p.name) + " does not apply: its condition " +
                quote(p.when_source) + " is false");
  }
  return build_patch(pod, *want, p.name);
}

decision mutate(const admission_request& request, const policy_set& policies,
                const mutate_options& options) {
  if (!request.is_pod_create()) {
    return pass("not a pod CREATE: " + request.operation + " of " + request.resource);
  }
  return mutate_pod(request.object, policies, options);
}

}  // namespace trainenv::core
