// Preview: what the webhook would answer for a Pod or an AdmissionReview, with the mutated
// Pod. Shared by POST /preview and `trainenv preview`, so both say exactly the same.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/engine.hpp"
#include "trainenv/core/result.hpp"

namespace trainenv::inputs {

// {"allowed", "policy", "patch", "object", "warnings", "message"}. An error means the input
// itself is unusable (not JSON/YAML, not a Pod or an AdmissionReview).
[[nodiscard]] core::result<nlohmann::json> preview(std::string_view text,
                                                   const core::policy_set& policies,
                                                   const core::mutate_options& options);

}  // namespace trainenv::inputs
