// An OwnerKind built in a core test from its spec alone, as policies/owners.yaml would hold it:
// the unit tests of the owner walk, the layout, the engine and the job preview share it; and
// the kinds of owners.yaml a core test meets (Job, JobSet, Volcano Job, TrainJob), written once
// here (inputs_tests "[owners]" checks them against the shipped file).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"

namespace trainenv::test {

inline core::owner_kind owner_kind_from_spec(const std::string& name, const std::string& spec) {
  auto k = core::parse_owner_kind(
      nlohmann::json::parse(R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind",
          "metadata": {"name": ")" +
                            name + R"("}, "spec": )" + spec + "}"),
      "owners.json");
  if (!k) FAIL(k.message());
  return std::move(k).value();
}

// The specs, by kind name, as policies/owners.yaml has them (naming, roles and pod labels).
inline const std::vector<std::pair<std::string, std::string>>& standard_kind_specs() {
  static const std::vector<std::pair<std::string, std::string>> specs = {
      {"job", R"({"apiGroup": "batch", "versions": ["v1"], "kind": "Job", "resource": "jobs",
          "roles": {"own": {"jobSpec": "spec", "podTemplate": "spec.template"}},
          "naming": {"hostname": "${job}-${index}"},
          "podLabels": {"job": "batch.kubernetes.io/job-name",
                        "index": "batch.kubernetes.io/job-completion-index"}})"},
      {"jobset", R"({"apiGroup": "jobset.x-k8s.io", "versions": ["v1alpha2"], "kind": "JobSet",
          "resource": "jobsets",
          "roles": {"list": "spec.replicatedJobs", "name": "name", "replicas": "replicas",
                    "replicasDefault": 1, "jobSpec": "template.spec",
                    "podTemplate": "template.spec.template", "dependsOn": "dependsOn"},
          "coordinator": {"at": "spec.coordinator", "role": "replicatedJob",
                          "jobIndex": "jobIndex", "podIndex": "podIndex"},
          "naming": {"hostname": "${job}-${role}-${jobIndex}-${index}",
                     "subdomain": "spec.network.subdomain", "subdomainDefault": "${job}",
                     "templateSubdomain": "overridden",
                     "dnsHostnames": "spec.network.enableDNSHostnames"},
          "podLabels": {"job": "jobset.sigs.k8s.io/jobset-name",
                        "uid": "jobset.sigs.k8s.io/jobset-uid",
                        "role": "jobset.sigs.k8s.io/replicatedjob-name",
                        "jobIndex": "jobset.sigs.k8s.io/job-index",
                        "jobs": "jobset.sigs.k8s.io/replicatedjob-replicas"}})"},
      {"volcano-job", R"({"apiGroup": "batch.volcano.sh", "versions": ["v1alpha1"],
          "kind": "Job", "resource": "jobs",
          "roles": {"list": "spec.tasks", "name": "name", "nameDefault": "default${index}",
                    "replicas": "replicas", "replicasDefault": 0, "podTemplate": "template"},
          "naming": {"hostname": "${job}-${role}-${index}", "subdomainDefault": "${job}",
                     "templateSubdomain": "first",
                     "requiresAny": ["spec.plugins.svc", "spec.plugins.pytorch",
                                     "spec.plugins.mpi", "spec.plugins.tensorflow",
                                     "spec.plugins.ray"]},
          "podLabels": {"job": "volcano.sh/job-name", "role": "volcano.sh/task-spec",
                        "index": "volcano.sh/task-index"}})"},
      {"trainjob", R"({"apiGroup": "trainer.kubeflow.org", "versions": ["v1alpha1"],
          "kind": "TrainJob", "resource": "trainjobs", "runtimeRef": "spec.runtimeRef",
          "podLabels": {"job": "trainer.kubeflow.org/trainjob-name"}})"},
  };
  return specs;
}

inline core::owner_kind standard_kind(const std::string& name) {
  for (const auto& [n, spec] : standard_kind_specs()) {
    if (n == name) return owner_kind_from_spec(n, spec);
  }
  FAIL("no standard owner kind " << name);
  return {};
}

// All of them, as one set.
inline const core::owner_kind_set& standard_owner_kinds() {
  static const core::owner_kind_set kinds = [] {
    std::vector<core::owner_kind> all;
    for (const auto& [name, spec] : standard_kind_specs())
      all.push_back(owner_kind_from_spec(name, spec));
    auto set = core::owner_kind_set::build(std::move(all));
    if (!set) FAIL(set.message());
    return std::move(set).value();
  }();
  return kinds;
}

}  // namespace trainenv::test
