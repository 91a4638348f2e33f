#include "trainenv/core/decide/selection.hpp"

#include <algorithm>

#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core {
namespace {

// The names a denial suggests; bounded, as a cluster may load hundreds of policies.
std::string listing(const std::vector<std::string>& names) {
  constexpr std::size_t shown = 16;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i)
    out += (out.empty() ? "" : ", ") + names[i];
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out.empty() ? std::string("none") : out;
}

std::string framework_values(const policy_set& policies) {
  std::vector<std::string> values;
  for (const auto& p : policies.all())
    values.insert(values.end(), p.frameworks.begin(), p.frameworks.end());
  return listing(values);
}

// The policy `chosen` is, or the one that takes it over for the pod's command.
selection with_replacement(const pod_view& pod, const policy_set& policies, const policy* chosen) {
  for (const auto* replacement : policies.replacements_of(chosen->name)) {
    const auto target = choose_container(pod, *replacement, policies.sidecars()).index;
    if (target &&
        args_site_after(pod.containers()[*target], replacement->replaces->command_prefix)) {
      return {replacement, {}, {}};
    }
  }
  return {chosen, {}, {}};
}

}  // namespace

selection select_policy(const pod_view& pod, const policy_set& policies,
                        std::string_view forced_policy, const trainer_settings* trainer,
                        const owner_kind* owner_kind, const nlohmann::json* owner) {
  const std::string_view* name =
      forced_policy.empty() ? pod.annotation(keys::policy) : &forced_policy;
  if (name != nullptr) {
    if (const auto* p = policies.by_name(*name)) return {p, {}, {}};
    std::vector<std::string> names;
    for (const auto& p : policies.all()) names.push_back(p.name);
    const std::string source =
        forced_policy.empty() ? "annotation " + std::string(keys::policy) : "policy";
    return {nullptr,
            "trainenv: " + source + " is " + quote(*name) +
                ", which is not a loaded policy; use one of: " + listing(names),
            {}};
  }
  // The pod's own label: a value no policy lists is the pod's to fix.
  if (const auto* framework = pod.label(keys::framework)) {
    if (const auto* p = policies.by_framework(*framework))
      return with_replacement(pod, policies, p);
    return {nullptr,
            "trainenv: label " + std::string(keys::framework) + " is " + quote(*framework) +
                ", which no policy lists; use one of: " + framework_values(policies) +
                ", or set annotation " + std::string(keys::policy),
            {}};
  }
  // A Trainer pod's runtime: its label, else what its mlPolicy names. A value no policy lists is
  // a runtime whose own plugins wired the pod (Trainer's flux, a platform's own): not ours.
  if (trainer != nullptr) {
    const auto& value = trainer->framework ? trainer->framework : trainer->ml_policy;
    const auto& source = trainer->framework ? trainer->framework_source : trainer->ml_policy_source;
    if (value) {
      if (const auto* p = policies.by_framework(*value)) return with_replacement(pod, policies, p);
      // Short enough for a kubectl warning (120 characters): the value first, then its source.
      return {nullptr,
              {},
              "trainenv: passed unchanged: framework " + quote(*value, 24) +
                  " is in no policy; its runtime wires the pod (" + source + ")"};
    }
  }
  const bool plugins_may_name =
      owner_kind != nullptr &&
      std::any_of(owner_kind->plugins.begin(), owner_kind->plugins.end(),
                  [](const job_plugin& plugin) { return !plugin.policy.empty(); });
  if (plugins_may_name && owner != nullptr) {
    for (const auto& plugin : owner_kind->plugins) {
      if (plugin.policy.empty() || !runs_plugin(plugin, *owner)) continue;
      if (const auto* p = policies.by_name(plugin.policy))
        return with_replacement(pod, policies, p);
    }
  }
  if (owner_kind != nullptr && !owner_kind->default_policy.empty()) {
    if (const auto* p = policies.by_name(owner_kind->default_policy)) {
      auto out = with_replacement(pod, policies, p);
      out.owner_may_name = plugins_may_name && owner == nullptr;
      return out;
    }
    return {nullptr,
            "trainenv: owner kind " + quote(owner_kind->name) + " names default policy " +
                quote(owner_kind->default_policy) + ", which is not loaded; set annotation " +
                std::string(keys::policy),
            {}};
  }
  const auto* chosen = policies.default_policy();
  if (chosen == nullptr) {
    return {nullptr,
            "trainenv: the pod has no label " + std::string(keys::framework) +
                " and no policy is marked default; set the label or annotation " +
                std::string(keys::policy),
            {}};
  }
  return with_replacement(pod, policies, chosen);
}

}  // namespace trainenv::core
