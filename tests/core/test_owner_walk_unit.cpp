// The owner walk (core/job/owner_walk.hpp) over owner kinds and objects built in the test: each
// step answers from the objects fetched so far or names the next one; recognising fails open,
// sizing and the runtime fail closed with the failure's code. The walk over examples/owners/ is
// tests/inputs/test_owner_walk.cpp's.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "owner_kind_support.hpp"
#include "trainenv/core/job/owner_walk.hpp"

namespace owner_walk_unit_tests {

using namespace trainenv::core;
using Catch::Matchers::Contains;
using nlohmann::json;

owner_kind walk_kind(const std::string& name, const std::string& spec) {
  return trainenv::test::owner_kind_from_spec(name, spec);
}

// The kinds of policies/owners.yaml this walk meets.
const owner_kind_set& walk_kinds() {
  static const owner_kind_set kinds = [] {
    auto set = owner_kind_set::build({
        trainenv::test::standard_kind("job"),
        trainenv::test::standard_kind("jobset"),
        walk_kind("pytorchjob", R"({"apiGroup": "kubeflow.org", "versions": ["v1"],
            "kind": "PyTorchJob", "wiredBy": "Kubeflow's training operator"})"),
        walk_kind("trainjob", R"({"apiGroup": "trainer.kubeflow.org", "versions": ["v1alpha1"],
            "kind": "TrainJob", "resource": "trainjobs", "runtimeRef": "spec.runtimeRef"})"),
        walk_kind("clustertrainingruntime", R"({"apiGroup": "trainer.kubeflow.org",
            "versions": ["v1alpha1"], "kind": "ClusterTrainingRuntime",
            "resource": "clustertrainingruntimes", "clusterScoped": true, "framework": true})"),
    });
    if (!set) FAIL(set.message());
    return std::move(set).value();
  }();
  return kinds;
}

json controller(const std::string& api_version, const std::string& kind, const std::string& name,
                const std::string& uid) {
  return json::array({{{"apiVersion", api_version},
                       {"kind", kind},
                       {"name", name},
                       {"uid", uid},
                       {"controller", true}}});
}

const owner_ref job_ref{"batch/v1", "Job", "team-a", "llama-node-0", "job-uid"};
const owner_ref jobset_ref{"jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "llama", "js-uid"};
const owner_ref trainjob_ref{"trainer.kubeflow.org/v1alpha1", "TrainJob", "team-a", "llama",
                             "tj-uid"};
const owner_ref runtime_ref{"trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "",
                            "torch-distributed", ""};

// A pod of Kubeflow Trainer's layout: the trainer label only on its Job.
json trainer_pod() {
  return {{"metadata",
           {{"name", "llama-node-0-0-x"},
            {"namespace", "team-a"},
            {"labels",
             {{"jobset.sigs.k8s.io/jobset-name", "llama"},
              {"batch.kubernetes.io/job-name", "llama-node-0"}}},
            {"ownerReferences", controller("batch/v1", "Job", "llama-node-0", "job-uid")}}},
          {"spec", {{"containers", json::array({{{"name", "node"}}})}}}};
}

json trainer_job(bool labelled = true) {
  json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", "llama-node-0"},
        {"namespace", "team-a"},
        {"uid", "job-uid"},
        {"ownerReferences", controller("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "js-uid")}}},
      {"spec", {{"parallelism", 2}, {"completions", 2}}}};
  if (labelled)
    job["metadata"]["labels"] = {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}};
  return job;
}

json replicated_job(const std::string& name, int replicas, int pods) {
  return {{"name", name},
          {"replicas", replicas},
          {"template",
           {{"spec",
             {{"parallelism", pods},
              {"completions", pods},
              {"template", {{"spec", {{"containers", json::array({{{"name", "node"}}})}}}}}}}}}};
}

json trainer_jobset(bool owned = true) {
  json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
             {"kind", "JobSet"},
             {"metadata", {{"name", "llama"}, {"namespace", "team-a"}, {"uid", "js-uid"}}},
             {"spec",
              {{"replicatedJobs", json::array({replicated_job("dataset-initializer", 1, 1),
                                               replicated_job("node", 1, 2)})}}}};
  if (owned) {
    js["metadata"]["ownerReferences"] =
        controller("trainer.kubeflow.org/v1alpha1", "TrainJob", "llama", "tj-uid");
  }
  return js;
}

json trainjob(json spec) {
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", "llama"}, {"namespace", "team-a"}, {"uid", "tj-uid"}}},
          {"spec", std::move(spec)}};
}

