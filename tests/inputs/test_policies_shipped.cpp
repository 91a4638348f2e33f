// Every row of docs/contract.md §3, produced by the shipped policy files. Cases are transcribed
// from the upstream plugins' own tests where they exist (named in each TEST_CASE): Kubeflow
// Trainer's pkg/runtime/framework/plugins/{torch,mpi,jax,xgboost} and Volcano's
// pkg/controllers/job/plugins/distributed-framework/pytorch. Every patch is applied with
// nlohmann's json::patch and fed back in: nothing more may be added.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "../core/owner_kind_support.hpp"
#include "../test_support.hpp"
#include "owner_files.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

struct pod_spec {
  std::string job = "trainjob";
  std::string role = "node";
  std::optional<int> index = 0;
  std::string framework;  // label trainer.kubeflow.org/framework
  std::map<std::string, std::string> annotations;
  json resources = json::object();  // of the target container, as requests
  json command = json::array({"python", "train.py"});
  json args;
  std::string container = "node";
  json pod_spec_extra = json::object();  // members merged into the pod's spec
};

json make_pod(const pod_spec& s) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"generateName", s.job + "-" + s.role + "-"},
                {"labels",
                 {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
                  {"jobset.sigs.k8s.io/jobset-name", s.job},
                  {"jobset.sigs.k8s.io/replicatedjob-name", s.role}}},
                {"annotations", json::object()}}},
              {"spec", {{"subdomain", s.job}, {"containers", json::array()}}}};
  if (!s.framework.empty())
    pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = s.framework;
  if (s.index)
    pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
        std::to_string(*s.index);
  for (const auto& [k, v] : s.annotations) pod["metadata"]["annotations"][k] = v;
  for (const auto& [k, v] : s.pod_spec_extra.items()) pod["spec"][k] = v;
  json container = {{"name", s.container}, {"image", "example"}, {"command", s.command}};
  if (!s.args.is_null()) container["args"] = s.args;
  if (!s.resources.empty()) container["resources"] = {{"requests", s.resources}};
  pod["spec"]["containers"].push_back(container);
  return pod;
}

struct outcome {
  core::decision decision;
  json pod;  // mutated
  std::map<std::string, json> env;

  [[nodiscard]] std::string value(const std::string& name) const {
    auto it = env.find(name);
    if (it == env.end()) return "<absent>";
    return it->second.contains("value") ? it->second["value"].get<std::string>() : "<valueFrom>";
  }
  [[nodiscard]] bool has(const std::string& name) const { return env.count(name) != 0; }
  [[nodiscard]] const json& container() const { return pod["spec"]["containers"][0]; }
};

// The decision with no API access, or with the owners of `owners`.
outcome run(const json& pod, const inputs::owner_file* owners = nullptr) {
  const auto decide = [&](const json& p) {
    return owners != nullptr ? test::decide_with(p, *owners)
                             : core::mutate_pod(p, test::shipped_policies());
  };
  outcome out;
  out.decision = decide(pod);
  INFO(out.decision.message);
  REQUIRE(out.decision.allowed);
  out.pod = pod.patch(out.decision.patch());
  const auto again = decide(out.pod);
  CHECK(again.patch().empty());
  CHECK(again.warnings == out.decision.warnings);
  for (const auto& e : out.container().value("env", json::array())) out.env[e["name"]] = e;
  return out;
}

outcome run(const pod_spec& s) {
  return run(make_pod(s));
}

const json* find_named(const json& list, const std::string& key, const std::string& value) {
  for (const auto& item : list) {
    if (item.value(key, std::string()) == value) return &item;
  }
  return nullptr;
}

}  // namespace

// --- torch ------------------------------------------------------------------------------

TEST_CASE("torch: Kubeflow TestTorch nproc_per_node cases", "[shipped][torch]") {
  struct row {
    const char* upstream_case;
    const char* nproc;  // annotation, or "" for the default (auto)
    json resources;
    const char* expected;
  };
  const std::vector<row> rows = {
      {"nproc_per_node=auto with CPU limit", "", {{"cpu", "4"}}, "4"},
      {"nproc_per_node=auto with no CPU resources", "", json::object(), "1"},
      {"nproc_per_node=auto with low CPU limit", "", {{"cpu", "2"}}, "2"},
      {"nproc_per_node=auto with CPU request but no limit", "", {{"cpu", "3"}}, "3"},
      {"nproc_per_node=auto with millicore CPU limit", "", {{"cpu", "2.5"}}, "3"},
      {"nproc_per_node=auto with fractional CPU limit", "", {{"cpu", "0.7"}}, "1"},
      {"nproc_per_node=auto with GPU request should remain auto",
       "",
       {{"example.com/gpu", "2"}},
       "auto"},
      {"explicitly set nproc_per_node should be preserved", "3", {{"cpu", "8"}}, "3"},
      {"nproc_per_node=auto with millicore CPU limit in m format", "", {{"cpu", "2500m"}}, "3"},
      {"nproc_per_node=cpu with CPU limit", "cpu", {{"cpu", "4"}}, "4"},
      {"nproc_per_node=cpu with GPU resources",
       "cpu",
       {{"cpu", "6"}, {"example.com/gpu", "2"}},
       "6"},
      {"nproc_per_node=cpu with fractional CPU", "cpu", {{"cpu", "3.7"}}, "4"},
  };
  for (const auto& r : rows) {
    INFO("upstream case: " << r.upstream_case);
    pod_spec s;
    s.resources = r.resources;
    if (*r.nproc != '\0') s.annotations["trainenv.io/nproc-per-node"] = r.nproc;
    const auto o = run(s);
    CHECK(o.value("PET_NPROC_PER_NODE") == r.expected);
    CHECK(o.value("PET_NNODES") == "1");
  }
}

