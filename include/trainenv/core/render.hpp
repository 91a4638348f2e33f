// Expands a policy against a pod's topology into what the pod should contain ("wants"),
// before any comparison with what it already has.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"
#include "trainenv/core/topology.hpp"

namespace trainenv::core {

struct container_wants {
  std::size_t index = 0;
  std::vector<nlohmann::json> env;    // v1.EnvVar objects
  std::vector<nlohmann::json> ports;  // v1.ContainerPort objects
};

struct wants {
  std::vector<container_wants> containers;
  nlohmann::json annotations = nlohmann::json::object();
};

[[nodiscard]] result<wants> render(const policy& p, const topology& t);

}  // namespace trainenv::core
