// The engine (core/decide/engine.hpp) over a policy and owner kinds built in the test: the
// front door evaluate (the not-a-pod-CREATE pass, denials and their outcome, the next owner it
// needs and the decision once owner_values holds it), decide's fetch loop, mutate_pod and mutate.
// The shipped policies' behaviour is tests/inputs/test_engine.cpp's.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "owner_kind_support.hpp"
#include "trainenv/core/decide/engine.hpp"

namespace engine_unit_tests {

using namespace trainenv::core;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

// Kubernetes' Job and JobSet, and Trainer's TrainJob (whose label names a bare pod's job), as
// policies/owners.yaml describes them.
owner_kind_set job_kinds() {
  auto set = owner_kind_set::build({
      trainenv::test::standard_kind("job"),
      trainenv::test::standard_kind("jobset"),
      trainenv::test::standard_kind("trainjob"),
  });
  if (!set) FAIL(set.message());
  return std::move(set).value();
}

policy_set unit_policies() {
  auto p = parse_policy(json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy",
    "metadata": {"name": "unit-torch"},
    "spec": {
      "frameworks": ["torch"], "default": true, "container": "node", "trainingRoles": ["node"],
      "defaults": {"masterPort": 29500, "numNodes": 1},
      "env": [
        {"name": "NNODES", "value": "${numNodes}"},
        {"name": "NODE_RANK", "value": "${nodeRank}", "roles": ["training"]},
        {"name": "MASTER_ADDR", "value": "${masterAddr}"},
        {"name": "MASTER_PORT", "value": "${masterPort}"}
      ]
    }})"),
                        "unit-torch.json");
  if (!p) FAIL(p.message());
  std::vector<policy> policies;
  policies.push_back(std::move(p).value());
  auto set = policy_set::build(std::move(policies), job_kinds());
  if (!set) FAIL(set.message());
  return std::move(set).value();
}

const policy_set& policies() {
  static const policy_set set = unit_policies();
  return set;
}

// A training pod alone, in a world of `nodes` pods (trainenv.io/num-nodes).
json bare_pod(int nodes) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "solo"},
            {"namespace", "team-a"},
            {"labels",
             {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"trainer.kubeflow.org/trainjob-name", "solo"}}},
            {"annotations", {{"trainenv.io/num-nodes", std::to_string(nodes)}}}}},
          {"spec", {{"containers", json::array({{{"name", "node"}, {"image", "x"}}})}}}};
}

const owner_ref bert_ref{"jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "bert", "js-uid"};

// Pod `index` of JobSet bert's replicatedJob node (one Job), as JobSet and the Job controller
// make it: no count annotation, so only the JobSet can size it.
json jobset_pod(int index) {
  const auto i = std::to_string(index);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "bert-node-0-" + i + "-abcde"},
            {"namespace", "team-a"},
            {"labels",
             {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"jobset.sigs.k8s.io/jobset-name", "bert"},
              {"jobset.sigs.k8s.io/jobset-uid", "js-uid"},
              {"jobset.sigs.k8s.io/replicatedjob-name", "node"},
              {"jobset.sigs.k8s.io/job-index", "0"},
              {"batch.kubernetes.io/job-name", "bert-node-0"},
              {"batch.kubernetes.io/job-completion-index", i}}},
            {"annotations", {{"batch.kubernetes.io/job-completion-index", i}}},
            {"ownerReferences", json::array({{{"apiVersion", "batch/v1"},
                                              {"kind", "Job"},
                                              {"name", "bert-node-0"},
                                              {"uid", "job-uid"},
                                              {"controller", true}}})}}},
          {"spec",
           {{"hostname", "bert-node-0-" + i},
            {"subdomain", "bert"},
            {"containers", json::array({{{"name", "node"}, {"image", "x"}}})}}}};
}

json bert_jobset(int pods, const std::string& uid = "js-uid") {
  return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", {{"name", "bert"}, {"namespace", "team-a"}, {"uid", uid}}},
          {"spec",
           {{"replicatedJobs",
             json::array(
                 {{{"name", "node"},
                   {"replicas", 1},
                   {"template",
                    {{"spec",
                      {{"parallelism", pods},
                       {"completions", pods},
                       {"template",
                        {{"spec", {{"containers", json::array({{{"name", "node"}}})}}}}}}}}}}})}}}};
}

