// The one check of a pod's shape, made after the policy is chosen and before anything reads
// the pod for topology: every part that topology, render and the diff read or patch has the
// type they assume (objects, lists of objects, lists of strings). The later stages rely on it
// instead of each checking what it touches, so none of them depends on running after another.
// Pods from the apiserver always pass (it decoded them into typed objects); /preview input
// and fuzzed reviews may not.
#pragma once

#include <cstddef>
#include <string>

#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/policy.hpp"

namespace trainenv::core {

// The violation ("trainenv: spec.containers[0].env must be a list"), or empty when the pod's
// shape is usable. On success `target` is the index of the container to inject into.
[[nodiscard]] std::string check_pod_shape(const pod_view& pod, const policy& p,
                                          std::size_t& target);

}  // namespace trainenv::core