json runtime(json labels, json ml_policy) {
  json node = {{"name", "node"}, {"env", json::array({{{"name", "RT_VAR"}, {"value", "1"}}})}};
  json replicated = {{"name", "node"}};
  replicated["template"]["spec"]["template"]["spec"]["containers"] = json::array({node});
  json rt = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
             {"kind", "ClusterTrainingRuntime"},
             {"metadata", {{"name", "torch-distributed"}, {"labels", std::move(labels)}}}};
  rt["spec"]["mlPolicy"] = std::move(ml_policy);
  rt["spec"]["template"]["spec"]["replicatedJobs"] = json::array({replicated});
  return rt;
}

// Runs `step` until it answers, adding each object it names from `objects` (by kind and
// name) or a not_found failure; `asked` receives the references in the order named.
template <class Step>
auto walk_with(Step step, const std::vector<json>& objects, owner_values& values,
               std::vector<owner_ref>& asked) {
  for (int round = 0; round < 8; ++round) {
    auto answer = step();
    const auto* ref = needed(answer);
    if (ref == nullptr) return answer;
    asked.push_back(*ref);
    if (const auto* object = find_object(objects, *ref)) {
      values.add(*ref, *object);
    } else {
      values.add_failure(*ref, lookup_failure::not_found, "no such object");
    }
  }
  FAIL("the walk did not end");
  return step();
}

TEST_CASE("owner walk: a pod's own ancestor-step label recognises it without a read",
          "[owner_walk]") {
  json pod = trainer_pod();
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const pod_view view(pod);
  const owner_values owners;
  const auto step = recognise(view, owners);
  REQUIRE(needed(step) == nullptr);
  CHECK(std::get<recognition>(step).kind == recognition::verdict::training);
  CHECK(std::get<recognition>(step).job == nullptr);

  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "model-initializer";
  const pod_view other(pod);
  const auto init = std::get<recognition>(recognise(other, owners));
  CHECK(init.kind == recognition::verdict::not_training);
  CHECK(init.reason ==
        "not a training pod: label trainer.kubeflow.org/trainjob-ancestor-step is "
        "\"model-initializer\"");

  const json plain = {{"metadata", {{"name", "web"}}}, {"spec", json::object()}};
  const pod_view plain_view(plain);
  const auto none = std::get<recognition>(recognise(plain_view, owners));
  CHECK(none.kind == recognition::verdict::not_training);
  CHECK(none.reason == "not a training pod: no label trainer.kubeflow.org/trainjob-ancestor-step");

  json orphan = trainer_pod();
  orphan["metadata"].erase("ownerReferences");
  const pod_view orphan_view(orphan);
  const auto no_job = std::get<recognition>(recognise(orphan_view, owners));
  CHECK(no_job.kind == recognition::verdict::not_training);
  CHECK(no_job.reason ==
        "not a training pod: a JobSet pod without label "
        "trainer.kubeflow.org/trainjob-ancestor-step and no controlling Job");
  CHECK(owners.all().empty());
}

TEST_CASE("owner walk: a JobSet pod is recognised through its Job's label", "[owner_walk]") {
  const json pod = trainer_pod();
  const pod_view view(pod);
  owner_values owners;
  const auto first = recognise(view, owners);
  REQUIRE(needed(first) != nullptr);
  CHECK(*needed(first) == job_ref);

  owners.add(job_ref, trainer_job());
  const auto second = recognise(view, owners);
  REQUIRE(needed(second) == nullptr);
  const auto& r = std::get<recognition>(second);
  CHECK(r.kind == recognition::verdict::through_job);
  REQUIRE(r.job != nullptr);
  CHECK(r.job->ref == job_ref);
  CHECK(r.job->object()["metadata"]["name"] == "llama-node-0");

  // A Job without the label: not a training pod (the initializers' Jobs).
  owner_values unlabelled;
  unlabelled.add(job_ref, trainer_job(false));
  const auto side = std::get<recognition>(recognise(view, unlabelled));
  CHECK(side.kind == recognition::verdict::not_training);
  CHECK(side.reason ==
        "not a training pod: neither the pod nor its Job team-a/llama-node-0 has "
        "label trainer.kubeflow.org/trainjob-ancestor-step: trainer");
}

TEST_CASE("owner walk: recognising fails open when the Job cannot be read", "[owner_walk]") {
  const json pod = trainer_pod();
  const pod_view view(pod);
  owner_values owners;
  owners.add_failure(job_ref, lookup_failure::forbidden, "jobs.batch is forbidden");
  const auto r = std::get<recognition>(recognise(view, owners));
  CHECK(r.kind == recognition::verdict::unknown);
  CHECK(r.job == nullptr);
  CHECK(r.reason ==
        "trainenv: could not read Job team-a/llama-node-0: forbidden (403): jobs.batch is "
        "forbidden; "
        "cannot tell whether this JobSet pod is a training pod, so it passed unchanged (set label "
        "trainer.kubeflow.org/trainjob-ancestor-step: trainer on the pod template)");
}

