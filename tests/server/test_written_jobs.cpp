// Jobs written by hand the way the JobSet, Volcano and Kubeflow Trainer docs write them
// (docs/contract.md §2.2, §3, §5), each through the real server over TLS with its owners in the
// fake API server: side roles beside the trainers, pools, a coordinator, names only where the
// controller makes them, the container the values go into, and what MPI jobs need to start. Each
// case is one behaviour of the issue "jobs that really start", and fails without it.
#include <catch2/catch.hpp>

#include "served_jobs.hpp"
#include "shipped_policies.hpp"
#include "trainenv/inputs/preview.hpp"

namespace {

using namespace trainenv;
using Catch::Matchers::Contains;
using nlohmann::json;
using test::document;
using test::env_of;
using test::jobset;
using test::replicated;
using test::runtimes;
using test::serve;

json& pod_template_of(json& rj) {
  return rj["template"]["spec"]["template"];
}

// A replicatedJob whose pods are not labelled as trainers (a TensorBoard, a data step).
json unlabelled(const std::string& name, int pods) {
  auto rj = replicated(name, 1, pods);
  pod_template_of(rj)["metadata"].erase("labels");
  return rj;
}

json depends_on(json rj, const std::string& on, const std::string& status = "Complete") {
  rj["dependsOn"] = json::array({{{"name", on}, {"status", status}}});
  return rj;
}

// A hand-written MPI replicatedJob: framework label, the launcher's command.
json mpi_role(const std::string& name, int pods, const std::string& framework) {
  auto rj = replicated(name, 1, pods);
  pod_template_of(rj)["metadata"]["labels"]["trainer.kubeflow.org/framework"] = framework;
  if (name == "launcher")
    pod_template_of(rj)["spec"]["containers"][0]["command"] = json::array({"mpirun"});
  return rj;
}

std::vector<std::string> ranks_of(const test::served_job& s, const std::string& var = "RANK") {
  std::vector<std::string> out;
  for (const auto& p : s.pods) out.push_back(env_of(p.admitted, var));
  return out;
}

const json* volume_named(const json& pod, const std::string& name) {
  const auto volumes = pod["spec"].find("volumes");
  if (volumes == pod["spec"].end()) return nullptr;
  for (const auto& v : *volumes) {
    if (v.value("name", "") == name) return &v;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("an initializer the trainers depend on until Complete is out of the world",
          "[written][server]") {
  // JobSet's own pattern: the step runs to the end before the trainers' Jobs are created. Even
  // labelled as a trainer it counts no pod and gets no rank.
  const auto s =
      serve(jobset("ft", json::array({replicated("initializer", 1, 1),
                                      depends_on(replicated("trainer", 1, 3), "initializer")})));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& init = s.pod("ft-initializer-0-0");
  CHECK(init.d.allowed);
  CHECK(env_of(init.admitted, "WORLD_SIZE") == "<absent>");
  CHECK(env_of(init.admitted, "RANK") == "<absent>");
  for (const auto* name : {"ft-trainer-0-0", "ft-trainer-0-1", "ft-trainer-0-2"}) {
    const auto& p = s.pod(name);
    CHECK(env_of(p.admitted, "PET_NNODES") == "3");
    CHECK(env_of(p.admitted, "WORLD_SIZE") == "3");
    CHECK(env_of(p.admitted, "MASTER_ADDR") == "ft-trainer-0-0.ft");
  }
  CHECK(env_of(s.pod("ft-trainer-0-2").admitted, "RANK") == "2");
  // A dependency on Ready is not one that has finished: both roles train then.
  const auto ready = serve(
      jobset("rd", json::array({replicated("initializer", 1, 1),
                                depends_on(replicated("trainer", 1, 3), "initializer", "Ready")})));
  CHECK(env_of(ready.pod("rd-trainer-0-0").admitted, "WORLD_SIZE") == "4");
}

TEST_CASE("workers beside a TensorBoard and an opted-out evaluator: only the workers train",
          "[written][server]") {
  auto evaluator = replicated("evaluator", 1, 1, {{"trainenv.io/inject", "false"}});
  const auto s = serve(jobset(
      "bert", json::array({replicated("workers", 1, 3), unlabelled("tensorboard", 1), evaluator})));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  CHECK(s.pod("bert-tensorboard-0-0").d.policy.empty());  // not a training pod
  CHECK(s.pod("bert-evaluator-0-0").admitted == s.pod("bert-evaluator-0-0").created.pod);
  for (const auto* name : {"bert-workers-0-0", "bert-workers-0-1", "bert-workers-0-2"}) {
    CHECK(env_of(s.pod(name).admitted, "PET_NNODES") == "3");
    CHECK(env_of(s.pod(name).admitted, "MASTER_ADDR") == "bert-workers-0-0.bert");
  }
  CHECK(env_of(s.pod("bert-workers-0-0").admitted, "RANK") == "0");
}

TEST_CASE("a master with two pools of workers is one world of three roles", "[written][server]") {
  const auto s =
      serve(jobset("pool", json::array({replicated("master", 1, 1), replicated("worker-a100", 1, 2),
                                        replicated("worker-h100", 1, 2)})));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  CHECK(ranks_of(s) == std::vector<std::string>{"0", "1", "2", "3", "4"});
  for (const auto& p : s.pods) {
    CHECK(env_of(p.admitted, "PET_NNODES") == "5");
    CHECK(env_of(p.admitted, "MASTER_ADDR") == "pool-master-0-0.pool");
  }
}

TEST_CASE("JobSet's coordinator is rank 0 and the master, one outside the world a warning",
          "[written][server]") {
  auto js = jobset("co", json::array({replicated("driver", 1, 1), replicated("worker", 2, 2)}));
  js["spec"]["coordinator"] = {{"replicatedJob", "worker"}, {"jobIndex", 1}, {"podIndex", 0}};
  const auto s = serve(js);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods) CHECK(env_of(p.admitted, "MASTER_ADDR") == "co-worker-1-0.co");
  CHECK(env_of(s.pod("co-worker-1-0").admitted, "RANK") == "0");
  // The others keep their order: worker Job 0 first (worker leads the node order), the driver
  // after the workers.
  CHECK(env_of(s.pod("co-worker-0-0").admitted, "RANK") == "1");
  CHECK(env_of(s.pod("co-worker-1-1").admitted, "RANK") == "3");
  CHECK(env_of(s.pod("co-driver-0-0").admitted, "RANK") == "4");

  auto side = jobset("cs", json::array({replicated("worker", 1, 2), unlabelled("tensorboard", 1)}));
  side["spec"]["coordinator"] = {{"replicatedJob", "tensorboard"}};
  const auto outside = serve(side);
  CHECK(outside.problems.empty());
  CHECK(env_of(outside.pod("cs-worker-0-0").admitted, "MASTER_ADDR") == "cs-worker-0-0.cs");
  REQUIRE_FALSE(outside.pod("cs-worker-0-0").d.warnings.empty());
  CHECK_THAT(outside.pod("cs-worker-0-0").d.warnings[0], Contains("coordinator"));
}

TEST_CASE("names only where the controller makes them: JobSet's DNS hostnames and subdomains",
          "[written][server]") {
  SECTION("DNS hostnames off: the template's own subdomain, with the user's Service") {
    auto node = replicated("node", 1, 3);
    pod_template_of(node)["spec"]["subdomain"] = "own-svc";
    const auto s = serve(jobset("off", json::array({node}), {{"enableDNSHostnames", false}}));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) CHECK(env_of(p.admitted, "MASTER_ADDR") == "off-node-0-0.own-svc");
  }
  SECTION("DNS hostnames off, no subdomain of its own: refused, saying how to name the pods") {
    const auto s = serve(
        jobset("off", json::array({replicated("node", 1, 3)}), {{"enableDNSHostnames", false}}));
    for (const auto& p : s.pods) {
      CHECK_FALSE(p.d.allowed);
      CHECK_THAT(p.d.message, Contains("enableDNSHostnames: false") && Contains("spec.subdomain"));
    }
  }
  SECTION("DNS hostnames on: JobSet writes its subdomain over the template's") {
    auto node = replicated("node", 1, 2);
    pod_template_of(node)["spec"]["subdomain"] = "ignored";
    const auto s = serve(jobset("on", json::array({node})));
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) CHECK(env_of(p.admitted, "MASTER_ADDR") == "on-node-0-0.on");
  }
}

