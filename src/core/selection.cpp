#include "trainenv/core/selection.hpp"

#include "trainenv/core/keys.hpp"
#include "trainenv/core/render.hpp"

namespace trainenv::core {

selection select_policy(const pod_view& pod, const policy_set& policies,
                        std::string_view forced_policy, const framework_found* framework_found) {
  // The names a denial suggests; bounded, as a cluster may load hundreds of policies.
  const auto listing = [](const std::vector<std::string>& names) {
    constexpr std::size_t shown = 16;
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i)
      out += (out.empty() ? "" : ", ") + names[i];
    if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
    return out.empty() ? std::string("none") : out;
  };
  const auto known_names = [&] {
    std::vector<std::string> names;
    for (const auto& p : policies.all()) names.push_back(p.name);
    return listing(names);
  };
  const std::string forced(forced_policy);
  const std::string* name = forced.empty() ? pod.annotation(keys::policy) : &forced;
  if (name != nullptr) {
    if (const auto* p = policies.by_name(*name)) return {p, {}};
    const std::string source =
        forced.empty() ? "annotation " + std::string(keys::policy) : "policy";
    return {nullptr, "trainenv: " + source + " is " + quote(*name) +
                         ", which is not a loaded policy; use one of: " + known_names()};
  }
  const policy* chosen = nullptr;
  const auto* framework = pod.label(keys::framework);
  std::string framework_source = "label " + std::string(keys::framework);
  if (framework == nullptr && framework_found != nullptr) {
    framework = &framework_found->value;
    framework_source = framework_found->source;
  }
  if (framework != nullptr) {
    chosen = policies.by_framework(*framework);
    if (chosen == nullptr) {
      std::vector<std::string> values;
      for (const auto& p : policies.all())
        values.insert(values.end(), p.frameworks.begin(), p.frameworks.end());
      return {nullptr, "trainenv: " + framework_source + " is " + quote(*framework) +
                           ", which no policy lists; use one of: " + listing(values) +
                           ", or set annotation " + std::string(keys::policy)};
    }
  } else {
    chosen = policies.default_policy();
    if (chosen == nullptr) {
      return {nullptr, "trainenv: the pod has no label " + std::string(keys::framework) +
                           " and no policy is marked default; set the label or annotation " +
                           std::string(keys::policy)};
    }
  }
  // A policy that takes over this one for certain commands (torchtune's `tune run` over torch).
  for (const auto* replacement : policies.replacements_of(chosen->name)) {
    const auto target = pod.target_container(replacement->container);
    if (target &&
        args_site_after((*pod.containers())[*target], replacement->replaces->command_prefix)) {
      return {replacement, {}};
    }
  }
  return {chosen, {}};
}

}  // namespace trainenv::core
