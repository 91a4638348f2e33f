// docs/contract.md §2: where each value comes from, in order, and what a missing or bad one means.
#include <catch2/catch.hpp>

#include "owner_kind_support.hpp"
#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/job/topology.hpp"

using nlohmann::json;
using namespace trainenv::core;

namespace {

policy torch_like() {
  auto p = parse_policy(json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy",
    "metadata": {"name": "torch"},
    "spec": {"frameworks": ["torch"], "default": true,
             "defaults": {"masterPort": 29500, "numNodes": 1, "nprocPerNode": "auto"},
             "env": [{"name": "NNODES", "value": "${numNodes}"}]}
  })"),
                        "inline");
  REQUIRE(p.ok());
  return std::move(p).value();
}

json pod(json labels, json annotations = json::object(), json resources = json::object()) {
  labels["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  return {
      {"metadata", {{"labels", std::move(labels)}, {"annotations", std::move(annotations)}}},
      {"spec",
       {{"containers", json::array({{{"name", "node"}, {"resources", std::move(resources)}}})}}}};
}

// What the engine gives resolve_topology for a pod whose owners are not read: the owner kinds.
topology_sources no_owners() {
  topology_sources src;
  src.kinds = &trainenv::test::standard_owner_kinds();
  return src;
}

topology resolve_ok(const json& p, const policy& pol = torch_like()) {
  auto t = resolve_topology(pod_view(p), pol,
                            choose_container(pod_view(p), pol, {}).index.value_or(0), no_owners());
  INFO((t.ok() ? std::string() : t.message()));
  REQUIRE(t.ok());
  return std::move(t).value();
}

std::string resolve_error(const json& p, const policy& pol = torch_like()) {
  auto t = resolve_topology(pod_view(p), pol,
                            choose_container(pod_view(p), pol, {}).index.value_or(0), no_owners());
  REQUIRE_FALSE(t.ok());
  return t.message();
}

std::string nproc_for(json resources, std::string annotation = "") {
  json annotations = json::object();
  if (!annotation.empty()) annotations["trainenv.io/nproc-per-node"] = annotation;
  return resolve_ok(
             pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}, annotations, std::move(resources)))
      .nproc_per_node.text();
}

}  // namespace

TEST_CASE("job name: the owner kinds' job labels, kinds with roles first, then spec.subdomain",
          "[topology]") {
  // owners.yaml's podLabels.job: JobSet's and Volcano's (kinds with roles), then TrainJob's (no
  // roles), then the Job's (one role); a label before an annotation of the same key.
  json p = pod({{"jobset.sigs.k8s.io/jobset-name", "a"},
                {"trainer.kubeflow.org/trainjob-name", "b"},
                {"volcano.sh/job-name", "c"},
                {"batch.kubernetes.io/job-name", "e"}});
  p["spec"]["subdomain"] = "d";
  CHECK(resolve_ok(p).job == "a");
  p["metadata"]["labels"].erase("jobset.sigs.k8s.io/jobset-name");
  CHECK(resolve_ok(p).job == "c");
  p["metadata"]["labels"].erase("volcano.sh/job-name");
  p["metadata"]["annotations"]["volcano.sh/job-name"] = "c2";
  CHECK(resolve_ok(p).job == "c2");
  p["metadata"]["annotations"].erase("volcano.sh/job-name");
  CHECK(resolve_ok(p).job == "b");
  p["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-name");
  CHECK(resolve_ok(p).job == "e");
  p["metadata"]["labels"].erase("batch.kubernetes.io/job-name");
  CHECK(resolve_ok(p).job == "d");
}

TEST_CASE("job name missing is a violation naming the keys to set", "[topology]") {
  const auto message = resolve_error(pod(json::object()));
  CHECK(message.rfind("trainenv: ", 0) == 0);
  CHECK_THAT(message, Catch::Contains("jobset.sigs.k8s.io/jobset-name"));
  CHECK_THAT(message, Catch::Contains("spec.subdomain"));
}