TEST_CASE("torch: every listed accelerator counts its devices x processes per device",
          "[shipped][torch][accelerators]") {
  // policies/accelerators.yaml, entry by entry: `auto` on a container that asks for 3 devices
  // is 3 x the entry's processes per device (never the CPU count torchrun's auto would take),
  // on every instance type it lists and, with a warning, on a machine it does not name.
  const auto& listed = test::shipped_policies().accelerators();
  REQUIRE(listed.size() >= 4);
  for (const auto& a : listed) {
    INFO("accelerator " << a.resource);
    pod_spec s;
    s.resources = {{"cpu", "2"}, {a.resource, "3"}};
    auto pod = make_pod(s);
    auto o = run(pod);
    CHECK(o.value("PET_NPROC_PER_NODE") == std::to_string(3 * a.processes_per_device));
    const bool warned = !o.decision.warnings.empty();
    CHECK(warned == !a.by_instance_type.empty());
    for (const auto& [type, per_device] : a.by_instance_type) {
      INFO("instance type " << type);
      pod["spec"]["nodeSelector"] = {{"node.kubernetes.io/instance-type", type}};
      o = run(pod);
      CHECK(o.value("PET_NPROC_PER_NODE") == std::to_string(3 * per_device));
      CHECK(o.decision.warnings.empty());
    }
    // gpu says the same; an integer or cpu still wins.
    pod["metadata"]["annotations"]["trainenv.io/nproc-per-node"] = "cpu";
    CHECK(run(pod).value("PET_NPROC_PER_NODE") == "2");
  }
}

TEST_CASE(
    "torch: a Neuron pod asking for devices and their cores counts the first listed, "
    "placed by a required affinity",
    "[shipped][torch][accelerators]") {
  // aws/aws-k8s-tester's BERT job: 16 aws.amazon.com/neuron and 32 aws.amazon.com/neuroncore
  // on a trn1.32xlarge, torchrun --nproc_per_node 32: the cores, not 16 x 2 + 32.
  pod_spec s;
  s.resources = {
      {"cpu", "8"}, {"aws.amazon.com/neuron", "16"}, {"aws.amazon.com/neuroncore", "32"}};
  auto pod = make_pod(s);
  CHECK(run(pod).value("PET_NPROC_PER_NODE") == "32");
  s.resources = {{"aws.amazon.com/neuron", "16"}};
  pod = make_pod(s);
  pod["spec"]["affinity"] = json::parse(R"({"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": ["trn2.48xlarge"]}]}]}}})");
  const auto o = run(pod);
  CHECK(o.value("PET_NPROC_PER_NODE") == "64");
  CHECK(o.decision.warnings.empty());
}

TEST_CASE("torch: Kubeflow 'multi-node multi-GPU training with complete info'",
          "[shipped][torch]") {
  pod_spec s;
  s.index = 2;
  s.annotations = {{"trainenv.io/num-nodes", "4"}};
  s.resources = {{"cpu", "8"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "4"}};
  const auto o = run(s);
  CHECK(o.decision.policy == "torch");
  CHECK(o.value("PET_NNODES") == "4");
  CHECK(o.value("PET_NPROC_PER_NODE") == "auto");
  CHECK(o.value("PET_NODE_RANK") == "2");  // the node rank, a literal (docs/contract.md §2.2)
  CHECK(o.value("PET_MASTER_ADDR") == "trainjob-node-0-0.trainjob");
  CHECK(o.value("PET_MASTER_PORT") == "29500");
  CHECK(o.value("MASTER_ADDR") == "trainjob-node-0-0.trainjob");
  CHECK(o.value("MASTER_PORT") == "29500");
  CHECK(o.value("WORLD_SIZE") == "4");
  CHECK(o.value("RANK") == "2");
  REQUIRE(o.container()["ports"].size() == 1);
  CHECK(o.container()["ports"][0]["containerPort"] == 29500);
}

TEST_CASE("torch: trainenv.io/master-port moves every port-bearing value", "[shipped][torch]") {
  pod_spec s;
  s.annotations = {{"trainenv.io/master-port", "30000"}};
  const auto o = run(s);
  CHECK(o.value("PET_MASTER_PORT") == "30000");
  CHECK(o.value("MASTER_PORT") == "30000");
  CHECK(o.container()["ports"][0]["containerPort"] == 30000);
}

// --- torchtune ----------------------------------------------------------------------------