std::string env_value(const json& pod, const std::string& name) {
  for (const auto& e : pod["spec"]["containers"][0].value("env", json::array())) {
    if (e["name"] == name) return e.value("value", "<valueFrom>");
  }
  return "<absent>";
}

// The pod with the decision's patch applied by nlohmann's applier, and fed back in: a second
// round patches nothing.
json applied_once(const json& pod, const decision& d, const owner_values& owners) {
  REQUIRE(d.allowed);
  const json mutated = pod.patch(d.patch());
  const pod_view view(mutated);
  const auto again = evaluate(subject{view}, policies(), owners);
  const auto* second = std::get_if<decision>(&again);
  REQUIRE(second != nullptr);
  CHECK(second->allowed);
  CHECK(second->patch_text.empty());
  CHECK(second->warnings.empty());
  return mutated;
}

TEST_CASE("engine: a request that is not a pod CREATE passes unread", "[engine_unit]") {
  admission_request request;
  request.api_version = "admission.k8s.io/v1";
  request.uid = "u";
  request.version = "v1";
  request.resource = "pods";
  request.operation = "UPDATE";
  request.object = pod_view(json::array({"not", "a", "pod"}));  // never read
  const auto& view = request.pod();
  const owner_values none;
  const auto step = evaluate(subject{view, &request}, policies(), none);
  const auto* d = std::get_if<decision>(&step);
  REQUIRE(d != nullptr);
  CHECK(d->allowed);
  CHECK(d->passed == pass_reason::not_a_pod_create);
  CHECK(d->verdict() == outcome::allowed);
  CHECK(outcome_name(d->verdict()) == "allowed");
  CHECK(d->message == "not a pod CREATE: UPDATE of pods");
  CHECK(d->patch_text.empty());
  CHECK(d->policy.empty());
  CHECK(none.all().empty());

  // mutate says the same; so does a CREATE of a subresource or of another resource.
  const auto via_mutate = mutate(request, policies());
  CHECK(via_mutate.passed == pass_reason::not_a_pod_create);
  request.operation = "CREATE";
  request.sub_resource = "binding";
  CHECK(mutate(request, policies()).passed == pass_reason::not_a_pod_create);
  request.sub_resource.clear();
  request.resource = "services";
  const auto service = mutate(request, policies());
  CHECK(service.passed == pass_reason::not_a_pod_create);
  CHECK(service.message == "not a pod CREATE: CREATE of services");
  // A pod CREATE is read: this object is no pod.
  request.resource = "pods";
  const auto read = mutate(request, policies());
  CHECK_FALSE(read.allowed);
  CHECK(read.verdict() == outcome::denied);
  CHECK(read.passed == pass_reason::none);
  CHECK(read.message == "trainenv: the object is not a Pod (expected a JSON object)");
}

TEST_CASE("engine: a pod CREATE request is decided as its pod", "[engine_unit]") {
  admission_request request;
  request.version = "v1";
  request.resource = "pods";
  request.operation = "CREATE";
  request.namespace_name = "team-a";  // the pod's, as the API server makes them
  request.object = pod_view(bare_pod(1));
  const auto d = mutate(request, policies());
  CHECK(d.policy == "unit-torch");
  CHECK(d.verdict() == outcome::patched);
  CHECK(d.passed == pass_reason::none);
  // The same as the bare pod's own decision.
  const auto alone = mutate_pod(bare_pod(1), policies());
  CHECK(d.patch_text == alone.patch_text);
}

TEST_CASE("engine: a bare pod is decided in one pass from its annotations", "[engine_unit]") {
  const json pod = bare_pod(1);
  const pod_view view(pod);
  const owner_values owners;
  const auto step = evaluate(subject{view}, policies(), owners);
  REQUIRE(needed(step) == nullptr);
  const auto& d = std::get<decision>(step);
  CHECK(d.allowed);
  CHECK(d.policy == "unit-torch");
  CHECK(d.verdict() == outcome::patched);
  CHECK(outcome_name(d.verdict()) == "patched");
  CHECK(d.passed == pass_reason::none);
  CHECK(d.injected.env ==
        std::vector<std::string>{"NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"});
  const json mutated = applied_once(pod, d, owners);
  CHECK(env_value(mutated, "NNODES") == "1");
  CHECK(env_value(mutated, "NODE_RANK") == "0");
  // A world of one pod with no name rendezvous with itself.
  CHECK(env_value(mutated, "MASTER_ADDR") == "localhost");
  CHECK(env_value(mutated, "MASTER_PORT") == "29500");
  CHECK(owners.all().empty());
}

