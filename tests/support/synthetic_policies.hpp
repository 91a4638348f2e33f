// Many generated policies, for selection tests and benchmarks: policy "fw-<i>" serves
// framework "fw-<i>" and injects one variable.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/policy.hpp"

namespace trainenv::test {

inline core::policy_set synthetic_policies(int count) {
  std::vector<core::policy> policies;
  for (int i = 0; i < count; ++i) {
    const std::string name = "fw-" + std::to_string(i);
    auto p = core::parse_policy(
        {{"apiVersion", "trainenv.io/v1alpha1"},
         {"kind", "TrainingPolicy"},
         {"metadata", {{"name", name}}},
         {"spec",
          {{"frameworks", {name}},
           {"default", i == 0},
           {"env", {{{"name", "FRAMEWORK_ID"}, {"value", std::to_string(i)}}}}}}},
        name + ".yaml");
    policies.push_back(std::move(p).value());
  }
  return std::move(core::policy_set::build(std::move(policies))).value();
}

// A training pod labelled with `framework`, its job named by its subdomain (these policy sets
// load no owner kinds, whose pod labels would name it).
inline nlohmann::json pod_for_framework(const std::string& framework) {
  return {{"metadata",
           {{"labels",
             {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"trainer.kubeflow.org/framework", framework}}},
            {"annotations", nlohmann::json::object()}}},
          {"spec",
           {{"subdomain", "job"}, {"containers", nlohmann::json::array({{{"name", "node"}}})}}}};
}

}  // namespace trainenv::test
