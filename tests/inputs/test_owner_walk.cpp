// The owner walk over pods and owners exactly as Kubeflow Trainer and Volcano make them
// (examples/owners/): recognise, framework from the runtime, counts, one object at a time.
#include <catch2/catch.hpp>

#include "../test_support.hpp"
#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace {

using namespace trainenv;
using core::owner_ref;
using nlohmann::json;

core::owner_kind kind(const std::string& spec) {
  auto k = core::parse_owner_kind(
      json::parse(R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind",
                      "metadata": {"name": "k"}, "spec": )" +
                  spec + "}"),
      "test");
  REQUIRE(k);
  return *k;
}

core::owner_kind_set kinds() {
  auto set = core::owner_kind_set::build({
      kind(R"({"apiGroup": "batch", "versions": ["v1"], "kind": "Job", "resource": "jobs",
               "roles": {"own": {"jobSpec": "spec", "podTemplate": "spec.template"}}})"),
      kind(R"({"apiGroup": "jobset.x-k8s.io", "versions": ["v1alpha2"], "kind": "JobSet",
               "resource": "jobsets", "roles": {"list": "spec.replicatedJobs", "name": "name",
               "replicas": "replicas", "jobSpec": "template.spec",
               "podTemplate": "template.spec.template"}})"),
      kind(R"({"apiGroup": "batch.volcano.sh", "versions": ["v1alpha1"], "kind": "Job",
               "resource": "jobs", "roles": {"list": "spec.tasks", "name": "name",
               "replicas": "replicas", "podTemplate": "template"}})"),
      kind(R"({"apiGroup": "trainer.kubeflow.org", "versions": ["v1alpha1"], "kind": "TrainJob",
               "resource": "trainjobs", "runtimeRef": "spec.runtimeRef"})"),
      kind(R"({"apiGroup": "trainer.kubeflow.org", "versions": ["v1alpha1"],
               "kind": "ClusterTrainingRuntime", "resource": "clustertrainingruntimes",
               "clusterScoped": true, "framework": true})"),
  });
  REQUIRE(set);
  return std::move(*set);
}

json owner_example(const std::string& name) {
  auto doc = inputs::parse_document(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name));
  REQUIRE(doc);
  return std::move(*doc);
}

inputs::owner_file owners_file(const std::string& name) {
  auto file = inputs::owner_file::parse(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name), name);
  REQUIRE(file);
  return std::move(*file);
}

// Runs `step` until it answers, fetching each object it names from `file`; counts the fetches.
template <class Step>
auto walk(Step step, const inputs::owner_file& file, core::owner_values& values, int& fetches) {
  for (int round = 0; round < 8; ++round) {
    auto answer = step();
    const auto* ref = core::needed(answer);
    if (ref == nullptr) return answer;
    ++fetches;
    if (const auto* object = file.find(*ref)) {
      values.add(*ref, *object);
    } else {
      values.add_failure(*ref, core::lookup_failure::not_found);
    }
  }
  FAIL("the walk did not end");
  return step();
}

}  // namespace

TEST_CASE(
    "Trainer's torch pod is recognised through its Job, framed by its runtime and sized by "
    "its JobSet",
    "[owners][walk]") {
  const auto pod_json = owner_example("trainer-torch-pod.yaml");
  const core::pod_view pod(pod_json);
  const auto file = owners_file("trainer-torch-owners.yaml");
  const auto set = kinds();
  core::owner_values values;
  int fetches = 0;

  auto recognised = walk([&] { return core::recognise(pod, values); }, file, values, fetches);
  const auto& r = std::get<core::recognition>(recognised);
  REQUIRE(r.kind == core::recognition::verdict::through_job);
  CHECK(fetches == 1);  // the Job

  auto framework =
      walk([&] { return core::trainer_runtime(pod, *r.job, values, set); }, file, values, fetches);
  const auto& found = std::get<core::result<core::trainer_settings_ptr>>(framework);
  REQUIRE(found);
  const auto& f = *found;
  REQUIRE(f != nullptr);
  CHECK(f->framework == "torch");
  CHECK(f->framework_source ==
        "label trainer.kubeflow.org/framework of ClusterTrainingRuntime torch-distributed");
  CHECK(fetches == 4);  // + JobSet, TrainJob, runtime

  auto counts = walk([&] { return core::counts_from_owners(pod, "node", values, set); }, file,
                     values, fetches);
  const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
  REQUIRE(c);
  REQUIRE(*c);
  CHECK((*c)->owner == "JobSet team-a/bert");
  CHECK(fetches == 4);  // the JobSet was already fetched
  REQUIRE((*c)->roles.size() == 3);
  CHECK((*c)->roles[2].role == "node");
  CHECK((*c)->roles[2].pods == 3);
}

