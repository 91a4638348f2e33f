// Expands a policy against a pod's topology into what the pod should contain ("wants"),
// before any comparison with what it already has.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"
#include "trainenv/core/topology.hpp"

namespace trainenv::core {

struct container_wants {
  std::string list = "containers";  // or "initContainers"
  std::size_t index = 0;
  std::vector<nlohmann::json> env;     // v1.EnvVar
  std::vector<nlohmann::json> ports;   // v1.ContainerPort
  std::vector<nlohmann::json> mounts;  // v1.VolumeMount
  std::vector<std::string> args;
  std::optional<std::size_t> args_at;  // insert at this index of args; none: append
};

struct wants {
  bool applies = true;  // false when the policy's `when` is false for this pod
  std::vector<container_wants> containers;
  std::vector<nlohmann::json> volumes;  // v1.Volume
  nlohmann::json annotations = nlohmann::json::object();
  std::vector<std::string>
      warnings;  // things the policy could not do, e.g. a missing command prefix
};

[[nodiscard]] result<wants> render(const policy& p, const topology& t, const pod_view& pod);

// The position in `args` right after `prefix`, when the container's command followed by its
// args starts with `prefix` (token by token); nullopt otherwise.
[[nodiscard]] std::optional<std::size_t> args_position_after(
    const nlohmann::json& container, const std::vector<std::string>& prefix);

}  // namespace trainenv::core