TEST_CASE("torchtune: a torch pod running `tune run` gets the torchtune policy",
          "[shipped][torchtune]") {
  pod_spec s;
  s.framework = "torch";
  s.command = {"tune", "run"};
  s.args = {"full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"};
  s.index = 1;
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "8"}};
  s.resources = {{"nvidia.com/gpu", "8"}};
  // Kubeflow TestTorch "multi-nodes full fine-tuning with torchtune".
  const auto o = run(s);
  CHECK(o.decision.policy == "torchtune");
  CHECK(o.value("PET_NNODES") == "2");
  CHECK(o.value("PET_NPROC_PER_NODE") == "8");
  CHECK(o.value("PET_NODE_RANK") == "1");
  CHECK_FALSE(o.has("PET_MASTER_ADDR"));
  CHECK_FALSE(o.has("MASTER_ADDR"));
  CHECK_FALSE(o.has("WORLD_SIZE"));
  CHECK(o.container()["command"] == json({"tune", "run"}));
  CHECK(o.container()["args"] ==
        json({"--nnodes=2", "--nproc_per_node=8", "--node_rank=$(PET_NODE_RANK)",
              "--rdzv_endpoint=trainjob-node-0-0.trainjob:29500", "full_finetune_distributed",
              "--config", "llama3_3/70B_full_multinode"}));
}

TEST_CASE("torchtune: one process in all gets no --rdzv_endpoint", "[shipped][torchtune]") {
  // Kubeflow TestTorch "single-device full fine-tuning with torchtune": numProcPerNode 1, 1 GPU.
  pod_spec s;
  s.framework = "torchtune";
  s.command = {"tune", "run"};
  s.args = {"full_finetune_single_device"};
  s.annotations = {{"trainenv.io/nproc-per-node", "1"}};
  s.resources = {{"nvidia.com/gpu", "1"}};
  auto o = run(s);
  CHECK(o.container()["args"] ==
        json({"--nnodes=1", "--nproc_per_node=1", "--node_rank=$(PET_NODE_RANK)",
              "full_finetune_single_device"}));

  // "multi-devices full fine-tuning with torchtune": auto with 4 GPUs is 4 processes.
  s.annotations.clear();
  s.resources = {{"nvidia.com/gpu", "4"}};
  o = run(s);
  CHECK(o.value("PET_NPROC_PER_NODE") == "auto");
  // A world of one pod rendezvous on localhost (docs/contract.md §2.2), as Trainer's own
  // single-node torchtune runtimes write it.
  CHECK(o.container()["args"][3] == "--rdzv_endpoint=localhost:29500");

  // auto with one GPU on one node: one process, no rendezvous endpoint.
  s.resources = {{"nvidia.com/gpu", "1"}};
  o = run(s);
  CHECK(o.container()["args"].size() == 4);
}

TEST_CASE("torchtune: args the user already passed are not repeated", "[shipped][torchtune]") {
  pod_spec s;
  s.framework = "torchtune";
  s.command = {"tune"};
  s.args = {"run", "--nnodes=2", "--nproc-per-node", "4", "lora_finetune_distributed"};
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "4"}};
  const auto o = run(s);
  // Inserted right after "run" (args[0]); --nnodes=2 is the same value, --nproc-per-node is the
  // same flag spelled with '-', so both are kept as the user wrote them.
  CHECK(o.container()["args"] ==
        json({"run", "--node_rank=$(PET_NODE_RANK)",
              "--rdzv_endpoint=trainjob-node-0-0.trainjob:29500", "--nnodes=2", "--nproc-per-node",
              "4", "lora_finetune_distributed"}));
  REQUIRE(o.decision.warnings.size() == 1);
  CHECK(o.decision.warnings[0] ==
        "trainenv: kept user-set arg --nproc-per-node in container \"node\"");
}

// Kubeflow Trainer's shipped torchtune runtimes (manifests/base/runtimes/torchtune/llama3_2/
// llama3_2_1B.yaml) write the whole line in `command`, with no `args`, and a single-node
// rendezvous endpoint between `tune run` and the recipe.
TEST_CASE(
    "torchtune: Trainer's runtime shape, all in command: flags go into command after "
    "`tune run`",
    "[shipped][torchtune]") {
  pod_spec s;
  s.framework = "torchtune";
  s.command = {"tune",
               "run",
               "--rdzv_endpoint=localhost:29500",
               "full_finetune_distributed",
               "--config",
               "llama3_2/1B_full",
               "output_dir=/workspace/output/llama3_2/1B",
               "tokenizer.path=/workspace/model/original/tokenizer.model"};
  s.annotations = {{"trainenv.io/nproc-per-node", "2"}};
  const auto o = run(s);
  CHECK_FALSE(o.container().contains("args"));
  CHECK(o.container()["command"] ==
        json({"tune", "run", "--nnodes=1", "--nproc_per_node=2", "--node_rank=$(PET_NODE_RANK)",
              "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config",
              "llama3_2/1B_full", "output_dir=/workspace/output/llama3_2/1B",
              "tokenizer.path=/workspace/model/original/tokenizer.model"}));
  // The runtime's endpoint is the one trainenv gives a world of one pod: kept, nothing to say.
  CHECK(o.decision.warnings.empty());
}