TEST_CASE("a Volcano worker is sized by its Volcano Job's tasks", "[owners][walk]") {
  const auto pod_json = owner_example("volcano-worker-pod.yaml");
  const core::pod_view pod(pod_json);
  const auto file = owners_file("volcano-owners.yaml");
  const auto set = kinds();
  core::owner_values values;
  int fetches = 0;
  auto recognised = walk([&] { return core::recognise(pod, values); }, file, values, fetches);
  CHECK(std::get<core::recognition>(recognised).kind == core::recognition::verdict::training);
  CHECK(fetches == 0);
  auto counts = walk([&] { return core::counts_from_owners(pod, "worker", values, set); }, file,
                     values, fetches);
  const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
  REQUIRE(c);
  REQUIRE(*c);
  CHECK((*c)->owner == "Job team-a/mnist");
  REQUIRE((*c)->roles.size() == 3);
  CHECK((*c)->roles[1].role == "worker");
  CHECK((*c)->roles[1].pods == 2);
  CHECK(fetches == 1);
}

TEST_CASE("an unreadable Job lets a JobSet pod pass, and an unreadable JobSet refuses the counts",
          "[owners][walk]") {
  const auto pod_json = owner_example("trainer-torch-pod.yaml");
  const core::pod_view pod(pod_json);
  const auto set = kinds();
  core::owner_values values;
  values.add_failure({"batch/v1", "Job", "team-a", "bert-node-0", ""},
                     core::lookup_failure::forbidden, "jobs.batch is forbidden");
  auto recognised = core::recognise(pod, values);
  const auto& r = std::get<core::recognition>(recognised);
  CHECK(r.kind == core::recognition::verdict::unknown);
  CHECK_THAT(r.reason, Catch::Contains("Job team-a/bert-node-0: forbidden (403)"));

  values.add_failure({"jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "bert", ""},
                     core::lookup_failure::timeout);
  auto counts = core::counts_from_owners(pod, "node", values, set);
  const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
  REQUIRE_FALSE(c);
  CHECK(c.message() == "JobSet team-a/bert: timed out");
  CHECK(c.code() == 503);
}

TEST_CASE("one Job object shared by pods of two roles gives each pod its own role",
          "[owners][walk][derived]") {
  // As the server's cache does: every pod's walk gets the same owner_object, which keeps what
  // was read from it. A batch Job is one role, the pod's own, so that must be in the key.
  const auto pod_json = json::parse(R"({"metadata": {"name": "p", "namespace": "ns",
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                           "uid": "u", "controller": true}]}})");
  const core::pod_view pod(pod_json);
  const auto job = std::make_shared<const core::owner_object>(json::parse(
      R"({"metadata": {"name": "train", "namespace": "ns", "uid": "u"},
          "spec": {"parallelism": 4, "completions": 4, "template": {}}})"));
  const auto set = kinds();
  for (const std::string role : {"worker", "master", "worker"}) {
    core::owner_values values;
    values.add({"batch/v1", "Job", "ns", "train", "u"}, job);
    auto counts = core::counts_from_owners(pod, role, values, set);
    const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
    REQUIRE(c);
    REQUIRE(*c);
    REQUIRE((*c)->roles.size() == 1);
    CHECK((*c)->roles[0].role == role);
    CHECK((*c)->roles[0].pods == 4);
  }
}