TEST_CASE("names only where Volcano makes them: the svc plugin, a task template's subdomain",
          "[written][server]") {
  SECTION("no svc plugin: no DNS names, a loud refusal") {
    auto vj = document("examples/jobs/volcano-job.yaml");
    vj["spec"]["plugins"] = {{"env", json::array()}};
    const auto s = serve(vj);
    for (const auto& p : s.pods) {
      if (p.created.role == "evaluator") continue;
      CHECK_FALSE(p.d.allowed);
      CHECK_THAT(p.d.message, Contains("spec.plugins.svc"));
    }
  }
  SECTION("the pytorch plugin turns svc on") {
    auto vj = document("examples/jobs/volcano-job.yaml");
    vj["spec"]["plugins"] = {{"pytorch", json::array({"--master=master", "--worker=worker"})}};
    const auto s = serve(vj);
    CHECK(s.problems.empty());
  }
  SECTION("a task template's subdomain wins over the job's, on every pod") {
    auto vj = document("examples/jobs/volcano-job.yaml");
    for (auto& task : vj["spec"]["tasks"]) task["template"]["spec"]["subdomain"] = "train";
    const auto s = serve(vj);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) {
      if (p.created.role != "evaluator")
        CHECK(env_of(p.admitted, "MASTER_ADDR", "node") == "mnist-master-0.train");
    }
  }
}