TEST_CASE("owner walk: Trainer's runtime is read one object at a time, Job to runtime",
          "[owner_walk]") {
  const json pod = trainer_pod();
  const pod_view view(pod);
  const std::vector<json> objects = {
      trainer_job(), trainer_jobset(),
      trainjob({{"runtimeRef", {{"name", "torch-distributed"}}},
                {"trainer",
                 {{"numProcPerNode", 4},
                  {"env", json::array({{{"name", "USER_VAR"}, {"value", "u"}}})}}}}),
      runtime({{"trainer.kubeflow.org/framework", "torch"}},
              {{"numNodes", 2},
               {"torch",
                {{"numProcPerNode", "auto"},
                 {"elasticPolicy", {{"minNodes", 1}, {"maxNodes", 4}, {"maxRestarts", 3}}}}}})};
  owner_values owners;
  std::vector<owner_ref> asked;
  const auto recognised =
      walk_with([&] { return recognise(view, owners); }, objects, owners, asked);
  const auto& r = std::get<recognition>(recognised);
  REQUIRE(r.kind == recognition::verdict::through_job);
  const auto found = walk_with([&] { return trainer_runtime(view, *r.job, owners, walk_kinds()); },
                               objects, owners, asked);
  // Each object once, in the chain's order; the runtime cluster-scoped, by name alone.
  CHECK(asked == std::vector<owner_ref>{job_ref, jobset_ref, trainjob_ref, runtime_ref});
  const auto& settings = std::get<result<trainer_settings_ptr>>(found);
  REQUIRE(settings);
  REQUIRE(*settings != nullptr);
  const auto& s = **settings;
  CHECK(s.framework == "torch");
  CHECK(s.framework_source ==
        "label trainer.kubeflow.org/framework of ClusterTrainingRuntime torch-distributed");
  CHECK(s.ml_policy == "torch");
  CHECK(s.ml_policy_source == "spec.mlPolicy.torch of ClusterTrainingRuntime torch-distributed");
  // The TrainJob's numProcPerNode wins over the runtime's.
  CHECK(s.num_proc_per_node == "4");
  CHECK(s.nproc_source == "spec.trainer.numProcPerNode of TrainJob team-a/llama");
  CHECK_FALSE(s.nproc_one_means_gpus);
  CHECK(s.elastic_min == 1);
  CHECK(s.elastic_max == 4);
  CHECK(s.elastic_max_restarts == 3);
  CHECK(s.trainjob_uid == "tj-uid");
  CHECK(s.trainjob_api_version == "trainer.kubeflow.org/v1alpha1");
  CHECK(s.trainjob_kind == "TrainJob");
  CHECK(s.runtime == "ClusterTrainingRuntime torch-distributed");
  CHECK(s.user_env == std::vector<std::string>{"USER_VAR", "RT_VAR"});
}

TEST_CASE("owner walk: an MPI runtime names its implementation and Trainer's slot rule",
          "[owner_walk]") {
  const json pod = trainer_pod();
  const pod_view view(pod);
  const std::vector<json> objects = {
      trainer_job(), trainer_jobset(), trainjob({{"runtimeRef", {{"name", "torch-distributed"}}}}),
      runtime(json::object(), {{"mpi",
                                {{"mpiImplementation", "Intel"},
                                 {"numProcPerNode", 1},
                                 {"runLauncherAsNode", true},
                                 {"sshAuthMountPath", "/home/mpiuser/.ssh"}}}})};
  owner_values owners;
  std::vector<owner_ref> asked;
  const auto r = std::get<recognition>(
      walk_with([&] { return recognise(view, owners); }, objects, owners, asked));
  const auto found = walk_with([&] { return trainer_runtime(view, *r.job, owners, walk_kinds()); },
                               objects, owners, asked);
  const auto& settings = std::get<result<trainer_settings_ptr>>(found);
  REQUIRE(settings);
  const auto& s = **settings;
  CHECK_FALSE(s.framework);  // no label: the mlPolicy names it
  CHECK(s.ml_policy == "intel-mpi");
  CHECK(s.num_proc_per_node == "1");
  CHECK(s.nproc_source ==
        "spec.mlPolicy.mpi.numProcPerNode of ClusterTrainingRuntime "
        "torch-distributed");
  CHECK(s.nproc_one_means_gpus);
  CHECK(s.run_launcher_as_node);
  CHECK(s.ssh_auth_mount_path == "/home/mpiuser/.ssh");
  CHECK(s.user_env == std::vector<std::string>{"RT_VAR"});  // the runtime's node container's
}