// What Trainer's torchtune plugin writes for a multi-node TrainJob (command [tune, run] with the
// endpoint, recipe, config and overrides appended): the endpoint agrees, so no warning.
TEST_CASE("torchtune: Trainer's multi-node command: the agreeing endpoint is kept silently",
          "[shipped][torchtune]") {
  pod_spec s;
  s.command = {"tune",
               "run",
               "--rdzv_endpoint=trainjob-node-0-0.trainjob:29500",
               "full_finetune_distributed",
               "--config",
               "llama3_3/70B_full_multinode",
               "output_dir=/workspace/model/llama3_3/70B"};
  s.index = 1;
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "8"}};
  const auto o = run(s);
  CHECK(o.decision.policy == "torchtune");
  CHECK(o.decision.warnings.empty());
  CHECK(o.container()["command"] ==
        json({"tune", "run", "--nnodes=2", "--nproc_per_node=8", "--node_rank=$(PET_NODE_RANK)",
              "--rdzv_endpoint=trainjob-node-0-0.trainjob:29500", "full_finetune_distributed",
              "--config", "llama3_3/70B_full_multinode",
              "output_dir=/workspace/model/llama3_3/70B"}));
}

TEST_CASE("torchtune: the recipe's own arguments are never read as flags nor touched",
          "[shipped][torchtune]") {
  pod_spec s;
  s.framework = "torchtune";
  s.command = {"tune", "run"};
  s.args = {"my_recipe", "--nnodes=7", "--config", "cfg.yaml"};
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "1"}};
  const auto o = run(s);
  CHECK(o.decision.warnings.empty());
  CHECK(o.container()["command"] == json({"tune", "run"}));
  CHECK(o.container()["args"] ==
        json({"--nnodes=2", "--nproc_per_node=1", "--node_rank=$(PET_NODE_RANK)",
              "--rdzv_endpoint=trainjob-node-0-0.trainjob:29500", "my_recipe", "--nnodes=7",
              "--config", "cfg.yaml"}));
}

TEST_CASE("torchtune: a pod labelled torchtune without `tune run` gets no args, and a warning",
          "[shipped][torchtune]") {
  pod_spec s;
  s.framework = "torchtune";
  const auto o = run(s);
  CHECK_FALSE(o.container().contains("args"));
  REQUIRE(o.decision.warnings.size() == 1);
  CHECK_THAT(o.decision.warnings[0], Catch::Contains("does not start with \"tune run\""));
}

TEST_CASE("torchtune: an explicit trainenv.io/policy: torch is respected even for `tune run`",
          "[shipped][torchtune]") {
  pod_spec s;
  s.command = {"tune", "run"};
  s.annotations = {{"trainenv.io/policy", "torch"}};
  CHECK(run(s).decision.policy == "torch");
}

// --- MPI ------------------------------------------------------------------------------------

namespace {

// The SSH Secret at `path`, its private key readable by its owner alone (0600) unless a non-root
// user reads it through the pod's fsGroup (0640): OpenSSH refuses a key its own user owns when
// others can read it.
void check_ssh_volume(const outcome& o, const std::string& job, int key_mode = 0600,
                      const std::string& path = "/root/.ssh") {
  const auto* volume = find_named(o.pod["spec"]["volumes"], "name", "mpi-ssh-auth");
  REQUIRE(volume != nullptr);
  const auto& secret = (*volume)["secret"];
  CHECK(secret["secretName"] == job + "-mpi-ssh-auth");
  CHECK(secret["defaultMode"] == 0400);
  auto items = json::parse(R"([{"key":"ssh-privatekey","path":"id_rsa","mode":0},
    {"key":"ssh-publickey","path":"id_rsa.pub","mode":420},
    {"key":"ssh-publickey","path":"authorized_keys","mode":420}])");
  items[0]["mode"] = key_mode;
  CHECK(secret["items"] == items);
  const auto* mount = find_named(o.container()["volumeMounts"], "mountPath", path);
  REQUIRE(mount != nullptr);
  CHECK((*mount)["name"] == "mpi-ssh-auth");
}

}  // namespace

TEST_CASE("mpi: the launcher gets the Open MPI and PRRTE variables, hostfile and SSH keys",
          "[shipped][mpi]") {
  // Kubeflow TestMPI "trainjob numNodes is respected rather than mlPolicy one": 2 nodes, slots=1.
  // The launcher reads its JobSet for the workers' layout and GPUs (none: one slot each).
  const json pod = test::fixture("review-mpi-launcher.json")["request"]["object"];
  const auto owners = test::owner_file_at("tests/fixtures/owners/ds-job-jobset.yaml");
  const auto o = run(pod, &owners);
  CHECK(o.decision.policy == "mpi");
  CHECK(o.value("OMPI_MCA_orte_default_hostfile") == "/etc/mpi/hostfile");
  CHECK(o.value("OMPI_MCA_orte_keep_fqdn_hostnames") == "true");
  CHECK(o.value("OMPI_MCA_orte_set_default_slots") == "1");
  CHECK(o.value("OMPI_MCA_plm_rsh_args") == "-o ConnectionAttempts=10");
  CHECK(o.value("PRTE_MCA_prte_default_hostfile") == "/etc/mpi/hostfile");
  CHECK(o.value("PRTE_MCA_prte_set_default_slots") == "1");
  CHECK(o.value("PRTE_MCA_plm_ssh_args") == "-o ConnectionAttempts=10");
  CHECK(o.pod["metadata"]["annotations"]["trainenv.io/hostfile"] ==
        "ds-job-node-0-0.ds-job slots=1\nds-job-node-0-1.ds-job slots=1\n");
  const auto* hostfile = find_named(o.pod["spec"]["volumes"], "name", "mpi-hostfile");
  REQUIRE(hostfile != nullptr);
  CHECK((*hostfile)["downwardAPI"]["items"] ==
        json::parse(R"([{"path":"hostfile","mode":292,"fieldRef":{"apiVersion":"v1",
          "fieldPath":"metadata.annotations['trainenv.io/hostfile']"}}])"));
  const auto* mount = find_named(o.container()["volumeMounts"], "mountPath", "/etc/mpi");
  REQUIRE(mount != nullptr);
  CHECK((*mount)["readOnly"] == true);
  check_ssh_volume(o, "ds-job");
}

