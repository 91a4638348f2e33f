// The last step of the engine: compare what a policy wants in the pod with what the pod already
// has, and build the JSON Patch that adds what is missing. Whatever the user set is kept (with a
// warning where it differs); the decision carries the patch and a typed summary of it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/model/decision.hpp"

namespace trainenv::core {

// `pod` has passed check_pod_shape for the policy that rendered `want`.
[[nodiscard]] decision build_patch(const pod_view& pod, const wants& want,
                                   const std::string& policy);

// Warnings reach kubectl users: printable ASCII, one line, at most 120 characters (the
// apiserver truncates too).
[[nodiscard]] std::string make_warning(std::string text);

}  // namespace trainenv::core