TEST_CASE("owner walk: the runtime's chain fails closed with the failure's code", "[owner_walk]") {
  const json pod = trainer_pod();
  const pod_view view(pod);
  const auto settle = [&](const std::vector<json>& objects) {
    owner_values owners;
    std::vector<owner_ref> asked;
    const auto r = std::get<recognition>(
        walk_with([&] { return recognise(view, owners); }, objects, owners, asked));
    REQUIRE(r.job != nullptr);
    return std::get<result<trainer_settings_ptr>>(
        walk_with([&] { return trainer_runtime(view, *r.job, owners, walk_kinds()); }, objects,
                  owners, asked));
  };
  // No runtimeRef.name: the pod's own fault (400).
  const auto unnamed = settle({trainer_job(), trainer_jobset(), trainjob({{"runtimeRef", {}}})});
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.code() == 400);
  CHECK(unnamed.message() ==
        "trainenv: cannot read the pod's TrainJob and runtime: TrainJob "
        "team-a/llama has no spec.runtimeRef.name; set annotation "
        "trainenv.io/policy (and the counts) on the pod template, or fix "
        "the access");
  // A runtime that is not there: 404, in the walk's own words.
  const auto missing = settle({trainer_job(), trainer_jobset(),
                               trainjob({{"runtimeRef", {{"name", "torch-distributed"}}}})});
  REQUIRE_FALSE(missing);
  CHECK(missing.code() == 404);
  CHECK_THAT(missing.message(),
             Contains("could not read ClusterTrainingRuntime torch-distributed: not found "
                      "(deleted, or recreated under another uid)"));
  // A runtime kind trainenv does not know.
  const auto odd = settle({trainer_job(), trainer_jobset(),
                           trainjob({{"runtimeRef", {{"name", "x"}, {"kind", "OddRuntime"}}}})});
  REQUIRE_FALSE(odd);
  CHECK_THAT(odd.message(), Contains("TrainJob team-a/llama names runtime OddRuntime x, not a "
                                     "known runtime kind"));
  // A JobSet no TrainJob owns: no settings, and no error.
  const auto plain = settle({trainer_job(), trainer_jobset(false)});
  REQUIRE(plain);
  CHECK(*plain == nullptr);
}

TEST_CASE("owner walk: wired owners, the kind a pod's labels name, and bare pods", "[owner_walk]") {
  const auto& kinds = walk_kinds();
  const json wired = {
      {"metadata",
       {{"namespace", "team-a"},
        {"ownerReferences", controller("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid")}}}};
  const pod_view wired_view(wired);
  const auto* by = wired_owner(wired_view, kinds);
  REQUIRE(by != nullptr);
  CHECK(by->wired_by == "Kubeflow's training operator");
  CHECK(has_controller(wired_view));
  CHECK(pod_owner_kind(wired_view, kinds) == by);

  // A JobSet pod carries its JobSet's and its Job's labels: the JobSet, which knows every role.
  const json pod = trainer_pod();
  const pod_view view(pod);
  CHECK(wired_owner(view, kinds) == nullptr);
  const std::string_view* job = nullptr;
  const auto* kind = kind_by_labels(view, kinds, &job);
  REQUIRE(kind != nullptr);
  CHECK(kind->kind == "JobSet");
  REQUIRE(job != nullptr);
  CHECK(*job == "llama");
  // Its controlling owner's kind first: the Job.
  REQUIRE(pod_owner_kind(view, kinds) != nullptr);
  CHECK(pod_owner_kind(view, kinds)->kind == "Job");

  // A Job's label alone, here as an annotation: the Job.
  const json job_pod = {
      {"metadata", {{"annotations", {{"batch.kubernetes.io/job-name", "solo-job"}}}}}};
  const pod_view job_view(job_pod);
  job = nullptr;
  const auto* single = kind_by_labels(job_view, kinds, &job);
  REQUIRE(single != nullptr);
  CHECK(single->kind == "Job");
  CHECK(*job == "solo-job");
  CHECK_FALSE(has_controller(job_view));
  CHECK(wired_owner(job_view, kinds) == nullptr);

  const json bare = {{"metadata", {{"name", "b"}}}};
  const pod_view bare_view(bare);
  job = nullptr;
  CHECK(kind_by_labels(bare_view, kinds, &job) == nullptr);
  CHECK(job == nullptr);
  CHECK(pod_owner_kind(bare_view, kinds) == nullptr);
}