TEST_CASE("mpi: slots follow nproc-per-node, else the GPUs (Kubeflow TestMPI)", "[shipped][mpi]") {
  pod_spec s;
  s.role = "launcher";
  s.framework = "mpi";
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "2"}};
  // "trainjob numProcPerNode is respected rather than mlPolicy one"
  auto o = run(s);
  CHECK(o.value("OMPI_MCA_orte_set_default_slots") == "2");
  CHECK(o.pod["metadata"]["annotations"]["trainenv.io/hostfile"] ==
        "trainjob-node-0-0.trainjob slots=2\ntrainjob-node-0-1.trainjob slots=2\n");
  // "numProcPerNode is set to number of GPUs in TrainJob"
  s.annotations.erase("trainenv.io/nproc-per-node");
  s.resources = {{"custom.com/gpu", "5"}};
  o = run(s);
  CHECK(o.value("OMPI_MCA_orte_set_default_slots") == "5");
  CHECK(o.pod["metadata"]["annotations"]["trainenv.io/hostfile"] ==
        "trainjob-node-0-0.trainjob slots=5\ntrainjob-node-0-1.trainjob slots=5\n");
}

TEST_CASE("mpi: node pods get the SSH keys only", "[shipped][mpi]") {
  pod_spec s;
  s.role = "node";
  s.framework = "deepspeed";
  s.index = 1;
  s.annotations = {{"trainenv.io/num-nodes", "2"}};
  const auto o = run(s);
  CHECK(o.env.empty());
  CHECK_FALSE(o.pod["metadata"]["annotations"].contains("trainenv.io/hostfile"));
  CHECK(find_named(o.pod["spec"]["volumes"], "name", "mpi-hostfile") == nullptr);
  check_ssh_volume(o, "trainjob");
}

TEST_CASE("mpi: trainenv.io/ssh-secret names the keys' Secret, ssh-keys: image mounts none",
          "[shipped][mpi]") {
  // SPEC §2.2, SSH keys for a hand-written MPI job: the user's Secret, or the image's own keys.
  pod_spec s;
  s.role = "node";
  s.framework = "mpi";
  s.index = 1;
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/ssh-secret", "team-keys"}};
  auto o = run(s);
  const auto* volume = find_named(o.pod["spec"]["volumes"], "name", "mpi-ssh-auth");
  REQUIRE(volume != nullptr);
  CHECK((*volume)["secret"]["secretName"] == "team-keys");
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/ssh-keys", "image"}};
  o = run(s);
  CHECK(o.decision.allowed);
  CHECK(find_named(o.pod["spec"]["volumes"], "name", "mpi-ssh-auth") == nullptr);
  CHECK_FALSE(o.pod.dump().find("/root/.ssh") != std::string::npos);
  for (const auto& [key, value] : {std::pair{"trainenv.io/ssh-keys", "yes"},
                                   std::pair{"trainenv.io/ssh-secret", "Not_A_Name"}}) {
    s.annotations = {{"trainenv.io/num-nodes", "2"}, {key, value}};
    const auto d = core::mutate_pod(make_pod(s), test::shipped_policies());
    CHECK_FALSE(d.allowed);
    CHECK_THAT(d.message, Catch::Contains(key));
  }
}

// Kubeflow Trainer's mpi plugin (deepspeed-distributed, mlx-distributed runtimes): the launcher
// already has its hostfile ConfigMap at /etc/mpi and the SSH keys at the runtime's
// sshAuthMountPath, /home/mpiuser/.ssh, with the OMPI_MCA_* it writes. Only what is missing is
// added, silently: no second hostfile, no /root/.ssh.
TEST_CASE("mpi: Trainer's launcher keeps its own hostfile and SSH mounts, silently",
          "[shipped][mpi]") {
  pod_spec s;
  s.job = "ds";
  s.role = "launcher";
  s.framework = "deepspeed";
  s.annotations = {{"trainenv.io/num-nodes", "2"}, {"trainenv.io/nproc-per-node", "1"}};
  s.command = {"mpirun"};
  s.args = {"--hostfile", "/etc/mpi/hostfile", "deepspeed", "/workspace/train.py"};
  auto pod = make_pod(s);
  auto& c = pod["spec"]["containers"][0];
  c["env"] = json::parse(R"([
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"}])");
  c["volumeMounts"] = json::parse(R"([
    {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
    {"name": "mpi-hostfile", "mountPath": "/etc/mpi"}])");
  pod["spec"]["volumes"] = json::parse(R"([
    {"name": "mpi-ssh-auth", "secret": {"secretName": "ds-mpi-ssh-auth",
      "items": [{"key": "ssh-privatekey", "path": "id_rsa"},
                {"key": "ssh-publickey", "path": "id_rsa.pub"},
                {"key": "ssh-publickey", "path": "authorized_keys"}]}},
    {"name": "mpi-hostfile", "configMap": {"name": "ds-mpi-hostfile",
      "items": [{"key": "hostfile", "path": "hostfile", "mode": 292}]}}])");
  const auto o = run(pod);
  CHECK(o.decision.policy == "mpi");
  CHECK(o.decision.warnings.empty());
  CHECK(o.decision.injected.env == std::vector<std::string>{"PRTE_MCA_prte_default_hostfile",
                                                            "PRTE_MCA_prte_set_default_slots",
                                                            "PRTE_MCA_plm_ssh_args"});
  CHECK(o.decision.injected.mounts.empty());
  CHECK(o.decision.injected.volumes.empty());
  CHECK(o.container()["volumeMounts"] == c["volumeMounts"]);
  CHECK(o.pod["spec"]["volumes"] == pod["spec"]["volumes"]);
}

