// What the controllers create for an applied job (core/preview/controllers.hpp): the Job
// controller's pods, JobSet's Jobs, Service and labels, Kubeflow Trainer's JobSet and the env its
// plugins write, and the errors a job that cannot be laid out gives.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "trainenv/core/preview/controllers.hpp"

namespace controllers_tests {

using namespace trainenv::core;
using Catch::Matchers::Contains;
using nlohmann::json;

json batch_job(int parallelism, int completions, bool indexed) {
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "train"}}},
              {"spec",
               {{"parallelism", parallelism},
                {"completions", completions},
                {"template",
                 {{"metadata", {{"labels", {{"app", "t"}}}}},
                  {"spec", {{"containers", json::array({{{"name", "node"}}})}}}}}}}};
  if (indexed) job["spec"]["completionMode"] = "Indexed";
  return job;
}

json rj(const std::string& name, int replicas, int pods) {
  json out = {{"name", name}, {"replicas", replicas}};
  out["template"]["spec"]["parallelism"] = pods;
  out["template"]["spec"]["completions"] = pods;
  out["template"]["spec"]["template"]["spec"]["containers"] = json::array({{{"name", "node"}}});
  return out;
}

json jobset(json replicated_jobs, json network = nullptr) {
  json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
             {"kind", "JobSet"},
             {"metadata", {{"name", "bert"}, {"namespace", "team-a"}, {"uid", "js-uid"}}},
             {"spec", {{"replicatedJobs", std::move(replicated_jobs)}}}};
  if (!network.is_null()) js["spec"]["network"] = std::move(network);
  return js;
}

std::vector<std::string> pod_names(const created_job& job) {
  std::vector<std::string> out;
  for (const auto& p : job.pods) out.push_back(p.name);
  return out;
}

std::vector<std::string> object_kinds(const created_job& job) {
  std::vector<std::string> out;
  for (const auto& o : job.objects)
    out.push_back(o.value("kind", "?") + " " + o["metadata"].value("name", "?"));
  return out;
}

std::string env_of(const json& container, const std::string& name) {
  for (const auto& e : container.value("env", json::array())) {
    if (e["name"] == name) return e.contains("value") ? e["value"].dump() : e["valueFrom"].dump();
  }
  return "<absent>";
}