TEST_CASE("the values go into the trainer: a sidecar first, a proxy put first on reinvocation",
          "[written][server]") {
  SECTION("Volcano: a sidecar listed first gets them too, the trainer does, the port once") {
    auto vj = document("examples/jobs/volcano-job.yaml");
    for (auto& task : vj["spec"]["tasks"]) {
      auto& containers = task["template"]["spec"]["containers"];
      containers.insert(containers.begin(), json{{"name", "log-shipper"}, {"image", "fluent"}});
    }
    const auto s = serve(vj);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto& worker = s.pod("mnist-worker-1").admitted;
    CHECK(env_of(worker, "RANK", "node") == "2");
    CHECK(env_of(worker, "RANK", "log-shipper") == "2");
    CHECK_FALSE(worker["spec"]["containers"][0].contains("ports"));
  }
  SECTION("a JobSet pod whose proxy is listed first: the trainer gets them, the proxy nothing") {
    const auto s =
        serve(jobset("px", json::array({replicated("node", 1, 2)})), {}, 0, [](json& pod) {
          auto& containers = pod["spec"]["containers"];
          containers[0]["name"] = "trainer";
          containers.insert(containers.begin(), json{{"name", "istio-proxy"}});
        });
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    CHECK(env_of(s.pod("px-node-0-1").admitted, "RANK", "trainer") == "1");
    CHECK_FALSE(s.pod("px-node-0-1").admitted["spec"]["containers"][0].contains("env"));
  }
  SECTION("reinvoked after another webhook put its proxy first: nothing more is added") {
    // The trainer is not called node: only the values it holds tell it from the new first
    // container, a proxy no sidecar list knows.
    const auto js = jobset("ri", json::array({replicated("node", 1, 2)}));
    const auto first =
        serve(js, {}, 0, [](json& pod) { pod["spec"]["containers"][0]["name"] = "trainer"; });
    REQUIRE(first.problems.empty());
    const auto again = serve(js, {}, 0, [&](json& pod) {
      auto name = pod["metadata"]["generateName"].get<std::string>();
      name.pop_back();  // "ri-node-0-1-": the pod's name is its generateName and a suffix
      pod = first.pod(name).admitted;
      auto& containers = pod["spec"]["containers"];
      containers.insert(containers.begin(), json{{"name", "mesh-proxy"}});
    });
    for (const auto& p : again.pods) {
      INFO(p.created.name);
      CHECK(p.d.allowed);
      CHECK(p.admitted["spec"]["containers"][0] == json{{"name", "mesh-proxy"}});
      CHECK(p.admitted["spec"]["containers"][1] ==
            first.pod(p.created.name).admitted["spec"]["containers"][0]);
    }
  }
}