TEST_CASE(
    "mpi: another volume at the hostfile's path is kept, with a warning, and ours unused "
    "is not added",
    "[shipped][mpi]") {
  pod_spec s;
  s.role = "launcher";
  s.framework = "mpi";
  auto pod = make_pod(s);
  pod["spec"]["containers"][0]["volumeMounts"] =
      json::parse(R"([{"name": "my-hosts", "mountPath": "/etc/mpi"}])");
  pod["spec"]["volumes"] = json::parse(R"([{"name": "my-hosts", "emptyDir": {}}])");
  const auto o = run(pod);
  REQUIRE(o.decision.warnings.size() == 1);
  CHECK(o.decision.warnings[0] ==
        "trainenv: kept user-set mount /etc/mpi of volume \"my-hosts\" in container \"node\"; no "
        "hostfile added");
  CHECK_FALSE(o.pod["metadata"]["annotations"].contains("trainenv.io/hostfile"));
  CHECK(find_named(o.pod["spec"]["volumes"], "name", "mpi-hostfile") == nullptr);
  CHECK(find_named(o.pod["spec"]["volumes"], "name", "mpi-ssh-auth") != nullptr);
}

TEST_CASE("mpi: mlx and deepspeed select the Open MPI policy", "[shipped][mpi]") {
  for (const char* framework : {"mpi", "deepspeed", "mlx"}) {
    pod_spec s;
    s.framework = framework;
    s.role = "launcher";
    CHECK(run(s).decision.policy == "mpi");
  }
}

TEST_CASE("intel-mpi and mpich: Hydra variables and host:slots hostfiles", "[shipped][mpi]") {
  pod_spec s;
  s.role = "launcher";
  s.annotations = {{"trainenv.io/num-nodes", "3"}, {"trainenv.io/nproc-per-node", "2"}};
  s.framework = "intel-mpi";
  auto o = run(s);
  CHECK(o.value("I_MPI_HYDRA_HOST_FILE") == "/etc/mpi/hostfile");
  CHECK(o.value("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS") == "-o ConnectionAttempts=10");
  CHECK(o.value("I_MPI_PERHOST") == "2");
  const std::string hydra_hostfile =
      "trainjob-node-0-0.trainjob:2\ntrainjob-node-0-1.trainjob:2\ntrainjob-node-0-2.trainjob:2\n";
  CHECK(o.pod["metadata"]["annotations"]["trainenv.io/hostfile"] == hydra_hostfile);
  check_ssh_volume(o, "trainjob");

  // Hydra's proxies call the launcher back by its bare hostname: the pod searches its subdomain.
  const auto searches = json::array({"trainjob.default.svc.cluster.local"});
  CHECK(o.pod["spec"]["dnsConfig"]["searches"] == searches);

  s.framework = "mpich";
  o = run(s);
  CHECK(o.value("HYDRA_HOST_FILE") == "/etc/mpi/hostfile");
  // The name MPICH's Hydra reads (mpi-operator's HYDRA_LAUNCH_EXTRA_ARGS is read by nothing).
  CHECK(o.value("HYDRA_LAUNCHER_EXTRA_ARGS") == "-o ConnectionAttempts=10");
  CHECK(o.env.size() == 2);
  CHECK(o.pod["metadata"]["annotations"]["trainenv.io/hostfile"] == hydra_hostfile);
  CHECK(o.pod["spec"]["dnsConfig"]["searches"] == searches);
}

TEST_CASE("mpi: the SSH key's mode follows who reads it, and the mount path the annotation",
          "[shipped][mpi]") {
  pod_spec s;
  s.role = "node";
  s.framework = "mpi";
  s.annotations = {{"trainenv.io/num-nodes", "2"}};
  // Root reads the root-owned key at /root/.ssh: 0600, fsGroup or not.
  check_ssh_volume(run(s), "trainjob", 0600);
  s.pod_spec_extra = {{"securityContext", {{"fsGroup", 1000}}}};
  check_ssh_volume(run(s), "trainjob", 0600);
  // A non-root user reads it through the pod's fsGroup, away from root's home: 0640.
  s.annotations["trainenv.io/ssh-auth-mount-path"] = "/home/mpiuser/.ssh";
  check_ssh_volume(run(s), "trainjob", 0640, "/home/mpiuser/.ssh");
  // Without an fsGroup nobody but root could read 0640: 0600 there too.
  s.pod_spec_extra = json::object();
  check_ssh_volume(run(s), "trainjob", 0600, "/home/mpiuser/.ssh");
}

