// The one shape check before topology: every part of the pod the later stages read or patch has
// the type they assume, or the pod is denied naming the part.
#include <catch2/catch.hpp>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/decide/pod_shape.hpp"

using nlohmann::json;
using namespace trainenv::core;

namespace {

policy with_volumes_and_sidecar(bool volumes) {
  json spec = {{"frameworks", {"torch"}},
               {"default", true},
               {"extraContainers", {{{"name", "sidecar"}}}},
               {"env", {{{"name", "NNODES"}, {"value", "${numNodes}"}}}}};
  if (volumes) spec["volumes"] = {{{"name", "ssh"}, {"secret", {{"secretName", "${job}-ssh"}}}}};
  auto p = parse_policy(json{{"apiVersion", "trainenv.io/v1alpha1"},
                             {"kind", "TrainingPolicy"},
                             {"metadata", {{"name", "torch"}}},
                             {"spec", spec}},
                        "inline");
  INFO((p ? std::string() : p.message()));
  REQUIRE(p);
  return std::move(*p);
}

json good_pod() {
  return json::parse(R"({
    "metadata": {"name": "p", "labels": {"jobset.sigs.k8s.io/jobset-name": "j"},
                 "annotations": {"a": "b"}},
    "spec": {"containers": [{"name": "sidecar", "env": [{"name": "X", "value": "1"}]},
                            {"name": "node", "command": ["torchrun"], "args": ["train.py"],
                             "ports": [{"containerPort": 1}], "volumeMounts": [{"name": "v"}]}],
             "volumes": [{"name": "v"}]}})");
}

std::string shape_of(const json& pod, bool volumes = true) {
  std::size_t target = 99;
  std::string warning;
  return check_pod_shape(pod_view(pod), with_volumes_and_sidecar(volumes), {}, target, warning);
}

}  // namespace

TEST_CASE("a well-formed pod passes the shape check and names its target container",
          "[pod_shape]") {
  std::size_t target = 99;
  std::string warning;
  const auto pod = good_pod();
  CHECK(
      check_pod_shape(pod_view(pod), with_volumes_and_sidecar(true), {}, target, warning).empty());
  CHECK(target == 1);
  CHECK(warning.empty());
}

TEST_CASE("each part the engine reads or patches must have its shape", "[pod_shape]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/metadata", "trainenv: metadata must be an object"},
      {"/metadata/annotations", "trainenv: metadata.annotations must be an object of strings"},
      {"/spec/containers", "trainenv: spec.containers is empty or missing"},
      {"/spec/containers/1/env", "trainenv: spec.containers[1].env must be a list"},
      {"/spec/containers/1/ports", "trainenv: spec.containers[1].ports must be a list"},
      {"/spec/containers/1/volumeMounts",
       "trainenv: spec.containers[1].volumeMounts must be a list"},
      {"/spec/containers/1/command",
       "trainenv: spec.containers[1].command must be a list of strings"},
      {"/spec/containers/1/args", "trainenv: spec.containers[1].args must be a list of strings"},
      {"/spec/containers/0/env", "trainenv: spec.containers[0].env must be a list"},
      {"/spec/volumes", "trainenv: spec.volumes must be a list"},
  };
  for (const auto& [where, message] : cases) {
    auto pod = good_pod();
    pod[json::json_pointer(where)] = 7;
    INFO(where);
    CHECK_THAT(shape_of(pod), Catch::StartsWith(message));
  }
}

TEST_CASE("entries of the lists must be objects, env and volumes with names", "[pod_shape]") {
  auto pod = good_pod();
  pod["spec"]["containers"][1]["env"] = json::array({{{"value", "1"}}});
  CHECK(shape_of(pod) == "trainenv: spec.containers[1].env has an entry without a name");
  pod = good_pod();
  pod["spec"]["containers"][1]["ports"] = json::array({1});
  CHECK(shape_of(pod) == "trainenv: spec.containers[1].ports must be a list of objects");
  pod = good_pod();
  pod["spec"]["volumes"] = json::array({json::object()});
  CHECK(shape_of(pod) == "trainenv: spec.volumes has an entry without a name");
}

TEST_CASE("spec.volumes is checked only when the policy adds volumes", "[pod_shape]") {
  auto pod = good_pod();
  pod["spec"]["volumes"] = "not a list";
  CHECK_FALSE(shape_of(pod, true).empty());
  CHECK(shape_of(pod, false).empty());
}

TEST_CASE("the engine denies a badly shaped pod before reading its topology", "[pod_shape]") {
  auto pod = good_pod();
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  pod["spec"]["containers"][1]["env"] = "nope";
  auto set = policy_set::build({with_volumes_and_sidecar(true)});
  REQUIRE(set);
  const auto d = mutate_pod(pod, *set);
  CHECK_FALSE(d.allowed);
  CHECK(d.message == "trainenv: spec.containers[1].env must be a list");
  CHECK(d.policy == "torch");
}
