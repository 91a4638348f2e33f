// What a container's resources say about its processes (docs/contract.md §2.1, "Processes per
// node"): Kubeflow Trainer's rules for CPUs, GPUs and processes per node, requests before limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// Processes per node after Trainer's rule: a whole number, or "auto" / "gpu" left to torchrun.
struct resolved_nproc {
  std::optional<std::int64_t> count;
  std::string_view symbolic;  // "auto" or "gpu" when `count` is empty
  // Counted from an accelerator of the list: "16 aws.amazon.com/neuron x 2 per device (trn1...)".
  std::string counted_from;
  std::string warning;  // the list's default taken for a machine it does not know

  [[nodiscard]] std::string text() const;
};

// What processes per node counts on besides the container: the accelerators torchrun's `auto`
// does not count (policies/accelerators.yaml), and the instance type the pod is placed on
// (its node selector's or required affinity's node.kubernetes.io/instance-type), if it names one.
struct nproc_context {
  const std::vector<accelerator>* accelerators = nullptr;
  std::string instance_type;
};

// Processes per node from a setting and the container's resources: `auto` and `gpu` on a
// container that asks for a listed accelerator are its count x processes per device.
// The container: a pod's, or a pod template's in an owner.
[[nodiscard]] result<resolved_nproc> resolve_nproc(const nproc_setting& setting,
                                                   const nlohmann::json& container,
                                                   const nproc_context& context = {});
[[nodiscard]] result<resolved_nproc> resolve_nproc(const nproc_setting& setting,
                                                   const json_ref& container,
                                                   const nproc_context& context = {});

// The first resource whose name contains "gpu" (case-insensitive) with a count above 0,
// requests before limits (Trainer's GetNumGPUPerNode); 0 when there is none.
[[nodiscard]] result<std::int64_t> gpu_count(const nlohmann::json& container);
[[nodiscard]] result<std::int64_t> gpu_count(const json_ref& container);

}  // namespace trainenv::core