// --- JAX and XGBoost --------------------------------------------------------------------

TEST_CASE("jax: Kubeflow TestJax cases", "[shipped][jax]") {
  struct row {
    const char* upstream_case;
    int nodes;
    json resources;
  };
  for (const auto& r :
       std::vector<row>{{"single node JAX training", 1, json::object()},
                        {"multi-node JAX training", 4, json::object()},
                        {"trainjob numNodes is respected", 3, json::object()},
                        {"JAX training with GPU resources", 2, {{"nvidia.com/gpu", "4"}}}}) {
    INFO("upstream case: " << r.upstream_case);
    pod_spec s;
    s.job = "multi-node-job";
    s.framework = "jax";
    s.annotations = {{"trainenv.io/num-nodes", std::to_string(r.nodes)}};
    s.resources = r.resources;
    const auto o = run(s);
    CHECK(o.value("JAX_NUM_PROCESSES") == std::to_string(r.nodes));
    CHECK(o.value("JAX_PROCESS_ID") == "0");
    // Trainer writes rank 0's DNS name for a single node too; a world of one pod needs no name
    // (docs/contract.md §2.2): its own resolves only once its record is published.
    CHECK(o.value("JAX_COORDINATOR_ADDRESS") ==
          (r.nodes == 1 ? "localhost:29500" : "multi-node-job-node-0-0.multi-node-job:29500"));
    CHECK(o.container()["ports"][0]["containerPort"] == 29500);
    CHECK(o.env.size() == 3);
  }
}

TEST_CASE("xgboost: Kubeflow TestXGBoostEnforceMLPolicy cases", "[shipped][xgboost]") {
  struct row {
    const char* upstream_case;
    int nodes;
    json resources;
    const char* workers;
  };
  for (const auto& r : std::vector<row>{
           {"single node XGBoost training (CPU)", 1, json::object(), "1"},
           {"multi-node XGBoost training (CPU)", 4, json::object(), "4"},
           {"XGBoost training with GPU resources", 2, {{"example.com/gpu", "4"}}, "8"},
           {"trainjob numNodes is respected", 3, json::object(), "3"},
           {"resources not set - defaults to 1 worker per node", 2, json::object(), "2"}}) {
    INFO("upstream case: " << r.upstream_case);
    pod_spec s;
    s.framework = "xgboost";
    s.annotations = {{"trainenv.io/num-nodes", std::to_string(r.nodes)}};
    s.resources = r.resources;
    const auto o = run(s);
    CHECK(o.value("DMLC_TRACKER_URI") ==
          (r.nodes == 1 ? "localhost" : "trainjob-node-0-0.trainjob"));  // as for JAX above
    CHECK(o.value("DMLC_TRACKER_PORT") == "29500");
    CHECK(o.value("DMLC_TASK_ID") == "0");
    CHECK(o.value("DMLC_NUM_WORKER") == r.workers);
    CHECK(o.container()["ports"][0]["containerPort"] == 29500);
  }
}

// --- Volcano's pytorch plugin, fixed ------------------------------------------------------

namespace {

json volcano_pod(const std::string& task, int index, const std::string& replicas,
                 json ports = nullptr) {
  json pod = {
      {"metadata",
       {{"name", "test-pytorch-" + task + "-" + std::to_string(index)},
        {"labels",
         {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
          {"trainer.kubeflow.org/framework", "volcano"},
          {"volcano.sh/job-name", "test-pytorch"},
          {"volcano.sh/task-spec", task}}},
        {"annotations", {{"trainenv.io/replicas", replicas}}}}},
      {"spec", {{"containers", json::array({{{"name", "pytorch"}, {"image", "pytorch"}}})}}}};
  if (!ports.is_null()) pod["spec"]["containers"][0]["ports"] = ports;
  return pod;
}

}  // namespace

TEST_CASE("volcano-pytorch: Volcano TestPytorchPodEnvAndPort, with the WORLD_SIZE fix",
          "[shipped][volcano]") {
  SECTION("test master pod without port: master x1 + worker x1") {
    const auto o = run(volcano_pod("master", 0, "master=1,worker=1"));
    CHECK(o.value("MASTER_ADDR") == "test-pytorch-master-0.test-pytorch");
    CHECK(o.value("MASTER_PORT") == "23456");
    CHECK(o.value("WORLD_SIZE") == "2");
    CHECK(o.value("RANK") == "0");
    CHECK(o.container()["ports"] ==
          json::parse(R"([{"containerPort":23456,"name":"pytorchjob-port","protocol":"TCP"}])"));
  }
  SECTION("test master pod with port: the existing port is not added twice") {
    const auto o = run(
        volcano_pod("master", 0, "master=1,worker=1", json::parse(R"([{"containerPort":23456}])")));
    CHECK(o.container()["ports"].size() == 1);
  }
  SECTION("test master pod env: master x1 + worker x2 + extra x2 counts 3, not 5") {
    const auto o = run(volcano_pod("master", 0, "master=1,worker=2,extra=2",
                                   json::parse(R"([{"containerPort":123}])")));
    CHECK(o.value("WORLD_SIZE") == "3");
    CHECK(o.value("RANK") == "0");
    CHECK(o.container()["ports"][0]["containerPort"] == 123);
    CHECK(o.container()["ports"][1]["containerPort"] == 23456);
  }
  SECTION("test worker-1 pod env / test worker-2 pod env: RANK 1 and 2 of 3") {
    CHECK(run(volcano_pod("worker", 0, "master=1,worker=2,extra=2")).value("RANK") == "1");
    const auto o = run(volcano_pod("worker", 1, "master=1,worker=2,extra=2"));
    CHECK(o.value("RANK") == "2");
    CHECK(o.value("WORLD_SIZE") == "3");
  }
  SECTION(
      "extra pods get nothing (Volcano gave them WORLD_SIZE 5 before #4281, and still the port)") {
    const auto o = run(volcano_pod("extra", 1, "master=1,worker=2,extra=2"));
    CHECK(o.env.empty());
    CHECK_FALSE(o.container().contains("ports"));
  }
  SECTION(
      "test pod without master: Volcano's plugin leaves a workers-only job alone; trainenv "
      "trains its workers, worker 0 the master (docs/contract.md §2.2)") {
    const auto o = run(volcano_pod("worker", 1, "worker=2"));
    CHECK(o.value("RANK") == "1");
    CHECK(o.value("WORLD_SIZE") == "2");
    CHECK(o.value("MASTER_PORT") == "23456");
  }
}

