// The one decision: given a Pod (or an admission request) and the loaded policies, which
// JSON Patch — or which denial — comes back. Pure; never throws on bad input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/admission.hpp"
#include "trainenv/core/decision.hpp"
#include "trainenv/core/policy.hpp"

namespace trainenv::core {

struct mutate_options {
  // Use this policy regardless of the pod's annotation or framework label (preview ?policy=).
  std::string forced_policy;
};

[[nodiscard]] decision mutate_pod(const nlohmann::json& pod, const policy_set& policies,
                                  const mutate_options& options = {});

// Pods on CREATE go to mutate_pod; every other request is allowed unchanged.
[[nodiscard]] decision mutate(const admission_request& request, const policy_set& policies,
                              const mutate_options& options = {});

}  // namespace trainenv::core