TEST_CASE("owner walk: counts come from the JobSet, through the Job when labels do not name it",
          "[owner_walk]") {
  const auto& kinds = walk_kinds();
  // Without JobSet's pod labels the Job is read first, then the JobSet that controls it.
  json pod = trainer_pod();
  pod["metadata"]["labels"].erase("jobset.sigs.k8s.io/jobset-name");
  const pod_view view(pod);
  owner_values owners;
  std::vector<owner_ref> asked;
  const auto found = walk_with([&] { return counts_from_owners(view, "node", owners, kinds); },
                               {trainer_job(), trainer_jobset()}, owners, asked);
  CHECK(asked == std::vector<owner_ref>{job_ref, jobset_ref});
  const auto& counts = std::get<result<std::optional<owner_counts>>>(found);
  REQUIRE(counts);
  REQUIRE(*counts);
  const auto& c = **counts;
  CHECK(c.every_role);
  CHECK(c.owner == "JobSet team-a/llama");
  CHECK(c.ref == jobset_ref);
  CHECK(c.name == "llama");
  REQUIRE(c.kind != nullptr);
  CHECK(c.kind->kind == "JobSet");
  REQUIRE(c.roles.size() == 2);
  REQUIRE(c.find("node") != nullptr);
  CHECK(c.find("node")->pods == 2);
  CHECK(c.find("dataset-initializer")->pods == 1);
  CHECK(c.find("launcher") == nullptr);

  // With JobSet's labels (name and uid) the JobSet is read at once.
  json labelled = trainer_pod();
  labelled["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = "js-uid";
  const pod_view labelled_view(labelled);
  owner_values direct;
  std::vector<owner_ref> asked_direct;
  (void)walk_with([&] { return counts_from_owners(labelled_view, "node", direct, kinds); },
                  {trainer_jobset()}, direct, asked_direct);
  CHECK(asked_direct == std::vector<owner_ref>{jobset_ref});
}

TEST_CASE("owner walk: a plain Job gives its own role, and unknown owners are refused",
          "[owner_walk]") {
  const auto& kinds = walk_kinds();
  const json job = {{"apiVersion", "batch/v1"},
                    {"kind", "Job"},
                    {"metadata", {{"name", "solo"}, {"namespace", "team-a"}, {"uid", "solo-uid"}}},
                    {"spec", {{"parallelism", 4}, {"completions", 3}}}};
  const json pod = {{"metadata",
                     {{"namespace", "team-a"},
                      {"ownerReferences", controller("batch/v1", "Job", "solo", "solo-uid")}}}};
  const pod_view view(pod);
  owner_values owners;
  std::vector<owner_ref> asked;
  const auto found = walk_with([&] { return counts_from_owners(view, "worker", owners, kinds); },
                               {job}, owners, asked);
  const auto& counts = std::get<result<std::optional<owner_counts>>>(found);
  REQUIRE(counts);
  REQUIRE(*counts);
  CHECK_FALSE((*counts)->every_role);
  REQUIRE((*counts)->roles.size() == 1);
  CHECK((*counts)->roles[0].role == "worker");  // named by the pod's role
  CHECK((*counts)->roles[0].pods == 3);         // min(parallelism, completions)

  // The Job gone: the failure, with its code.
  owner_values gone;
  gone.add_failure({"batch/v1", "Job", "team-a", "solo", "solo-uid"}, lookup_failure::timeout);
  const auto failed = std::get<result<std::optional<owner_counts>>>(
      counts_from_owners(view, "worker", gone, kinds));
  REQUIRE_FALSE(failed);
  CHECK(failed.code() == 503);
  CHECK(failed.message() == "Job team-a/solo: timed out");

  // A bare pod: nothing to ask.
  const json bare = {{"metadata", {{"name", "b"}}}};
  const pod_view bare_view(bare);
  const auto none = std::get<result<std::optional<owner_counts>>>(
      counts_from_owners(bare_view, "node", owners, kinds));
  REQUIRE(none);
  CHECK_FALSE(*none);

  // An owner of a kind no document describes.
  const json deployed = {
      {"metadata",
       {{"namespace", "team-a"},
        {"ownerReferences", controller("apps/v1", "ReplicaSet", "web-1", "rs-uid")}}}};
  const pod_view deployed_view(deployed);
  const auto unknown = std::get<result<std::optional<owner_counts>>>(
      counts_from_owners(deployed_view, "node", owners, kinds));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.message() ==
        "ReplicaSet team-a/web-1 (apps/v1) is not an owner kind trainenv knows how to read");
}

}  // namespace owner_walk_unit_tests