TEST_CASE("volcano-pytorch: the shared fixture, worker 1 of master=1,worker=3",
          "[shipped][volcano]") {
  const auto o = run(test::fixture("review-volcano-worker1.json")["request"]["object"]);
  CHECK(o.decision.policy == "volcano-pytorch");
  CHECK(o.value("MASTER_ADDR") == "mnist-master-0.mnist");
  CHECK(o.value("WORLD_SIZE") == "4");
  CHECK(o.value("RANK") == "2");
  CHECK(o.value("VC_TASK_INDEX") == "1");  // the user's own env stays
}

TEST_CASE("volcano-pytorch: without trainenv.io/replicas, master=1 and worker=nodes-1",
          "[shipped][volcano]") {
  json pod = volcano_pod("worker", 2, "");
  pod["metadata"]["annotations"] = {{"trainenv.io/num-nodes", "4"}};
  const auto o = run(pod);
  CHECK(o.value("WORLD_SIZE") == "4");
  CHECK(o.value("RANK") == "3");
}

TEST_CASE("volcano-pytorch: a WORLD_SIZE the user set is kept, with a warning",
          "[shipped][volcano]") {
  json pod = volcano_pod("worker", 0, "master=1,worker=2");
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "WORLD_SIZE"}, {"value", "16"}}});
  const auto o = run(pod);
  CHECK(o.value("WORLD_SIZE") == "16");
  CHECK(o.value("RANK") == "1");
  REQUIRE(o.decision.warnings.size() == 1);
  CHECK(o.decision.warnings[0] == "trainenv: kept user-set WORLD_SIZE=16 in container \"pytorch\"");
}

// --- every example ------------------------------------------------------------------------

TEST_CASE("every example pod previews to an applied, idempotent patch", "[shipped][examples]") {
  int examples = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TRAINENV_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().filename().string());
    auto pod = inputs::parse_document(test::read_file(entry.path().string()));
    REQUIRE(pod.ok());
    const auto o = run(*pod);
    CHECK_FALSE(o.decision.policy.empty());
    CHECK(o.pod["metadata"]["annotations"]["trainenv.io/injected"] == o.decision.policy);
    ++examples;
  }
  CHECK(examples >= 11);
}

TEST_CASE("every shipped policy has an example pod", "[shipped][examples]") {
  std::set<std::string> covered;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TRAINENV_SOURCE_DIR) + "/examples")) {
    if (!entry.is_regular_file()) continue;  // examples/owners/: pods previewed with their owners
    auto pod = inputs::parse_document(test::read_file(entry.path().string()));
    REQUIRE(pod.ok());
    covered.insert(core::mutate_pod(*pod, test::shipped_policies()).policy);
  }
  for (const auto& p : test::shipped_policies().all()) {
    INFO(p.name);
    CHECK(covered.count(p.name) == 1);
  }
}

TEST_CASE("the owner kinds the core tests build by hand are the shipped owners.yaml's",
          "[owners][shipped]") {
  const auto& shipped = trainenv::test::shipped_policies().owner_kinds();
  for (const auto& [name, spec] : trainenv::test::standard_kind_specs()) {
    INFO(name);
    const auto mine = trainenv::test::standard_kind(name);
    const trainenv::core::owner_kind* theirs = nullptr;
    for (const auto& k : shipped.all()) {
      if (k.name == name) theirs = &k;
    }
    REQUIRE(theirs != nullptr);
    CHECK(mine.group == theirs->group);
    CHECK(mine.kind == theirs->kind);
    CHECK(mine.labels.job == theirs->labels.job);
    CHECK(mine.labels.uid == theirs->labels.uid);
    CHECK(mine.labels.role == theirs->labels.role);
    CHECK(mine.labels.index == theirs->labels.index);
    CHECK(mine.labels.job_index == theirs->labels.job_index);
    CHECK(mine.labels.jobs == theirs->labels.jobs);
    REQUIRE(mine.naming.has_value() == theirs->naming.has_value());
    if (mine.naming) CHECK(mine.naming->hostname.source() == theirs->naming->hostname.source());
    CHECK(mine.roles.has_value() == theirs->roles.has_value());
  }
}