TEST_CASE("MPI jobs that start: the key's mode, Hydra's search domain and variable name",
          "[written][server]") {
  SECTION("Open MPI as root: id_rsa 0600 at /root/.ssh on every pod") {
    const auto s = serve(
        jobset("om", json::array({mpi_role("launcher", 1, "mpi"), mpi_role("worker", 2, "mpi")})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) {
      const auto* keys = volume_named(p.admitted, "mpi-ssh-auth");
      REQUIRE(keys != nullptr);
      CHECK((*keys)["secret"]["items"][0] ==
            json::parse(R"({"key": "ssh-privatekey", "path": "id_rsa", "mode": 384})"));
    }
    CHECK(s.pod("om-launcher-0-0").hostfile ==
          std::vector<std::string>{"om-worker-0-0.om", "om-worker-0-1.om"});
  }
  SECTION("MPICH: Hydra's variable, and every pod searches the launcher's subdomain") {
    const auto s = serve(jobset(
        "mh", json::array({mpi_role("launcher", 1, "mpich"), mpi_role("worker", 2, "mpich")})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    CHECK(env_of(s.pod("mh-launcher-0-0").admitted, "HYDRA_LAUNCHER_EXTRA_ARGS") ==
          "-o ConnectionAttempts=10");
    CHECK(env_of(s.pod("mh-launcher-0-0").admitted, "HYDRA_LAUNCH_EXTRA_ARGS") == "<absent>");
    for (const auto& p : s.pods) {
      CHECK(p.admitted["spec"]["dnsConfig"]["searches"] ==
            json::array({"mh.team-a.svc.cluster.local"}));
    }
    // A pod's own dnsConfig is kept: the domain is added to what it lists.
    auto worker = mpi_role("worker", 1, "mpich");
    pod_template_of(worker)["spec"]["dnsConfig"] = {
        {"options", {{{"name", "ndots"}, {"value", "2"}}}}, {"searches", {"corp.example"}}};
    const auto own = serve(jobset("mh", json::array({mpi_role("launcher", 1, "mpich"), worker})));
    const auto& dns = own.pod("mh-worker-0-0").admitted["spec"]["dnsConfig"];
    CHECK(dns["searches"] == json::array({"corp.example", "mh.team-a.svc.cluster.local"}));
    CHECK(dns["options"][0]["value"] == "2");
  }
  SECTION("a user who is not root: the annotation's mount path, 0640 through the fsGroup") {
    auto launcher = mpi_role("launcher", 1, "mpi");
    auto worker = mpi_role("worker", 2, "mpi");
    for (auto* rj : {&launcher, &worker}) {
      pod_template_of(*rj)["metadata"]["annotations"]["trainenv.io/ssh-auth-mount-path"] =
          "/home/mpiuser/.ssh";
      pod_template_of(*rj)["spec"]["securityContext"] = {{"fsGroup", 1000}};
    }
    const auto s = serve(jobset("nr", json::array({launcher, worker})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) {
      const auto* keys = volume_named(p.admitted, "mpi-ssh-auth");
      REQUIRE(keys != nullptr);
      CHECK((*keys)["secret"]["items"][0]["mode"] == 0640);
      CHECK(p.admitted["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] ==
            "/home/mpiuser/.ssh");
    }
  }
  SECTION("the hostfile lists no initializer, and a launcher that runs as a node where it says") {
    auto launcher = mpi_role("launcher", 1, "mpi");
    pod_template_of(launcher)["metadata"]["annotations"]["trainenv.io/run-launcher-as-node"] =
        "true";
    const auto s =
        serve(jobset("hi", json::array({mpi_role("initializer", 1, "mpi"), launcher,
                                        depends_on(mpi_role("worker", 2, "mpi"), "initializer")})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    CHECK(s.pod("hi-launcher-0-0").hostfile ==
          std::vector<std::string>{"hi-launcher-0-0.hi", "hi-worker-0-0.hi", "hi-worker-0-1.hi"});
  }
}

TEST_CASE("a pod whose own name is not its layout's name is refused loudly, 500",
          "[written][server]") {
  const auto s = serve(jobset("sc", json::array({replicated("node", 1, 3)})), {}, 0, [](json& pod) {
    if (pod["spec"]["hostname"] == "sc-node-0-2") pod["spec"]["hostname"] = "somebody-else";
  });
  const auto& odd = s.pod("sc-node-0-2");
  CHECK_FALSE(odd.d.allowed);
  CHECK(odd.d.code == 500);
  CHECK_THAT(odd.d.message, Contains("somebody-else.sc") && Contains("sc-node-0-2.sc") &&
                                Contains("a retry will not help"));
  CHECK(s.pod("sc-node-0-1").d.allowed);
}

TEST_CASE("preview --job models Trainer as Trainer is", "[written][server]") {
  SECTION("a CPU-only TrainJob: Trainer's own PET_NPROC_PER_NODE, agreed without a warning") {
    auto tj = document("examples/jobs/trainjob-torch.yaml");
    tj["spec"]["trainer"]["resourcesPerNode"] = {{"requests", {{"cpu", "2500m"}}}};
    const auto s = serve(tj, runtimes());
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) {
      if (p.d.policy.empty()) continue;
      CHECK(env_of(p.admitted, "PET_NPROC_PER_NODE") == "3");
      CHECK(p.d.warnings.empty());
    }
  }
  SECTION("DeepSpeed: the node pods keep their sshd; a runtime that lists the launcher first") {
    auto given = runtimes();
    for (auto& r : given) {
      if (r["metadata"]["name"] != "deepspeed-distributed") continue;
      auto& jobs = r["spec"]["template"]["spec"]["replicatedJobs"];
      std::reverse(jobs.begin(), jobs.end());
    }
    const auto s = serve(document("examples/jobs/trainjob-deepspeed.yaml"), given);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    for (const auto& p : s.pods) {
      if (p.created.role == "node")
        CHECK(p.created.pod["spec"]["containers"][0]["command"] == json{"/usr/sbin/sshd"});
    }
    const auto& hosts = s.pod("ds-launcher-0-0").hostfile;
    REQUIRE_FALSE(hosts.empty());
    CHECK(hosts.front() == "ds-launcher-0-0.ds");
  }
  SECTION("-o json: each pod's patch and patched object, and the job's objects") {
    auto preview = core::preview_job(document("examples/jobs/jobset-master-worker.yaml"), {},
                                     test::shipped_policies());
    REQUIRE(preview.ok());
    const auto out = inputs::to_json(*preview);
    for (const auto& pod : out["pods"]) {
      CHECK(json(pod["object"]["spec"]["containers"][0]["env"]).size() >= 8);
      CHECK(pod["patch"].is_array());
    }
    CHECK(out["objects"][0]["kind"] == "JobSet");
    CHECK(out["elastic"].is_null());  // a static job, though its PET_NNODES has elastic items too
  }
}

TEST_CASE("an MPI launcher whose other annotations are large gets the compact hostfile rule",
          "[written][server]") {
  auto launcher = mpi_role("launcher", 1, "mpi");
  pod_template_of(launcher)["metadata"]["annotations"]["example.com/notes"] =
      std::string(250 * 1024, 'x');  // the inline hostfile's 9 KiB would pass 256 KiB
  const auto s =
      serve(jobset("big", json::array({launcher, mpi_role("worker", 400, "mpi")})), {}, 1);
  const auto& p = s.pods.front();
  INFO(p.d.message);
  REQUIRE(p.d.allowed);
  const auto& annotations = p.admitted["metadata"]["annotations"];
  CHECK(annotations.contains("trainenv.io/hostfile-rule"));
  CHECK_FALSE(annotations.contains("trainenv.io/hostfile"));
  CHECK(p.hostfile.size() == 400);
}
