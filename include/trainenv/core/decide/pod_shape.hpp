// The one check of a pod's shape, made after the policy is chosen and before anything reads
// the pod for topology: every part that topology, render and the diff read or patch has the
// type they assume (objects, lists of objects, lists of strings). The later stages rely on it
// instead of each checking what it touches, so none of them depends on running after another.
// Pods from the apiserver always pass (it decoded them into typed objects); /preview input
// and fuzzed reviews may not.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/policy.hpp"

namespace trainenv::core {

// The container a policy's values go into (docs/contract.md §3), first match: the annotation
// trainenv.io/container; on a pod trainenv already mutated (reinvoked after another webhook
// reordered its containers), the one that holds the policy's variables; the container the policy
// names; kubectl.kubernetes.io/default-container (ignored, with a warning, when it names no
// container); the first container that is not a known sidecar; the first.
struct container_choice {
  std::optional<std::size_t> index;  // none: `violation` says why
  std::string violation;
  std::string warning;
};
[[nodiscard]] container_choice choose_container(const pod_view& pod, const policy& p,
                                                const std::vector<std::string>& sidecars);

// Whether the container is one of the known sidecars (policies/sidecars.yaml), by its name.
[[nodiscard]] bool is_sidecar(const json_ref& container, const std::vector<std::string>& sidecars);

// The violation ("trainenv: spec.containers[0].env must be a list"), or empty when the pod's
// shape is usable. On success `target` is the index of the container to inject into, and
// `warning` what the pod should hear about that choice, if anything.
[[nodiscard]] std::string check_pod_shape(const pod_view& pod, const policy& p,
                                          const std::vector<std::string>& sidecars,
                                          std::size_t& target, std::string& warning);

}  // namespace trainenv::core
