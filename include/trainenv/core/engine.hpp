// The one decision: given a Pod (or an admission request) and the loaded policies, which
// JSON Patch — or which denial — comes back. Pure; never throws on bad input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/admission.hpp"
#include "trainenv/core/policy.hpp"
#include "trainenv/core/render.hpp"

namespace trainenv::core {

struct decision {
  bool allowed = true;
  std::string policy;  // the policy that applied, if any
  nlohmann::json patch = nlohmann::json::array();
  std::vector<std::string> warnings;
  // Denied: the violation ("trainenv: ..."). Allowed: why nothing applied, if so.
  std::string message;

  [[nodiscard]] bool mutated() const { return !patch.empty(); }
};

struct mutate_options {
  // Use this policy regardless of the pod's annotation or framework label (preview ?policy=).
  std::string forced_policy;
};

[[nodiscard]] decision mutate_pod(const nlohmann::json& pod, const policy_set& policies,
                                  const mutate_options& options = {});

// mutate_pod's last step, on its own so benchmarks can time it: the patch that adds to `pod`
// what `want` lacks (warning where the user set something else), or a denial when the parts of
// the pod the patch touches do not have the shapes it assumes.
[[nodiscard]] decision build_patch(const nlohmann::json& pod, const wants& want,
                                   const std::string& policy);

// Pods on CREATE go to mutate_pod; every other request is allowed unchanged.
[[nodiscard]] decision mutate(const admission_request& request, const policy_set& policies,
                              const mutate_options& options = {});

}  // namespace trainenv::core