TEST_CASE("role: trainenv.io/role, then replicatedjob-name, then volcano task-spec, else node",
          "[topology]") {
  json p = pod({{"jobset.sigs.k8s.io/jobset-name", "j"},
                {"jobset.sigs.k8s.io/replicatedjob-name", "launcher"},
                {"volcano.sh/task-spec", "ps"}},
               {{"trainenv.io/role", "evaluator"}});
  CHECK(resolve_ok(p).role == "evaluator");
  p["metadata"]["annotations"].erase("trainenv.io/role");
  CHECK(resolve_ok(p).role == "launcher");
  p["metadata"]["labels"].erase("jobset.sigs.k8s.io/replicatedjob-name");
  CHECK(resolve_ok(p).role == "ps");
  p["metadata"]["labels"].erase("volcano.sh/task-spec");
  CHECK(resolve_ok(p).role == "node");
}

TEST_CASE("index: the owner kinds' index labels, a label before its annotation, then name suffix",
          "[topology]") {
  json p = pod({{"jobset.sigs.k8s.io/jobset-name", "j"},
                {"batch.kubernetes.io/job-completion-index", "2"},
                {"volcano.sh/task-index", "3"}},
               {{"batch.kubernetes.io/job-completion-index", "1"}, {"trainenv.io/num-nodes", "8"}});
  p["metadata"]["name"] = "j-node-5";
  CHECK(resolve_ok(p).index == 3);  // Volcano's (a kind with roles) before the Job's
  p["metadata"]["labels"].erase("volcano.sh/task-index");
  CHECK(resolve_ok(p).index == 2);
  p["metadata"]["labels"].erase("batch.kubernetes.io/job-completion-index");
  CHECK(resolve_ok(p).index == 1);
  p["metadata"]["annotations"].erase("batch.kubernetes.io/job-completion-index");
  CHECK(resolve_ok(p).index == 5);
}

TEST_CASE("a new owner kind's pod labels name job, role and index with no code",
          "[topology][owners]") {
  // A controller trainenv has never heard of, described only by its OwnerKind's podLabels.
  std::vector<owner_kind> kinds;
  for (const auto& name : {"job", "jobset", "volcano-job", "trainjob"})
    kinds.push_back(trainenv::test::standard_kind(name));
  kinds.push_back(trainenv::test::owner_kind_from_spec("lws", R"({"apiGroup": "example.dev",
      "versions": ["v1"], "kind": "TrainSet", "resource": "trainsets",
      "roles": {"list": "spec.groups", "name": "name", "replicas": "size", "podTemplate": "template"},
      "naming": {"hostname": "${job}-${role}-${index}", "subdomainDefault": "${job}"},
      "podLabels": {"job": "example.dev/set", "role": "example.dev/group",
                    "index": "example.dev/ordinal"}})"));
  auto set = owner_kind_set::build(std::move(kinds));
  REQUIRE(set);
  topology_sources src;
  src.kinds = &*set;
  const json p = pod(
      {{"example.dev/set", "llm"}, {"example.dev/group", "trainer"}, {"example.dev/ordinal", "2"}},
      {{"trainenv.io/replicas", "trainer=4"}});
  const auto pol = torch_like();
  auto t = resolve_topology(pod_view(p), pol, 0, src);
  INFO((t.ok() ? std::string() : t.message()));
  REQUIRE(t.ok());
  CHECK(t->job == "llm");
  CHECK(t->role == "trainer");
  CHECK(t->index == 2);
  CHECK(t->layout.dns_name(t->role_at, 0).value() == "llm-trainer-0.llm");
  CHECK(pod_entry(pod_view(p), *set) == "trainer");
}

TEST_CASE("index that is not a number is a violation naming key and value", "[topology]") {
  const auto message = resolve_error(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}},
                                         {{"batch.kubernetes.io/job-completion-index", "x1"}}));
  CHECK_THAT(message, Catch::Contains("batch.kubernetes.io/job-completion-index") &&
                          Catch::Contains("\"x1\"") && Catch::Contains("whole number"));
}

TEST_CASE("missing index with one replica is index 0", "[topology]") {
  const auto t = resolve_ok(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}));
  CHECK(t.index == 0);
  CHECK(t.node_rank == 0);
  CHECK(t.world_size == 1);
}

TEST_CASE("missing index with several replicas leaves rank unknown with the reason", "[topology]") {
  const auto t =
      resolve_ok(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}, {{"trainenv.io/num-nodes", "4"}}));
  CHECK_FALSE(t.index.has_value());
  CHECK_FALSE(t.node_rank.has_value());
  const auto values = t.variables();
  CHECK_FALSE(values.number(variable::rank).has_value());
  CHECK_THAT(values.unavailable_reason(variable::rank),
             Catch::Contains("index") && Catch::Contains("4 pods") &&
                 Catch::Contains("batch.kubernetes.io/job-completion-index"));
}