TEST_CASE("engine: pods that are not the policy's pass with their reason", "[engine_unit]") {
  json other = bare_pod(1);
  other["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-ancestor-step");
  const auto not_training = mutate_pod(other, policies());
  CHECK(not_training.allowed);
  CHECK(not_training.passed == pass_reason::not_training);
  CHECK(not_training.verdict() == outcome::allowed);
  CHECK(not_training.message ==
        "not a training pod: no label trainer.kubeflow.org/trainjob-ancestor-step");
  CHECK(not_training.warnings.empty());

  json initializer = bare_pod(1);
  initializer["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] =
      "dataset-initializer";
  const auto step = mutate_pod(initializer, policies());
  CHECK(step.passed == pass_reason::not_training);
  CHECK(step.message ==
        "not a training pod: label trainer.kubeflow.org/trainjob-ancestor-step "
        "is \"dataset-initializer\"");

  json opted = bare_pod(1);
  opted["metadata"]["annotations"]["trainenv.io/inject"] = "false";
  const auto out = mutate_pod(opted, policies());
  CHECK(out.passed == pass_reason::opted_out);
  CHECK(out.verdict() == outcome::allowed);
  CHECK(out.patch_text.empty());
  CHECK(out.message == "opted out: annotation trainenv.io/inject is \"false\"");
}

TEST_CASE("engine: a pod that breaks the contract is denied with its message and code",
          "[engine_unit]") {
  json unknown = bare_pod(1);
  unknown["metadata"]["annotations"]["trainenv.io/policy"] = "nope";
  const auto d = mutate_pod(unknown, policies());
  CHECK_FALSE(d.allowed);
  CHECK(d.verdict() == outcome::denied);
  CHECK(outcome_name(d.verdict()) == "denied");
  CHECK(d.passed == pass_reason::none);
  CHECK(d.code == 400);
  CHECK(d.patch_text.empty());
  CHECK(d.message ==
        "trainenv: annotation trainenv.io/policy is \"nope\", which is not a loaded "
        "policy; use one of: unit-torch");

  json bad_count = bare_pod(1);
  bad_count["metadata"]["annotations"]["trainenv.io/num-nodes"] = "two";
  const auto counted = mutate_pod(bad_count, policies());
  CHECK(counted.verdict() == outcome::denied);
  CHECK(counted.code == 400);
  CHECK(counted.policy == "unit-torch");
  CHECK_THAT(counted.message, StartsWith("trainenv: annotation trainenv.io/num-nodes is \"two\""));
}

TEST_CASE("engine: evaluate names the owner it needs, and decides once owner_values holds it",
          "[engine_unit]") {
  const json pod = jobset_pod(1);
  const pod_view view(pod);
  owner_values owners;
  const auto first = evaluate(subject{view}, policies(), owners);
  const auto* ref = needed(first);
  REQUIRE(ref != nullptr);
  // The JobSet, by the labels JobSet puts on its pods: no need to read the Job first.
  CHECK(*ref == bert_ref);
  CHECK(ref->display() == "JobSet team-a/bert");
  CHECK(owners.all().empty());

  owners.add(*ref, bert_jobset(3));
  const auto second = evaluate(subject{view}, policies(), owners);
  const auto* d = std::get_if<decision>(&second);
  REQUIRE(d != nullptr);
  CHECK(d->allowed);
  CHECK(d->policy == "unit-torch");
  CHECK(d->layout_name == "bert-node-0-1.bert");
  CHECK(d->world_roles == std::vector<std::string>{"node"});
  const json mutated = applied_once(pod, *d, owners);
  CHECK(env_value(mutated, "NNODES") == "3");
  CHECK(env_value(mutated, "NODE_RANK") == "1");
  CHECK(env_value(mutated, "MASTER_ADDR") == "bert-node-0-0.bert");
  REQUIRE(owners.all().size() == 1);
  CHECK_FALSE(owners.all()[0].cached);
}

TEST_CASE("engine: owners at hand are used in the same pass, and marked cached", "[engine_unit]") {
  const auto jobset = std::make_shared<const owner_object>(bert_jobset(2));
  int asked = 0;
  const owner_values owners([&](const owner_ref& ref) -> std::shared_ptr<const owner_object> {
    ++asked;
    return ref.kind == "JobSet" && ref.name == "bert" ? jobset : nullptr;
  });
  const json pod = jobset_pod(0);
  const pod_view view(pod);
  const auto step = evaluate(subject{view}, policies(), owners);
  const auto* d = std::get_if<decision>(&step);
  REQUIRE(d != nullptr);
  CHECK(d->verdict() == outcome::patched);
  CHECK(d->layout_name == "bert-node-0-0.bert");
  REQUIRE(owners.all().size() == 1);
  CHECK(owners.all()[0].cached);
  CHECK(owners.all()[0].ref == bert_ref);
  CHECK(asked == 1);
}

TEST_CASE("engine: an owner that cannot be read denies sizing with the failure's code",
          "[engine_unit]") {
  // mutate_pod reads no owner: the JobSet's lookup fails as no access (500).
  const auto no_access = mutate_pod(jobset_pod(1), policies());
  CHECK(no_access.verdict() == outcome::denied);
  CHECK(no_access.code == 500);
  CHECK(no_access.policy == "unit-torch");
  CHECK_THAT(no_access.message,
             StartsWith("trainenv: cannot read the pod counts: JobSet team-a/bert: "));
  CHECK_THAT(no_access.message, Contains("no API access (this path reads no owners)"));

  // A JobSet of that name with another uid is not the owner (recreated): 404.
  const json pod = jobset_pod(1);
  const pod_view view(pod);
  owner_values owners;
  owners.add(bert_ref, bert_jobset(3, "other-uid"));
  REQUIRE(owners.all().size() == 1);
  CHECK(owners.all()[0].failure == lookup_failure::uid_mismatch);
  const auto step = evaluate(subject{view}, policies(), owners);
  const auto* d = std::get_if<decision>(&step);
  REQUIRE(d != nullptr);
  CHECK(d->verdict() == outcome::denied);
  CHECK(d->code == 404);
  // Read as a 404 is: neither the object's uid nor that the name exists is told.
  CHECK_THAT(d->message, Contains("JobSet team-a/bert: not found with uid \"js-uid\" (deleted, "
                                  "or recreated under another uid)"));
  CHECK(d->message.find("other-uid") == std::string::npos);
}

TEST_CASE("engine: decide fetches until it decides, and gives up past the longest chain",
          "[engine_unit]") {
  int fetches = 0;
  const auto d = decide(jobset_pod(2), policies(), mutate_options{},
                        [&](const owner_ref& ref, owner_values& owners) {
                          ++fetches;
                          owners.add(ref, bert_jobset(3));
                        });
  CHECK(fetches == 1);
  CHECK(d.verdict() == outcome::patched);
  CHECK(d.layout_name == "bert-node-0-2.bert");

  // A fetch that never adds what was asked: the same owner is asked for again and again.
  int loops = 0;
  const auto stuck = decide(jobset_pod(2), policies(), mutate_options{},
                            [&](const owner_ref&, owner_values&) { ++loops; });
  CHECK(loops == max_owner_fetches);
  CHECK(stuck.verdict() == outcome::denied);
  CHECK(stuck.message == owner_chain_too_long(bert_ref).message);
  CHECK(stuck.message ==
        "trainenv: the pod's owners took more than 8 reads to size it (the last: JobSet "
        "team-a/bert); set annotation trainenv.io/num-nodes and trainenv.io/policy");
}

TEST_CASE("engine: a pod whose own name contradicts its layout is denied as trainenv's fault",
          "[engine_unit]") {
  json pod = jobset_pod(1);
  pod["spec"]["hostname"] = "bert-node-0-7";  // not what the JobSet's rule calls index 1
  const auto d =
      decide(pod, policies(), mutate_options{},
             [](const owner_ref& ref, owner_values& owners) { owners.add(ref, bert_jobset(3)); });
  CHECK(d.verdict() == outcome::denied);
  CHECK(d.code == 500);
  CHECK_THAT(d.message, StartsWith("trainenv: this pod is named bert-node-0-7.bert"));
  CHECK_THAT(d.message, Contains("the name bert-node-0-1.bert"));
}

}  // namespace engine_unit_tests
