// A whole job before it is submitted (core/preview/job_preview.hpp): every pod its controllers
// make, decided with the job's own objects as owners, then the whole-job checks (ranks, master,
// world), with a policy and owner kinds built in the test.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "owner_kind_support.hpp"
#include "trainenv/core/preview/job_preview.hpp"

namespace job_preview_tests {

using namespace trainenv::core;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

policy_set preview_policy_set() {
  auto kinds = owner_kind_set::build({
      trainenv::test::standard_kind("job"),
      trainenv::test::standard_kind("jobset"),
  });
  if (!kinds) FAIL(kinds.message());
  auto p = parse_policy(json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy",
    "metadata": {"name": "preview-torch"},
    "spec": {
      "frameworks": ["torch"], "default": true, "container": "node",
      "defaults": {"masterPort": 29500, "numNodes": 1},
      "env": [
        {"name": "NNODES", "value": "${numNodes}"},
        {"name": "NODE_RANK", "value": "${nodeRank}", "roles": ["training"]},
        {"name": "MASTER_ADDR", "value": "${masterAddr}"},
        {"name": "MASTER_PORT", "value": "${masterPort}"},
        {"name": "WORLD_SIZE", "value": "${worldSize}", "roles": ["training"]},
        {"name": "RANK", "value": "${rank}", "roles": ["training"]}
      ]
    }})"),
                        "preview-torch.json");
  if (!p) FAIL(p.message());
  std::vector<policy> policies;
  policies.push_back(std::move(p).value());
  auto set = policy_set::build(std::move(policies), std::move(kinds).value());
  if (!set) FAIL(set.message());
  return std::move(set).value();
}

const policy_set& preview_policies() {
  static const policy_set set = preview_policy_set();
  return set;
}

// A replicatedJob whose pods carry Trainer's trainer label (or `step`), `pods` to a Job.
json trained_rj(const std::string& name, int replicas, int pods,
                const std::string& step = "trainer") {
  json out = {{"name", name}, {"replicas", replicas}};
  auto& spec = out["template"]["spec"];
  spec["parallelism"] = pods;
  spec["completions"] = pods;
  if (!step.empty())
    spec["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = step;
  spec["template"]["spec"]["containers"] = json::array({{{"name", "node"}, {"image", "x"}}});
  return out;
}

json preview_jobset(json replicated_jobs) {
  return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", {{"name", "bert"}, {"namespace", "team-a"}}},
          {"spec", {{"replicatedJobs", std::move(replicated_jobs)}}}};
}

std::string admitted_env(const previewed_pod& p, const std::string& name) {
  for (const auto& e : p.admitted["spec"]["containers"][0].value("env", json::array())) {
    if (e["name"] == name) return e.value("value", "<valueFrom>");
  }
  return "<absent>";
}

// Sets a pod's admitted env entry `name` to `value` (a pod told something else).
void tell(previewed_pod& p, const std::string& name, const std::string& value) {
  for (auto& e : p.admitted["spec"]["containers"][0]["env"]) {
    if (e["name"] == name) e["value"] = value;
  }
}

std::vector<std::string> messages(const std::vector<job_problem>& problems) {
  std::vector<std::string> out;
  for (const auto& p : problems) out.push_back(p.message);
  return out;
}