TEST_CASE("index beyond the role's replicas is a violation", "[topology]") {
  const auto message = resolve_error(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}},
                                         {{"batch.kubernetes.io/job-completion-index", "3"}}));
  CHECK_THAT(message, Catch::Contains("index 3") && Catch::Contains("trainenv.io/num-nodes"));
}

TEST_CASE("num-nodes must be a whole number >= 1", "[topology]") {
  for (const char* bad : {"abc", "0", "-1", "2.5", ""}) {
    INFO(bad);
    const auto message = resolve_error(
        pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}, {{"trainenv.io/num-nodes", bad}}));
    CHECK_THAT(message, Catch::StartsWith("trainenv: annotation trainenv.io/num-nodes is \"") &&
                            Catch::Contains("whole number"));
  }
  CHECK(resolve_ok(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}},
                       {{"trainenv.io/num-nodes", "16"},
                        {"batch.kubernetes.io/job-completion-index", "0"}}))
            .num_nodes == 16);
  CHECK(resolve_ok(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}})).num_nodes == 1);
}

TEST_CASE("master port: annotation 1-65535, else the policy default", "[topology]") {
  CHECK(resolve_ok(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}})).master_port == 29500);
  CHECK(resolve_ok(
            pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}, {{"trainenv.io/master-port", "1234"}}))
            .master_port == 1234);
  for (const char* bad : {"0", "65536", "port"}) {
    INFO(bad);
    CHECK_THAT(resolve_error(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}},
                                 {{"trainenv.io/master-port", bad}})),
               Catch::Contains("trainenv.io/master-port"));
  }
}

TEST_CASE("processes per node from CPU quantities follow Kubeflow's table", "[topology][nproc]") {
  const std::vector<std::pair<const char*, const char*>> table = {
      {"4", "4"}, {"2", "2"}, {"3", "3"}, {"2.5", "3"}, {"0.7", "1"}, {"2500m", "3"}, {"3.7", "4"}};
  for (const auto& [cpu, expected] : table) {
    INFO(cpu);
    CHECK(nproc_for({{"requests", {{"cpu", cpu}}}}) == expected);
  }
  CHECK(nproc_for(json::object()) == "1");
}

TEST_CASE("processes per node: requests before limits", "[topology][nproc]") {
  CHECK(nproc_for({{"requests", {{"cpu", "2"}}}, {"limits", {{"cpu", "6"}}}}) == "2");
  CHECK(nproc_for({{"limits", {{"cpu", "6"}}}}) == "6");
}

TEST_CASE("auto stays auto when the container asks for any *gpu* resource", "[topology][nproc]") {
  CHECK(nproc_for({{"limits", {{"nvidia.com/gpu", "4"}}}, {"requests", {{"cpu", "8"}}}}) == "auto");
  CHECK(nproc_for({{"requests", {{"amd.com/GPU", "1"}}}}) == "auto");
  CHECK(nproc_for({{"limits", {{"nvidia.com/gpu", "4"}}}}, "cpu") == "1");
}

TEST_CASE("an explicit nproc-per-node is kept and gpu stays gpu while cpu counts CPUs",
          "[topology][nproc]") {
  CHECK(nproc_for({{"requests", {{"cpu", "8"}}}}, "2") == "2");
  CHECK(nproc_for({{"requests", {{"cpu", "8"}}}}, "gpu") == "gpu");
  CHECK(nproc_for({{"requests", {{"cpu", "8"}, {"nvidia.com/gpu", "1"}}}}, "cpu") == "8");
}

TEST_CASE("bad nproc-per-node or CPU quantity is a violation naming the value",
          "[topology][nproc]") {
  CHECK_THAT(resolve_error(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}},
                               {{"trainenv.io/nproc-per-node", "many"}})),
             Catch::Contains("trainenv.io/nproc-per-node") && Catch::Contains("\"many\"") &&
                 Catch::Contains("auto"));
  CHECK_THAT(resolve_error(pod({{"jobset.sigs.k8s.io/jobset-name", "j"}}, json::object(),
                               {{"requests", {{"cpu", "lots"}}}})),
             Catch::Contains("resources.requests.cpu") && Catch::Contains("\"lots\"") &&
                 Catch::Contains("2500m"));
}

