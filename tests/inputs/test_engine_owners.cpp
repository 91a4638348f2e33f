// The engine on pods exactly as the controllers create them, sized from their owners
// (docs/contract.md §1, §2.1): Kubeflow Trainer's torch and DeepSpeed pods, a Volcano worker.
// The owners come from examples/owners/ through the --owners reader, one object per fetch, as the
// shell would fetch them; patches are applied with nlohmann's json::patch and fed back in.
#include <catch2/catch.hpp>

#include <map>

#include "../test_support.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;
using Catch::Contains;

namespace {

json example(const std::string& name) {
  auto doc = inputs::parse_document(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name));
  REQUIRE(doc);
  return std::move(*doc);
}

inputs::owner_file owners(const std::string& name) {
  auto file = inputs::owner_file::parse(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name), name);
  REQUIRE(file);
  return std::move(*file);
}

// The decision with owners read from `file`; `fetches` counts the objects asked for. `fail`
// makes one kind's reads fail as the API would.
struct run {
  core::decision d;
  std::vector<std::string> fetched;
};
run decide(const json& pod, const inputs::owner_file& file, const std::string& fail_kind = {},
           core::lookup_failure failure = core::lookup_failure::forbidden) {
  run out;
  out.d = core::decide(pod, test::shipped_policies(), {},
                       [&](const core::owner_ref& ref, core::owner_values& values) {
                         out.fetched.push_back(ref.kind);
                         const auto* object = file.find(ref);
                         if (ref.kind == fail_kind || object == nullptr) {
                           values.add_failure(
                               ref, object == nullptr ? core::lookup_failure::not_found : failure);
                         } else {
                           values.add(ref, *object);
                         }
                       });
  return out;
}

json applied(const json& pod, const core::decision& d, const inputs::owner_file& file) {
  REQUIRE(d.allowed);
  const json mutated = pod.patch(d.patch());
  const auto again = decide(mutated, file).d;
  CHECK(again.allowed);
  CHECK(again.patch().empty());
  return mutated;
}

std::map<std::string, std::string> env_of(const json& pod, std::size_t container = 0) {
  std::map<std::string, std::string> out;
  for (const auto& e : pod["spec"]["containers"][container].value("env", json::array()))
    out[e["name"]] = e.contains("value") ? e["value"].get<std::string>() : "<valueFrom>";
  return out;
}

std::string source_of(const core::decision& d, const std::string& name) {
  for (const auto& s : d.sources) {
    if (s.name == name) return s.value + " from " + s.source;
  }
  return "<none>";
}

}  // namespace

TEST_CASE("a Trainer torch pod with no trainenv label or annotation is recognised and sized",
          "[engine][owners]") {
  const auto pod = example("trainer-torch-pod.yaml");
  const auto file = owners("trainer-torch-owners.yaml");
  const auto [d, fetched] = decide(pod, file);
  INFO(d.message);
  REQUIRE(d.allowed);
  CHECK(d.policy == "torch");
  // Job (recognise), JobSet and TrainJob and runtime (framework); the counts reuse the JobSet.
  CHECK(fetched == std::vector<std::string>{"Job", "JobSet", "TrainJob", "ClusterTrainingRuntime"});
  const auto env = env_of(applied(pod, d, file));
  CHECK(env.at("WORLD_SIZE") == "3");  // the node replicatedJob: 1 Job x 3 pods
  CHECK(env.at("RANK") == "1");
  CHECK(env.at("PET_NNODES") == "3");  // what Trainer wrote, kept
  CHECK(env.at("MASTER_ADDR") == "bert-node-0-0.bert");
  CHECK(source_of(d, "numNodes") == "3 from JobSet team-a/bert");
  CHECK(source_of(d, "framework") ==
        "torch from label trainer.kubeflow.org/framework of ClusterTrainingRuntime "
        "torch-distributed");
  for (const auto& w : d.warnings) UNSCOPED_INFO(w);
  CHECK(d.warnings.empty());
}

TEST_CASE("a DeepSpeed launcher counts its workers and takes their GPUs as slots",
          "[engine][owners]") {
  const auto pod = example("deepspeed-launcher-pod.yaml");
  const auto file = owners("deepspeed-owners.yaml");
  const auto [d, fetched] = decide(pod, file);
  INFO(d.message);
  REQUIRE(d.allowed);
  CHECK(d.policy == "mpi");
  const auto mutated = applied(pod, d, file);
  const auto env = env_of(mutated);
  CHECK(env.at("OMPI_MCA_orte_set_default_slots") == "4");
  CHECK(env.count("WORLD_SIZE") == 0);  // a launcher is not a training role
  const auto& hostfile = mutated["metadata"]["annotations"]["trainenv.io/hostfile"];
  CHECK(hostfile == "ds-node-0-0.ds slots=4\nds-node-0-1.ds slots=4\n");
  CHECK(source_of(d, "numNodes") == "2 from JobSet team-a/ds");
}