TEST_CASE("job preview: every pod of a JobSet decided, agreeing on ranks and master",
          "[job_preview]") {
  const auto preview = preview_job(
      preview_jobset(json::array(
          {trained_rj("initializer", 1, 1, "dataset-initializer"), trained_rj("node", 2, 2)})),
      {}, preview_policies());
  REQUIRE(preview);
  INFO("problems: " << json(messages(preview->problems)).dump());
  CHECK(preview->ok());
  CHECK(preview->job.kind == "JobSet");
  CHECK(preview->job.pods.empty());  // moved into pods
  REQUIRE(preview->pods.size() == 5);
  // The initializer passes unchanged; the four nodes are one world.
  const auto& init = preview->pods[0];
  CHECK(init.created.role == "initializer");
  CHECK(init.d.passed == pass_reason::not_training);
  CHECK(init.admitted == init.created.pod);
  std::vector<std::int64_t> ranks;
  for (std::size_t i = 1; i < preview->pods.size(); ++i) {
    const auto& p = preview->pods[i];
    INFO(p.created.name);
    CHECK(p.d.verdict() == outcome::patched);
    CHECK(p.d.policy == "preview-torch");
    CHECK(p.num_nodes == "4");
    CHECK(p.world_size == "4");
    CHECK(p.master == "bert-node-0-0.bert");
    CHECK(p.master_port == "29500");
    CHECK(p.dns_name == p.created.name + ".bert");
    CHECK(p.d.layout_name == p.dns_name);
    REQUIRE(p.node_rank);
    CHECK(p.rank == p.node_rank);
    CHECK(admitted_env(p, "NODE_RANK") == std::to_string(*p.node_rank));
    ranks.push_back(*p.node_rank);
  }
  CHECK(ranks == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(preview->pods[3].created.name == "bert-node-1-0");
  CHECK_FALSE(preview->elastic);
  CHECK(preview->job.notes.empty());
}

TEST_CASE("job preview: the whole-job checks name pods that disagree", "[job_preview]") {
  auto preview =
      preview_job(preview_jobset(json::array({trained_rj("node", 1, 3)})), {}, preview_policies());
  REQUIRE(preview);
  REQUIRE(preview->ok());
  REQUIRE(preview->pods.size() == 3);
  CHECK(check_job(preview->job, preview->pods, preview_policies()).empty());

  // Two pods told node rank 1, none 2.
  tell(preview->pods[2], "NODE_RANK", "1");
  auto problems = check_job(preview->job, preview->pods, preview_policies());
  REQUIRE(problems.size() >= 2);
  CHECK(problems[0].message == "pods share node rank 1");
  CHECK(problems[0].pods == std::vector<std::string>{"bert-node-0-1", "bert-node-0-2"});
  CHECK(problems[1].message == "node ranks of the 3 pods are not 0..2: missing 2");

  // A pod told another master.
  tell(preview->pods[2], "NODE_RANK", "2");
  tell(preview->pods[1], "MASTER_ADDR", "elsewhere");
  problems = check_job(preview->job, preview->pods, preview_policies());
  const auto said = messages(problems);
  REQUIRE_FALSE(said.empty());
  CHECK(said[0] ==
        "pods disagree on the master address: bert-node-0-0.bert (2 pods); elsewhere "
        "(1 pod)");
  CHECK(problems[0].pods ==
        std::vector<std::string>{"bert-node-0-0", "bert-node-0-2", "bert-node-0-1"});
}

TEST_CASE("job preview: a denied pod is a problem of the job", "[job_preview]") {
  auto rj = trained_rj("node", 1, 2);
  rj["template"]["spec"]["template"]["metadata"]["annotations"]["trainenv.io/policy"] = "nope";
  const auto preview = preview_job(preview_jobset(json::array({rj})), {}, preview_policies());
  REQUIRE(preview);
  CHECK_FALSE(preview->ok());
  REQUIRE(preview->problems.size() == 2);
  CHECK(preview->problems[0].message ==
        "denied: trainenv: annotation trainenv.io/policy is \"nope\", which is not a loaded "
        "policy; use one of: preview-torch");
  CHECK(preview->problems[0].pods == std::vector<std::string>{"bert-node-0-0"});
  // A denied pod is shown as it was created.
  CHECK(preview->pods[1].admitted == preview->pods[1].created.pod);
  CHECK_FALSE(preview->pods[1].node_rank);
}

TEST_CASE("job preview: a job with no training pod is a problem", "[job_preview]") {
  const auto preview = preview_job(preview_jobset(json::array({trained_rj("web", 1, 2, "")})), {},
                                   preview_policies());
  REQUIRE(preview);
  for (const auto& p : preview->pods) {
    CHECK(p.d.passed == pass_reason::not_training);
    CHECK(p.admitted == p.created.pod);
  }
  REQUIRE(preview->problems.size() == 1);
  CHECK(preview->problems[0].message.rfind(
            "no pod of the job is a training pod: none carries label "
            "trainer.kubeflow.org/trainjob-ancestor-step: trainer, itself or on its Job",
            0) == 0);
  CHECK(preview->problems[0].pods == std::vector<std::string>{"bert-web-0-0", "bert-web-0-1"});
}

TEST_CASE("job preview: a job that creates no pod is a problem", "[job_preview]") {
  const auto preview =
      preview_job(preview_jobset(json::array({trained_rj("node", 1, 0)})), {}, preview_policies());
  REQUIRE(preview);
  CHECK(preview->pods.empty());
  REQUIRE(preview->problems.size() == 1);
  CHECK(preview->problems[0].message ==
        "the job creates no pod: every role has 0 replicas (or gives none), so nothing trains; "
        "fix: set the roles' replicas");
  CHECK(preview->problems[0].pods.empty());
}

TEST_CASE("job preview: a job that cannot be laid out is an error", "[job_preview]") {
  const auto not_job =
      preview_job(json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}}, {},
                  preview_policies());
  REQUIRE_FALSE(not_job);
  CHECK(not_job.message() ==
        "trainenv: a job preview lays out a TrainJob, a JobSet, a batch/v1 Job or a Volcano Job; "
        "this is v1 Pod");
  // A replicatedJob's template that is a list, not an object.
  auto rj = trained_rj("node", 1, 1);
  rj["template"] = json::array();
  const auto malformed = preview_job(preview_jobset(json::array({rj})), {}, preview_policies());
  REQUIRE_FALSE(malformed);
  CHECK_THAT(malformed.message(), StartsWith("trainenv: the job is malformed: "));
  // Past the preview's bound.
  const auto big = preview_job(preview_jobset(json::array({trained_rj("node", 2, 3)})), {},
                               preview_policies(), {5, 100, 1U << 20});
  REQUIRE_FALSE(big);
  CHECK_THAT(big.message(), Contains("more than 5 pods"));
}