TEST_CASE("replicas annotation parses role=count pairs", "[topology][replicas]") {
  auto r = parse_replicas(" master=1, worker = 3 ,extra=0");
  REQUIRE(r.ok());
  CHECK(*r == std::vector<std::pair<std::string, std::int64_t>>{
                  {"master", 1}, {"worker", 3}, {"extra", 0}});
  for (const char* bad :
       {"", "master", "master=x", "master=1,master=2", "Master=1", "master=1,", "=3"}) {
    INFO(bad);
    auto failed = parse_replicas(bad);
    REQUIRE_FALSE(failed.ok());
    CHECK_THAT(failed.message(),
               Catch::Contains("trainenv.io/replicas") && Catch::Contains("master=1,worker=3"));
  }
}

TEST_CASE("rank and world count only training roles, in master, worker, node order",
          "[topology][rank]") {
  const json annotations = {{"trainenv.io/replicas", "master=1,worker=3,extra=4"}};
  auto worker = pod({{"jobset.sigs.k8s.io/jobset-name", "j"},
                     {"volcano.sh/task-spec", "worker"},
                     {"volcano.sh/task-index", "2"}},
                    annotations);
  auto t = resolve_ok(worker);
  CHECK(t.training_role);
  CHECK(t.world_size == 4);
  CHECK(t.node_rank == 3);

  auto master = pod({{"jobset.sigs.k8s.io/jobset-name", "j"}, {"volcano.sh/task-spec", "master"}},
                    annotations);
  t = resolve_ok(master);
  CHECK(t.node_rank == 0);
  CHECK(t.world_size == 4);

  auto extra = pod({{"jobset.sigs.k8s.io/jobset-name", "j"},
                    {"volcano.sh/task-spec", "extra"},
                    {"volcano.sh/task-index", "1"}},
                   annotations);
  t = resolve_ok(extra);
  CHECK_FALSE(t.training_role);
  CHECK_FALSE(t.node_rank.has_value());
  CHECK_FALSE(t.world_size.has_value());
}

TEST_CASE("a training role missing from the replicas annotation is a violation",
          "[topology][rank]") {
  const auto message = resolve_error(
      pod({{"jobset.sigs.k8s.io/jobset-name", "j"}, {"volcano.sh/task-spec", "worker"}},
          {{"trainenv.io/replicas", "master=1"}}));
  CHECK_THAT(message, Catch::Contains("\"worker\"") && Catch::Contains("worker=<count>"));
}

TEST_CASE("the target container is the one named node, else the first", "[topology]") {
  json p = pod({{"jobset.sigs.k8s.io/jobset-name", "j"}});
  p["spec"]["containers"] = json::array({{{"name", "sidecar"}}, {{"name", "node"}}});
  CHECK(resolve_ok(p).container == 1);
  p["spec"]["containers"][1]["name"] = "trainer";
  CHECK(resolve_ok(p).container == 0);
  // No container at all: the pod's shape check says so, before topology runs.
  p["spec"]["containers"] = json::array();
  std::size_t target = 0;
  std::string warning;
  CHECK_THAT(check_pod_shape(pod_view(p), torch_like(), {}, target, warning),
             Catch::Contains("spec.containers is empty"));
}

TEST_CASE("an index past its role's replicas is refused when the policy uses the counts",
          "[topology]") {
  auto counted = parse_policy(json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy", "metadata": {"name": "c"},
    "spec": {"env": [{"name": "NNODES", "value": "${numNodes}"}]}})"),
                              "inline");
  REQUIRE(counted);
  CHECK(uses_counts(*counted));
  const json p = pod(
      {{"jobset.sigs.k8s.io/jobset-name", "j"}, {"batch.kubernetes.io/job-completion-index", "3"}});
  CHECK_THAT(resolve_error(p, *counted),
             Catch::Contains("index 3 of role \"node\" is out of range") &&
                 Catch::Contains("trainenv.io/num-nodes"));
  // A policy that uses no count never learns the job's size: the index is not checked.
  auto uncounted = parse_policy(json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy", "metadata": {"name": "u"},
    "spec": {"env": [{"name": "JOB", "value": "${job}"}]}})"),
                                "inline");
  REQUIRE(uncounted);
  CHECK_FALSE(uses_counts(*uncounted));
  CHECK(resolve_ok(p, *uncounted).index == 3);
}