TEST_CASE("controllers: an Indexed Job runs min(parallelism, completions) named pods",
          "[controllers]") {
  const auto created = create_job(batch_job(3, 2, true), {});
  REQUIRE(created);
  CHECK(created->kind == "Job");
  CHECK(created->name == "train");
  CHECK(created->namespace_name == "default");
  REQUIRE(created->objects.size() == 1);
  // The applied Job, with the namespace and a made-up uid the pods' references name.
  const auto& job = created->objects[0];
  CHECK(job["metadata"]["namespace"] == "default");
  const std::string uid = job["metadata"]["uid"];
  CHECK_FALSE(uid.empty());
  CHECK(pod_names(*created) == std::vector<std::string>{"train-0", "train-1"});
  const auto& pod = created->pods[1].pod;
  CHECK(created->pods[1].role == "node");
  CHECK_FALSE(created->pods[1].prerequisite);
  CHECK(pod["metadata"]["generateName"] == "train-1-");
  CHECK(pod["metadata"]["namespace"] == "default");
  CHECK(pod["metadata"]["labels"]["app"] == "t");
  CHECK(pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "train");
  CHECK(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1");
  CHECK(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1");
  CHECK(pod["spec"]["hostname"] == "train-1");
  const auto& ref = pod["metadata"]["ownerReferences"][0];
  CHECK(ref["kind"] == "Job");
  CHECK(ref["name"] == "train");
  CHECK(ref["uid"] == uid);
  CHECK(ref["controller"] == true);
}

TEST_CASE("controllers: a Job that is not Indexed names no hostname", "[controllers]") {
  const auto created = create_job(batch_job(2, 5, false), {});
  REQUIRE(created);
  REQUIRE(created->pods.size() == 2);
  for (const auto& p : created->pods) {
    CHECK(p.name == "train");
    CHECK(p.pod["metadata"]["generateName"] == "train-");
    CHECK_FALSE(p.pod["spec"].contains("hostname"));
    CHECK_FALSE(
        p.pod["metadata"]["annotations"].contains("batch.kubernetes.io/job-completion-index"));
  }
  // A uid the user gave is kept.
  auto given = batch_job(1, 1, true);
  given["metadata"]["uid"] = "mine";
  const auto kept = create_job(given, {});
  REQUIRE(kept);
  CHECK(kept->pods[0].pod["metadata"]["ownerReferences"][0]["uid"] == "mine");
}

TEST_CASE("controllers: a JobSet makes a headless Service, its Jobs and their pods",
          "[controllers]") {
  auto js = jobset(json::array({rj("launcher", 1, 1), rj("node", 2, 2)}));
  js["spec"]["coordinator"] = {{"replicatedJob", "node"}, {"jobIndex", 1}, {"podIndex", 0}};
  const auto created = create_job(js, {});
  REQUIRE(created);
  CHECK(created->kind == "JobSet");
  CHECK(created->namespace_name == "team-a");
  CHECK(object_kinds(*created) == std::vector<std::string>{"JobSet bert", "Service bert",
                                                           "Job bert-launcher-0", "Job bert-node-0",
                                                           "Job bert-node-1"});
  const auto& service = created->objects[1];
  CHECK(service["spec"]["clusterIP"] == "None");
  CHECK(service["spec"]["publishNotReadyAddresses"] == true);
  CHECK(service["spec"]["selector"] == json{{"jobset.sigs.k8s.io/jobset-name", "bert"}});
  CHECK(pod_names(*created) == std::vector<std::string>{"bert-launcher-0-0", "bert-node-0-0",
                                                        "bert-node-0-1", "bert-node-1-0",
                                                        "bert-node-1-1"});
  const auto& pod = created->pods[3];
  CHECK(pod.role == "node");
  const auto& labels = pod.pod["metadata"]["labels"];
  CHECK(labels["jobset.sigs.k8s.io/jobset-name"] == "bert");
  CHECK(labels["jobset.sigs.k8s.io/jobset-uid"] == "js-uid");
  CHECK(labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node");
  CHECK(labels["jobset.sigs.k8s.io/job-index"] == "1");
  CHECK(labels["jobset.sigs.k8s.io/coordinator"] == "bert-node-1-0.bert");
  CHECK(pod.pod["spec"]["hostname"] == "bert-node-1-0");
  CHECK(pod.pod["spec"]["subdomain"] == "bert");
  // Its controller is the Job, whose controller is the JobSet.
  const auto& job = created->objects[4];
  CHECK(pod.pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]);
  CHECK(job["metadata"]["ownerReferences"][0]["uid"] == "js-uid");
  CHECK(job["spec"]["completionMode"] == "Indexed");
}

TEST_CASE("controllers: a JobSet without DNS hostnames makes no Service and says so",
          "[controllers]") {
  auto js = jobset(json::array({rj("node", 1, 2)}), {{"enableDNSHostnames", false}});
  const auto created = create_job(js, {});
  REQUIRE(created);
  CHECK(object_kinds(*created) == std::vector<std::string>{"JobSet bert", "Job bert-node-0"});
  CHECK(created->notes ==
        std::vector<std::string>{"JobSet bert sets enableDNSHostnames: false: its pods have no DNS "
                                 "names"});
  CHECK_FALSE(created->pods[0].pod["spec"].contains("subdomain"));

  // A subdomain of its own names the Service and the pods'.
  const auto named =
      create_job(jobset(json::array({rj("node", 1, 1)}), {{"subdomain", "svc"}}), {});
  REQUIRE(named);
  CHECK(object_kinds(*named)[1] == "Service svc");
  CHECK(named->pods[0].pod["spec"]["subdomain"] == "svc");

  // dependsOn with status Complete: a prerequisite, run to its end first.
  auto ordered = json::array({rj("prepare", 1, 1), rj("node", 1, 1)});
  ordered[1]["dependsOn"] = json::array({{{"name", "prepare"}, {"status", "Complete"}}});
  const auto prerequisite = create_job(jobset(ordered), {});
  REQUIRE(prerequisite);
  CHECK(prerequisite->pods[0].prerequisite);
  CHECK_FALSE(prerequisite->pods[1].prerequisite);
}

TEST_CASE("controllers: Trainer turns a TrainJob and its runtime into a JobSet with torch's env",
          "[controllers]") {
  const json trainjob = json::parse(R"({
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
    "metadata": {"name": "llama", "namespace": "team-a"},
    "spec": {"runtimeRef": {"name": "torch-distributed"},
             "trainer": {"numNodes": 3, "numProcPerNode": 2, "image": "trainer:1",
                         "env": [{"name": "USER_VAR", "value": "u"}]}}})");
  CHECK(job_needs(trainjob) ==
        std::vector<owner_ref>{{"trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "",
                                "torch-distributed", ""}});
  const json runtime = json::parse(R"({
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
             "template": {"spec": {"replicatedJobs": [
               {"name": "node",
                "template": {"metadata": {"labels":
                               {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                             "spec": {"template": {"spec": {"containers": [
                               {"name": "node", "image": "runtime:0"}]}}}}}]}}}})");
  // Without its runtime the TrainJob cannot be laid out.
  const auto missing = create_job(trainjob, {});
  REQUIRE_FALSE(missing);
  CHECK(missing.message() ==
        "trainenv: TrainJob llama names ClusterTrainingRuntime torch-distributed, which could not "
        "be read (preview --job: give it in --owners FILE, or --kubeconfig FILE)");

  const auto created = create_job(trainjob, {runtime});
  REQUIRE(created);
  CHECK(created->kind == "TrainJob");
  CHECK(object_kinds(*created) == std::vector<std::string>{"TrainJob llama", "JobSet llama",
                                                           "Service llama", "Job llama-node-0"});
  // The JobSet is the TrainJob's.
  CHECK(created->objects[1]["metadata"]["ownerReferences"][0]["kind"] == "TrainJob");
  CHECK(pod_names(*created) ==
        std::vector<std::string>{"llama-node-0-0", "llama-node-0-1", "llama-node-0-2"});
  CHECK(created->pods[2].step == "trainer");
  const auto& c = created->pods[2].pod["spec"]["containers"][0];
  CHECK(c["image"] == "trainer:1");
  CHECK(env_of(c, "USER_VAR") == "\"u\"");
  CHECK(env_of(c, "PET_NNODES") == "\"3\"");
  CHECK(env_of(c, "PET_NPROC_PER_NODE") == "\"2\"");
  CHECK(env_of(c, "PET_MASTER_ADDR") == "\"llama-node-0-0.llama\"");
  CHECK(env_of(c, "PET_MASTER_PORT") == "\"29500\"");
  CHECK(
      env_of(c, "PET_NODE_RANK") ==
      R"({"fieldRef":{"fieldPath":"metadata.annotations['batch.kubernetes.io/job-completion-index']"}})");
  CHECK(c["ports"] == json::array({{{"containerPort", 29500}}}));
}

TEST_CASE("controllers: jobs that cannot be laid out are refused with the reason",
          "[controllers]") {
  CHECK(create_job(json::array(), {}).message() == "trainenv: the job is not an object");
  CHECK(
      create_job(json{{"kind", "JobSet"}, {"metadata", {{"generateName", "x-"}}}}, {}).message() ==
      "trainenv: the JobSet has no metadata.name (a generateName is named only when created)");
  CHECK(create_job(json{{"metadata", {{"name", "x"}}}}, {}).message() ==
        "trainenv: a job preview lays out a TrainJob, a JobSet, a batch/v1 Job or a Volcano Job; "
        "this is no kind");
  CHECK(create_job(
            json{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "x"}}}},
            {})
            .message() ==
        "trainenv: a job preview lays out a TrainJob, a JobSet, a batch/v1 Job or a Volcano Job; "
        "this is apps/v1 Deployment");
  CHECK(create_job(jobset(json::array({rj("node", 1025, 1)})), {}).message() ==
        "trainenv: replicatedJob node has 1025 replicas; JobSet allows 0 to 1024");
  CHECK(create_job(jobset(json::array({rj("", 1, 1)})), {}).message() ==
        "trainenv: JobSet bert has a nameless replicatedJob");
  auto no_jobs = jobset(json::array());
  no_jobs["spec"].erase("replicatedJobs");
  CHECK(create_job(no_jobs, {}).message() == "trainenv: JobSet bert has no spec.replicatedJobs");
  // More pods than the preview lays out.
  const auto big = create_job(jobset(json::array({rj("node", 3, 4)})), {}, {10, 100, 1U << 20});
  REQUIRE_FALSE(big);
  CHECK(big.message() ==
        "trainenv: the job runs more than 10 pods; this preview lays out at most that many");
  CHECK(create_job(jobset(json::array({rj("node", 3, 4)})), {}, {12, 100, 1U << 20}));
  CHECK(job_needs(jobset(json::array())).empty());
}

}  // namespace controllers_tests
