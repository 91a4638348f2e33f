// What a container's resources say about its processes (docs/contract.md §2.1, "Processes per
// node"): Kubeflow Trainer's rules for CPUs, GPUs and processes per node, requests before limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// Processes per node after Trainer's rule: a whole number, or "auto" / "gpu" left to torchrun.
struct resolved_nproc {
  std::optional<std::int64_t> count;
  std::string_view symbolic;  // "auto" or "gpu" when `count` is empty

  [[nodiscard]] std::string text() const;
};

// Processes per node from a setting and the container's resources.
// The container: a pod's, or a pod template's in an owner.
[[nodiscard]] result<resolved_nproc> resolve_nproc(const nproc_setting& setting,
                                                   const nlohmann::json& container);
[[nodiscard]] result<resolved_nproc> resolve_nproc(const nproc_setting& setting,
                                                   const json_ref& container);

// The first resource whose name contains "gpu" (case-insensitive) with a count above 0,
// requests before limits (Trainer's GetNumGPUPerNode); 0 when there is none.
[[nodiscard]] result<std::int64_t> gpu_count(const nlohmann::json& container);
[[nodiscard]] result<std::int64_t> gpu_count(const json_ref& container);

}  // namespace trainenv::core
