// The four AdmissionReview bodies the benchmarks send, built from the JobSet fixture so the micro
// benchmarks (core_bench) and the end-to-end run (bench/e2e.sh, through pod_bodies) measure the
// same bytes:
//   small    one container, the labels a JobSet pod carries, no managedFields     (~2 KB)
//   typical  the JobSet fixture plus the managedFields the apiserver records         (~8 KB)
//   large    typical with 20 containers of 200 env vars each                        (~290 KB)
//   huge     typical with 60 containers of 240 env vars each: the 1 MiB etcd limit (~1 MB)
// Every shape is a torch pod the shipped torch policy patches; in large and huge the target
// container ("node") is the last one, the worst case for finding it.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::bench {

struct pod_shape {
  std::string name;
  std::string body;  // the AdmissionReview as the apiserver sends it (compact JSON)
};

inline nlohmann::json fixture_review() {
  std::ifstream in(std::string(TRAINENV_FIXTURES_DIR) + "/review-torch-jobset-node3.json");
  if (!in) throw std::runtime_error("cannot read the JobSet fixture");
  return nlohmann::json::parse(in);
}

// What kube-controller-manager's Job controller records when it creates the pod.
inline nlohmann::json job_controller_managed_fields() {
  using nlohmann::json;
  json labels = json::object();
  for (const auto* key :
       {"batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-completion-index",
        "batch.kubernetes.io/job-name", "controller-uid", "job-name",
        "jobset.sigs.k8s.io/global-replicas", "jobset.sigs.k8s.io/group-name",
        "jobset.sigs.k8s.io/group-replicas", "jobset.sigs.k8s.io/job-global-index",
        "jobset.sigs.k8s.io/job-group-index", "jobset.sigs.k8s.io/job-index",
        "jobset.sigs.k8s.io/job-key", "jobset.sigs.k8s.io/jobset-name",
        "jobset.sigs.k8s.io/jobset-uid", "jobset.sigs.k8s.io/replicatedjob-name",
        "jobset.sigs.k8s.io/replicatedjob-replicas", "jobset.sigs.k8s.io/restart-attempt",
        "trainer.kubeflow.org/trainjob-ancestor-step", "trainer.kubeflow.org/trainjob-name"})
    labels[std::string("f:") + key] = json::object();
  json annotations = labels;
  annotations.erase("f:controller-uid");
  annotations.erase("f:job-name");
  annotations["f:trainenv.io/num-nodes"] = json::object();
  const json container = {
      {".", json::object()},
      {"f:args", json::object()},
      {"f:command", json::object()},
      {"f:env",
       {{".", json::object()},
        {"k:{\"name\":\"JOB_COMPLETION_INDEX\"}",
         {{".", json::object()},
          {"f:name", json::object()},
          {"f:valueFrom", {{".", json::object()}, {"f:fieldRef", json::object()}}}}}}},
      {"f:image", json::object()},
      {"f:imagePullPolicy", json::object()},
      {"f:name", json::object()},
      {"f:resources",
       {{".", json::object()},
        {"f:limits",
         {{".", json::object()},
          {"f:cpu", json::object()},
          {"f:memory", json::object()},
          {"f:nvidia.com/gpu", json::object()}}},
        {"f:requests",
         {{".", json::object()},
          {"f:cpu", json::object()},
          {"f:memory", json::object()},
          {"f:nvidia.com/gpu", json::object()}}}}},
      {"f:terminationMessagePath", json::object()},
      {"f:terminationMessagePolicy", json::object()}};
  json spec = {{"f:containers", {{"k:{\"name\":\"node\"}", container}}},
               {"f:dnsPolicy", json::object()},
               {"f:enableServiceLinks", json::object()},
               {"f:hostname", json::object()},
               {"f:restartPolicy", json::object()},
               {"f:schedulerName", json::object()},
               {"f:securityContext", json::object()},
               {"f:subdomain", json::object()},
               {"f:terminationGracePeriodSeconds", json::object()}};
  return json::array(
      {{{"manager", "kube-controller-manager"},
        {"operation", "Update"},
        {"apiVersion", "v1"},
        {"time", "2026-11-21T09:14:03Z"},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:metadata",
           {{"f:annotations", annotations},
            {"f:generateName", json::object()},
            {"f:labels", labels},
            {"f:ownerReferences",
             {{".", json::object()},
              {"k:{\"uid\":\"1087e67a-c82c-409c-03c5-ec567084b303\"}", json::object()}}}}},
          {"f:spec", spec}}}}});
}

inline nlohmann::json typical_review() {
  auto review = fixture_review();
  review["request"]["object"]["metadata"]["managedFields"] = job_controller_managed_fields();
  return review;
}

inline nlohmann::json small_review() {
  auto review = fixture_review();
  auto& request = review["request"];
  request.erase("userInfo");
  request.erase("requestKind");
  request.erase("requestResource");
  request.erase("options");
  auto& pod = request["object"];
  pod.erase("status");
  auto& metadata = pod["metadata"];
  metadata["annotations"] = {{"batch.kubernetes.io/job-completion-index", "3"},
                             {"trainenv.io/num-nodes", "4"}};
  for (const auto* key : {"jobset.sigs.k8s.io/group-name", "jobset.sigs.k8s.io/group-replicas",
                          "jobset.sigs.k8s.io/job-group-index", "jobset.sigs.k8s.io/job-key",
                          "jobset.sigs.k8s.io/restart-attempt", "controller-uid", "job-name"})
    metadata["labels"].erase(key);
  auto& spec = pod["spec"];
  spec.erase("tolerations");
  spec.erase("volumes");
  spec["containers"][0].erase("volumeMounts");
  return review;
}

// `typical` with `containers` containers of `env_vars` variables each; the target comes last.
inline nlohmann::json wide_review(int containers, int env_vars) {
  auto review = typical_review();
  auto& list = review["request"]["object"]["spec"]["containers"];
  const auto node = list[0];
  list = nlohmann::json::array();
  for (int c = 0; c < containers; ++c) {
    auto container = node;
    container["name"] = c + 1 == containers ? std::string("node") : "sidecar-" + std::to_string(c);
    auto& env = container["env"];
    for (int e = 0; e < env_vars; ++e) {
      env.push_back(
          {{"name", "CONFIG_" + std::to_string(c) + "_" + std::to_string(e)},
           {"value", "value-" + std::to_string(e) + "-of-container-" + std::to_string(c)}});
    }
    list.push_back(std::move(container));
  }
  return review;
}

inline std::vector<pod_shape> pod_shapes() {
  return {{"small", small_review().dump()},
          {"typical", typical_review().dump()},
          {"large", wide_review(20, 200).dump()},
          {"huge", wide_review(60, 240).dump()}};
}

}  // namespace trainenv::bench
