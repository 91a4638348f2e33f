// Which policy applies to a training pod (docs/contract.md §1): the annotation, else the
// framework label, else the default; then a policy that takes over for certain commands
// (torchtune's `tune run` over torch).
#pragma once

#include <string>
#include <string_view>

#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/policy.hpp"

namespace trainenv::core {

struct selection {
  const policy* chosen = nullptr;
  std::string violation;  // "trainenv: ..." when `chosen` is null
};

// A framework value read somewhere other than the pod's own label: the runtime of the pod's
// TrainJob, for a pod recognised through its Job (docs/contract.md §1).
struct framework_found {
  std::string value;
  std::string source;  // "label trainer.kubeflow.org/framework of ClusterTrainingRuntime x"
};

// `forced_policy`, when not empty, replaces the pod's annotation (preview's ?policy=).
// `framework`, when given, is used where the pod has no framework label.
[[nodiscard]] selection select_policy(const pod_view& pod, const policy_set& policies,
                                      std::string_view forced_policy = {},
                                      const framework_found* framework = nullptr);

}  // namespace trainenv::core