TEST_CASE("job preview: a role launching as the training roles do, unlabelled, is a problem",
          "[job_preview]") {
  auto master = trained_rj("master", 1, 1);
  master["template"]["spec"]["template"]["spec"]["containers"][0]["command"] =
      json::array({"torchrun", "/workspace/train.py"});
  // The same launcher behind a shell and as Python's module: still torchrun.
  auto worker = trained_rj("worker", 1, 2, "");
  worker["template"]["spec"]["template"]["spec"]["containers"][0]["command"] =
      json::array({"/bin/sh", "-c", "NCCL_DEBUG=INFO exec python3 -m torch.distributed.run t.py"});
  // A side role running another program is no mistake; nor is torchrun on one node of its own
  // (an evaluator), however its flags say so.
  auto board = trained_rj("tensorboard", 1, 1, "");
  board["template"]["spec"]["template"]["spec"]["containers"][0]["command"] =
      json::array({"tensorboard", "--logdir=/logs"});
  auto eval = trained_rj("eval", 1, 1, "");
  eval["template"]["spec"]["template"]["spec"]["containers"][0]["command"] =
      json::array({"torchrun", "--standalone", "--nproc-per-node", "2", "eval.py"});
  auto smoke = trained_rj("smoke", 1, 1, "");
  smoke["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = json::array(
      {"python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--nnodes", "1", "t.py"});
  // ... but a flag of the script's, past its name, does not make torchrun's run one node.
  auto late = trained_rj("late", 1, 1, "");
  late["template"]["spec"]["template"]["spec"]["containers"][0]["command"] =
      json::array({"torchrun", "t.py", "--nnodes=1"});
  const auto preview = preview_job(
      preview_jobset(json::array({master, worker, board, eval, smoke})), {}, preview_policies());
  REQUIRE(preview);
  REQUIRE(preview->problems.size() == 1);
  CHECK(preview->problems[0].message.rfind(
            "role worker runs torchrun as training role master does, but is not a training pod",
            0) == 0);
  CHECK(preview->problems[0].pods ==
        std::vector<std::string>{"bert-worker-0-0", "bert-worker-0-1"});
  const auto with_late =
      preview_job(preview_jobset(json::array({master, worker, board, eval, smoke, late})), {},
                  preview_policies());
  REQUIRE(with_late);
  REQUIRE(with_late->problems.size() == 2);
  CHECK(with_late->problems[0].message.rfind("role late runs torchrun as training role master",
                                             0) == 0);

  // Labelled, the same job is fine.
  worker["template"]["spec"]["template"]["metadata"]["labels"]
        ["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const auto fixed =
      preview_job(preview_jobset(json::array({master, worker, board})), {}, preview_policies());
  REQUIRE(fixed);
  CHECK(fixed->ok());
}

TEST_CASE("unknown trainenv.io keys: a warning each, with the key meant", "[job_preview]") {
  const std::vector<std::string_view> keys = {"trainenv.io/num-node", "trainenv.io/num-nodes",
                                              "other.io/num-node", "trainenv.io/zzzzzzzz"};
  CHECK(unknown_key_warnings(keys, "annotation") ==
        std::vector<std::string>{
            "trainenv: unknown annotation trainenv.io/num-node (did you mean "
            "trainenv.io/num-nodes?)",
            "trainenv: unknown annotation trainenv.io/zzzzzzzz: trainenv reads no such key"});
  // Every key trainenv knows is known: none warns.
  CHECK(unknown_key_warnings(keys::known, "label").empty());
  // Many unknown keys: five lines at most.
  std::vector<std::string> many;
  for (int i = 0; i < 50; ++i) many.push_back("trainenv.io/x" + std::to_string(i));
  const std::vector<std::string_view> views(many.begin(), many.end());
  const auto warnings = unknown_key_warnings(views, "label", " on JobSet team-a/bert");
  REQUIRE(warnings.size() == 5);
  CHECK(warnings.back() == "trainenv: more unknown trainenv.io/ labels on JobSet team-a/bert");
}

TEST_CASE("an owner's unknown key warns at admission, and once in the job preview",
          "[job_preview]") {
  auto job = preview_jobset(json::array({trained_rj("node", 1, 2)}));
  job["metadata"]["annotations"]["trainenv.io/elastc"] = "2:4";
  const auto preview = preview_job(job, {}, preview_policies());
  REQUIRE(preview);
  const std::string warning =
      "trainenv: unknown annotation trainenv.io/elastc on JobSet team-a/bert (did you mean "
      "trainenv.io/elastic?)";
  CHECK(preview->job.notes == std::vector<std::string>{warning});
  REQUIRE(preview->pods.size() == 2);
  for (const auto& p : preview->pods) CHECK(p.d.warnings.empty());

  // A pod of it at admission: warned, as the owner walk reads the JobSet (through its Job).
  const auto d = decide(preview->pods[0].created.pod, preview_policies(), {},
                        [&](const owner_ref& ref, owner_values& owners) {
                          if (const auto* o = find_object(preview->job.objects, ref)) {
                            owners.add(ref, *o);
                          } else {
                            owners.add_failure(ref, lookup_failure::not_found);
                          }
                        });
  REQUIRE(d.allowed);
  CHECK(d.warnings == std::vector<std::string>{warning});
}

}  // namespace job_preview_tests
