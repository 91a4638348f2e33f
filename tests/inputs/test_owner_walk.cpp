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
               "podTemplate": "template.spec.template"},
               "podLabels": {"job": "jobset.sigs.k8s.io/jobset-name",
                             "uid": "jobset.sigs.k8s.io/jobset-uid"}})"),
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
// With `read_as`, each object is added read as its kind, as the server's cache stores it.
template <class Step>
auto walk(Step step, const inputs::owner_file& file, core::owner_values& values, int& fetches,
          const core::owner_kind_set* read_as = nullptr) {
  for (int round = 0; round < 8; ++round) {
    auto answer = step();
    const auto* ref = core::needed(answer);
    if (ref == nullptr) return answer;
    ++fetches;
    const auto* object = file.find(*ref);
    const auto* kind = read_as != nullptr ? read_as->find(ref->api_version, ref->kind) : nullptr;
    if (object == nullptr) {
      values.add_failure(*ref, core::lookup_failure::not_found);
    } else if (kind != nullptr) {
      values.add(*ref, std::make_shared<const core::owner_object>(*object, *kind, *ref));
    } else {
      values.add(*ref, *object);
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
  // As the server's cache does: every pod's walk gets the same owner_object, read once as its
  // kind. A batch Job is one role, the pod's own, which the reading cannot name.
  const auto pod_json = json::parse(R"({"metadata": {"name": "p", "namespace": "ns",
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                           "uid": "u", "controller": true}]}})");
  const core::pod_view pod(pod_json);
  const auto set = kinds();
  const core::owner_ref ref{"batch/v1", "Job", "ns", "train", "u"};
  const auto job = std::make_shared<const core::owner_object>(
      json::parse(R"({"metadata": {"name": "train", "namespace": "ns", "uid": "u"},
                      "spec": {"parallelism": 4, "completions": 4, "template": {}}})"),
      *set.find(ref.api_version, ref.kind), ref);
  for (const std::string role : {"worker", "master", "worker"}) {
    core::owner_values values;
    values.add(ref, job);
    auto counts = core::counts_from_owners(pod, role, values, set);
    const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
    REQUIRE(c);
    REQUIRE(*c);
    REQUIRE((*c)->roles.size() == 1);
    CHECK((*c)->roles[0].role == role);
    CHECK((*c)->roles[0].pods == 4);
  }
}

TEST_CASE("an owner read as its kind gives the walk what the same owner read as none gives",
          "[owners][walk][reading]") {
  // The server's cache stores objects read as their kind; an --owners file adds them unread, and
  // the walk reads them for each pod. Both must decide alike, for every step of the walk.
  const auto pod_json = owner_example("trainer-torch-pod.yaml");
  const core::pod_view pod(pod_json);
  const auto file = owners_file("trainer-torch-owners.yaml");
  const auto set = kinds();
  struct seen {
    core::trainer_settings trainer;
    std::vector<core::role_pods> roles;
    std::string owner;
    int fetches = 0;
  };
  const auto run = [&](const core::owner_kind_set* read_as) {
    core::owner_values values;
    seen out;
    auto recognised =
        walk([&] { return core::recognise(pod, values); }, file, values, out.fetches, read_as);
    const auto& r = std::get<core::recognition>(recognised);
    REQUIRE(r.kind == core::recognition::verdict::through_job);
    auto framework = walk([&] { return core::trainer_runtime(pod, *r.job, values, set); }, file,
                          values, out.fetches, read_as);
    const auto& found = std::get<core::result<core::trainer_settings_ptr>>(framework);
    REQUIRE(found);
    REQUIRE(*found != nullptr);
    out.trainer = **found;
    auto counts = walk([&] { return core::counts_from_owners(pod, "node", values, set); }, file,
                       values, out.fetches, read_as);
    const auto& c = std::get<core::result<std::optional<core::owner_counts>>>(counts);
    REQUIRE(c);
    REQUIRE(*c);
    out.roles = (*c)->roles;
    out.owner = (*c)->owner;
    if (read_as != nullptr) {
      for (const auto& f : values.all()) {
        const auto* kind = set.find(f.ref.api_version, f.ref.kind);
        REQUIRE(kind != nullptr);
        CHECK(f.fetched->reading(*kind) != nullptr);  // each was read, and as its kind
      }
    }
    return out;
  };
  const auto unread = run(nullptr);
  const auto read = run(&set);
  CHECK(read.fetches == unread.fetches);
  CHECK(read.owner == unread.owner);
  const auto& a = read.trainer;
  const auto& b = unread.trainer;
  CHECK(a.framework == b.framework);
  CHECK(a.framework_source == b.framework_source);
  CHECK(a.ml_policy == b.ml_policy);
  CHECK(a.ml_policy_source == b.ml_policy_source);
  CHECK(a.num_proc_per_node == b.num_proc_per_node);
  CHECK(a.nproc_source == b.nproc_source);
  CHECK(a.nproc_one_means_gpus == b.nproc_one_means_gpus);
  CHECK(a.run_launcher_as_node == b.run_launcher_as_node);
  CHECK(a.ssh_auth_mount_path == b.ssh_auth_mount_path);
  CHECK(a.runtime == b.runtime);
  CHECK(a.elastic_min == b.elastic_min);
  CHECK(a.elastic_max == b.elastic_max);
  CHECK(a.trainjob_uid == b.trainjob_uid);
  CHECK(a.trainjob_api_version == b.trainjob_api_version);
  CHECK(a.trainjob_kind == b.trainjob_kind);
  CHECK(a.user_env == b.user_env);
  CHECK_FALSE(a.trainjob_uid.empty());
  REQUIRE(read.roles.size() == unread.roles.size());
  for (std::size_t i = 0; i < read.roles.size(); ++i) {
    CHECK(read.roles[i].role == unread.roles[i].role);
    CHECK(read.roles[i].pods == unread.roles[i].pods);
    CHECK(read.roles[i].source == unread.roles[i].source);
  }
}