TEST_CASE("a needed count that cannot be read denies the pod, naming owner, failure and fix",
          "[engine][owners]") {
  const auto pod = example("trainer-torch-pod.yaml");
  auto annotated = pod;  // the framework is known: only the counts need the JobSet
  annotated["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  annotated["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "torch";
  for (const auto failure : {core::lookup_failure::forbidden, core::lookup_failure::not_found,
                             core::lookup_failure::timeout, core::lookup_failure::uid_mismatch}) {
    const auto [d, fetched] =
        decide(annotated, owners("trainer-torch-owners.yaml"), "JobSet", failure);
    INFO(d.message);
    CHECK_FALSE(d.allowed);
    // Gone and recreated read alike (docs/security.md): "not found".
    const auto said = failure == core::lookup_failure::uid_mismatch
                          ? std::string("not found")
                          : std::string(core::failure_name(failure));
    CHECK_THAT(d.message, Contains("trainenv: cannot read the pod counts: JobSet team-a/bert") &&
                              Contains(said) && Contains("trainenv.io/num-nodes"));
    CHECK(fetched == std::vector<std::string>{"JobSet"});
  }
}

TEST_CASE("a JobSet pod whose Job cannot be read passes unchanged with a warning",
          "[engine][owners]") {
  const auto pod = example("trainer-torch-pod.yaml");
  const auto [d, fetched] = decide(pod, owners("trainer-torch-owners.yaml"), "Job");
  CHECK(d.allowed);
  CHECK(d.patch().empty());
  REQUIRE(d.warnings.size() == 1);
  CHECK_THAT(d.warnings[0], Contains("could not read Job team-a/bert-node-0"));
}

TEST_CASE("explicit count annotations cause no lookup for counts", "[engine][owners]") {
  auto pod = example("trainer-torch-pod.yaml");
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = "3";
  const auto [d, fetched] = decide(pod, owners("trainer-torch-owners.yaml"));
  REQUIRE(d.allowed);
  CHECK(fetched.empty());
  CHECK(source_of(d, "numNodes") == "3 from annotation trainenv.io/num-nodes");
}

TEST_CASE("an annotation that disagrees with an owner read anyway is kept, with a warning",
          "[engine][owners]") {
  auto pod = example("trainer-torch-pod.yaml");  // recognised through its Job: owners are read
  pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = "2";
  const auto [d, fetched] = decide(pod, owners("trainer-torch-owners.yaml"));
  REQUIRE(d.allowed);
  CHECK(env_of(pod.patch(d.patch())).at("WORLD_SIZE") == "2");
  CHECK(std::find(d.warnings.begin(), d.warnings.end(),
                  "trainenv: kept annotation trainenv.io/num-nodes=2; JobSet team-a/bert runs 3") !=
        d.warnings.end());
}

TEST_CASE("a replicatedJob of several Jobs counts replicas x pods, and the index adds job-index",
          "[engine][owners]") {
  auto pod = example("trainer-torch-pod.yaml");
  auto file_text = test::read_file(std::string(TRAINENV_SOURCE_DIR) +
                                   "/examples/owners/trainer-torch-owners.yaml");
  // Two Jobs of three pods for the node replicatedJob; this pod is pod 1 of Job 1.
  const auto at = file_text.find("  - name: node\n    replicas: 1");
  REQUIRE(at != std::string::npos);
  file_text.replace(at, std::string("  - name: node\n    replicas: 1").size(),
                    "  - name: node\n    replicas: 2");
  auto file = inputs::owner_file::parse(file_text, "edited");
  REQUIRE(file);
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = "1";
  pod["spec"]["hostname"] = "bert-node-1-1";  // as the Job controller names it in Job 1
  pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-replicas"] = "2";  // as JobSet
  const auto [d, fetched] = decide(pod, *file);
  INFO(d.message);
  REQUIRE(d.allowed);
  const auto env = env_of(pod.patch(d.patch()));
  CHECK(env.at("WORLD_SIZE") == "6");
  CHECK(env.at("RANK") == "4");
}

TEST_CASE("with no API access, a pod that needs its owners is denied, and a bare pod is not",
          "[engine][owners]") {
  auto pod = example("trainer-torch-pod.yaml");
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  CHECK_FALSE(d.allowed);
  CHECK_THAT(d.message, Contains("no API access"));
  pod["metadata"].erase("ownerReferences");
  pod["metadata"]["labels"].erase("jobset.sigs.k8s.io/jobset-uid");
  pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = "0";
  pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = "0";
  const auto bare = core::mutate_pod(pod, test::shipped_policies());
  INFO(bare.message);
  CHECK(bare.allowed);
  CHECK(source_of(bare, "numNodes") == "1 from policy \"torch\" default");
}

TEST_CASE("a Volcano worker counts master and workers only, from its Volcano Job's tasks",
          "[engine][owners]") {
  const auto pod = example("volcano-worker-pod.yaml");
  const auto file = owners("volcano-owners.yaml");
  const auto [d, fetched] = decide(pod, file);
  INFO(d.message);
  REQUIRE(d.allowed);
  CHECK(d.policy == "volcano-pytorch");
  CHECK(fetched == std::vector<std::string>{"Job"});  // one GET: the Volcano Job
  const auto env = env_of(applied(pod, d, file));
  CHECK(env.at("WORLD_SIZE") == "3");  // master 1 + worker 2; the evaluator does not count
  CHECK(env.at("RANK") == "1");
  CHECK(source_of(d, "replicas") == "master=1,worker=2,evaluator=1 from Job team-a/mnist");
}

TEST_CASE("a policy that writes every container leaves a mesh's proxy alone, before and after",
          "[engine][owners]") {
  // volcano-pytorch writes every container, as Volcano's plugin does; a known sidecar is not one
  // of them (docs/contract.md §3), whether the mesh put it in before trainenv or after.
  const auto file = owners("volcano-owners.yaml");
  auto pod = example("volcano-worker-pod.yaml");
  auto exporter = pod["spec"]["containers"][0];
  exporter["name"] = "metrics-exporter";  // the user's own second container: it gets them
  exporter.erase("env");
  pod["spec"]["containers"].push_back(exporter);
  const json proxy = {{"name", "istio-proxy"}, {"image", "istio/proxyv2"}};

  SECTION("the proxy already there") {
    pod["spec"]["containers"].insert(pod["spec"]["containers"].begin(), proxy);
    const auto [d, fetched] = decide(pod, file);
    INFO(d.message);
    const auto admitted = applied(pod, d, file);
    CHECK_FALSE(admitted["spec"]["containers"][0].contains("env"));
    CHECK(env_of(admitted, 1).at("WORLD_SIZE") == "3");
    CHECK(env_of(admitted, 2).at("WORLD_SIZE") == "3");
  }
  SECTION("the proxy put first after trainenv, which is invoked again") {
    const auto [d, fetched] = decide(pod, file);
    INFO(d.message);
    auto admitted = applied(pod, d, file);
    CHECK(env_of(admitted, 1).at("RANK") == "1");
    admitted["spec"]["containers"].insert(admitted["spec"]["containers"].begin(), proxy);
    const auto again = decide(admitted, file).d;
    INFO(again.message);
    CHECK(again.allowed);
    CHECK(again.patch().empty());
  }
}

TEST_CASE("a Volcano Job's unknown key is its preview's note, not its pods' warnings",
          "[owners][job_preview]") {
  // The note names it "Volcano Job", the owner walk "Job": the same key, said once. The torch
  // policy reads the task's replicas from the Job, so its pods' admission reads the owner.
  const auto job = inputs::parse_document(R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: mnist
  namespace: team-a
  annotations:
    trainenv.io/nnodes: "2"
spec:
  plugins:
    svc: []
  tasks:
  - name: worker
    replicas: 2
    template:
      metadata:
        annotations:
          trainenv.io/policy: torch
        labels:
          trainer.kubeflow.org/trainjob-ancestor-step: trainer
      spec:
        containers:
        - name: worker
          image: x
          command: [torchrun, t.py]
)");
  REQUIRE(job);
  const auto preview = core::preview_job(*job, {}, test::shipped_policies());
  REQUIRE(preview);
  CHECK(preview->job.notes ==
        std::vector<std::string>{"trainenv: unknown annotation trainenv.io/nnodes on Volcano Job "
                                 "team-a/mnist (did you mean trainenv.io/num-nodes?)"});
  REQUIRE(preview->pods.size() == 2);
  for (const auto& p : preview->pods) {
    INFO(p.created.name);
    CHECK(p.d.policy == "torch");
    CHECK(p.d.warnings.empty());
  }
}
