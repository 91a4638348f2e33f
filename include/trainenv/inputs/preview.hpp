// Preview: what the webhook would answer for a Pod or an AdmissionReview, with the mutated
// Pod. Shared by POST /preview and `trainenv preview`, so both say exactly the same.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/decision.hpp"
#include "trainenv/core/engine.hpp"
#include "trainenv/core/result.hpp"

namespace trainenv::inputs {

// clang-tidy 14 reads the implicit special members through nlohmann::json's members; none of
// them throws in practice.
struct preview_answer {  // NOLINT(bugprone-exception-escape)
  core::decision decision;
  nlohmann::json object;  // the Pod with the patch applied; null when denied
};

// An error means the input itself is unusable (not JSON/YAML, not a Pod or an AdmissionReview).
[[nodiscard]] core::result<preview_answer> preview(std::string_view text,
                                                   const core::policy_set& policies,
                                                   const core::mutate_options& options);

// The answer as the edges show it: {"allowed", "policy", "patch", "object", "warnings",
// "message", "injected"}.
[[nodiscard]] nlohmann::json to_json(const preview_answer& answer);

}  // namespace trainenv::inputs
