// Every layout the contract promises (docs/contract.md §2.2), through the real server over TLS,
// its owners read from the fake API server: each job is laid out as its controllers create it
// (core/controllers), every object served by the fake API server, every pod sent to /mutate,
// and the admitted pods checked as a whole with preview --job's checks (distinct ranks 0..N-1,
// one master at rank 0's DNS name, one world, a hostfile of exactly the workers, none denied),
// plus what each case is about.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include "served_jobs.hpp"

namespace {

using namespace trainenv;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using nlohmann::json;
using test::admit;
using test::document;
using test::env_of;
using test::jobset;
using test::replicated;
using test::runtimes;
using test::serve;

}  // namespace

TEST_CASE("a master/worker JobSet with its own subdomain: one master, ranks 0..4",
          "[layouts][server]") {
  const auto s = serve(document("examples/jobs/jobset-master-worker.yaml"));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  REQUIRE(s.pods.size() == 5);
  for (const auto& p : s.pods) {
    CHECK(env_of(p.admitted, "MASTER_ADDR") == "gpt-master-0-0.train-svc");
    CHECK(env_of(p.admitted, "WORLD_SIZE") == "5");
  }
  CHECK(env_of(s.pod("gpt-worker-1-1").admitted, "RANK") == "4");
  CHECK(env_of(s.pod("gpt-worker-1-1").admitted, "PET_NODE_RANK") == "4");
}

TEST_CASE("a replicatedJob of 2 Jobs numbers its pods across both", "[layouts][server]") {
  const auto s = serve(jobset("rep", json::array({replicated("node", 2, 3)})));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  CHECK(env_of(s.pod("rep-node-1-0").admitted, "PET_NODE_RANK") == "3");
  CHECK(env_of(s.pod("rep-node-1-2").admitted, "RANK") == "5");
  CHECK(env_of(s.pod("rep-node-1-2").admitted, "PET_NNODES") == "6");
}

TEST_CASE("JobSet's own PyTorch example: a replicatedJob named workers trains, on its subdomain",
          "[layouts][server]") {
  const auto s =
      serve(jobset("pytorch", json::array({replicated("workers", 1, 3)}), {{"subdomain", "pt"}}));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods) CHECK(env_of(p.admitted, "MASTER_ADDR") == "pytorch-workers-0-0.pt");
  CHECK(env_of(s.pod("pytorch-workers-0-2").admitted, "RANK") == "2");
}

TEST_CASE("a plain Indexed Job: <job>-<index>.<subdomain>", "[layouts][server]") {
  const auto s = serve(document("examples/jobs/indexed-job.yaml"));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods)
    CHECK(env_of(p.admitted, "MASTER_ADDR") == "pretrain-0.pretrain-svc");
  CHECK(env_of(s.pod("pretrain-2").admitted, "RANK") == "2");
}

TEST_CASE("a Volcano Job without a policy annotation, one task at zero: volcano-pytorch, world 3",
          "[layouts][server]") {
  auto vj = document("examples/jobs/volcano-job.yaml");
  vj["spec"]["tasks"].push_back(vj["spec"]["tasks"][1]);
  vj["spec"]["tasks"].back()["name"] = "standby";
  vj["spec"]["tasks"].back().erase("replicas");  // scaled to zero: Volcano omits it
  const auto s = serve(vj);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods) CHECK(p.d.policy == "volcano-pytorch");
  CHECK(env_of(s.pod("mnist-master-0").admitted, "MASTER_ADDR") == "mnist-master-0.mnist");
  CHECK(env_of(s.pod("mnist-worker-1").admitted, "WORLD_SIZE") == "3");
  CHECK(env_of(s.pod("mnist-worker-1").admitted, "RANK") == "2");
  CHECK(env_of(s.pod("mnist-evaluator-0").admitted, "WORLD_SIZE") == "<absent>");
}

TEST_CASE("a Volcano Job whose tasks have no name: default0, default1, as Volcano names them",
          "[layouts][server]") {
  // Volcano's admission names a task without a name default<i> (shapes people write by hand,
  // docs/contract.md §2.2); the Job served here is the file as written, without the names.
  auto vj = document("examples/jobs/volcano-job.yaml");
  for (auto& task : vj["spec"]["tasks"]) task.erase("name");
  vj["spec"]["plugins"]["pytorch"] = json::array({"--master=default0", "--worker=default1"});
  const auto s = serve(vj);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  REQUIRE(s.pods.size() == 4);
  CHECK(env_of(s.pod("mnist-default1-1").admitted, "MASTER_ADDR") == "mnist-default0-0.mnist");
  CHECK(env_of(s.pod("mnist-default1-1").admitted, "WORLD_SIZE") == "3");
  CHECK(env_of(s.pod("mnist-default1-1").admitted, "RANK") == "2");
  CHECK(env_of(s.pod("mnist-default2-0").admitted, "WORLD_SIZE") == "<absent>");
}

TEST_CASE("a TrainJob on Trainer's flux runtime passes unchanged, with a warning",
          "[layouts][server]") {
  const json tj = {
      {"apiVersion", "trainer.kubeflow.org/v1alpha1"},
      {"kind", "TrainJob"},
      {"metadata", {{"name", "lammps"}, {"namespace", "team-a"}}},
      {"spec", {{"runtimeRef", {{"name", "flux-distributed"}}}, {"trainer", {{"numNodes", 2}}}}}};
  const auto s = serve(tj, runtimes());
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  CHECK(s.unknown_framework == 2);  // counted, for the operator
  for (const auto& p : s.pods) {
    CHECK(p.d.allowed);
    CHECK(p.admitted == p.created.pod);  // nothing added
    REQUIRE(p.d.warnings.size() == 1);
    CHECK_THAT(p.d.warnings[0], Contains("framework \"flux\" is in no policy"));
  }
}

TEST_CASE("a runtime with no framework label is framed by its mlPolicy: MPI, not torch",
          "[layouts][server]") {
  auto given = runtimes();
  for (auto& r : given) {
    if (r["metadata"]["name"] == "deepspeed-distributed") r["metadata"].erase("labels");
  }
  const auto s = serve(document("examples/jobs/trainjob-deepspeed.yaml"), given);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  CHECK(s.pod("ds-launcher-0-0").d.policy == "mpi");
}

TEST_CASE(
    "DeepSpeed with runLauncherAsNode and numProcPerNode: Trainer's hostfile, launcher last, its "
    "slots agreed without a warning",
    "[layouts][server]") {
  auto tj = document("examples/jobs/trainjob-deepspeed.yaml");
  tj["spec"]["trainer"]["numProcPerNode"] = 2;
  const auto s = serve(tj, runtimes());
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& launcher = s.pod("ds-launcher-0-0");
  CHECK(launcher.d.policy == "mpi");
  CHECK(launcher.d.warnings.empty());
  CHECK(env_of(launcher.admitted, "OMPI_MCA_orte_set_default_slots") == "2");
  CHECK(env_of(launcher.admitted, "PRTE_MCA_prte_set_default_slots") == "2");
  // Trainer's ConfigMap is the hostfile: no annotation of trainenv's, the launcher listed last.
  CHECK_FALSE(launcher.admitted["metadata"]
                  .value("annotations", json::object())
                  .contains("trainenv.io/hostfile"));
  REQUIRE(launcher.hostfile.size() == 4);
  CHECK(launcher.hostfile.back() == "ds-launcher-0-0.ds");
  // The SSH keys stay where the runtime mounted them, /home/mpiuser/.ssh: no /root/.ssh added.
  CHECK_THAT(launcher.admitted.dump(), !Contains("/root/.ssh"));
}

TEST_CASE("a 10,000-node MPI launcher is admitted with every worker, its annotations small",
          "[layouts][server]") {
  const std::string name = "a-very-long-training-job-name-for-the-large-cluster";
  auto js = jobset(
      name, {replicated("launcher", 1, 1), replicated("node", 1, 10'000, json::object(),
                                                      {{"limits", {{"nvidia.com/gpu", "8"}}}})});
  js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    ["trainer.kubeflow.org/framework"] = "deepspeed";
  js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    ["command"] = json::array({"mpirun"});
  const auto s = serve(js, {}, 1);  // the launcher alone: the first pod laid out
  const auto& launcher = s.pods.front();
  INFO(launcher.d.message);
  REQUIRE(launcher.d.allowed);
  // The hostfile travels as a rule, not 10,000 lines; the status is bounded on its own.
  std::size_t bytes = 0;
  for (const auto& [key, value] : launcher.admitted["metadata"]["annotations"].items()) {
    if (key == "trainenv.io/status") {
      CHECK(value.get<std::string>().size() <= 1024);
      continue;
    }
    bytes += key.size() + value.get<std::string>().size();
  }
  WARN("a 10,000-node launcher's annotations: " << bytes << " bytes besides its status");
  CHECK(bytes < 1024);
  REQUIRE(launcher.has_hostfile);
  REQUIRE(launcher.hostfile.size() == 10'000);
  CHECK(launcher.hostfile.front() == name + "-node-0-0." + name);
  CHECK(launcher.hostfile.back() == name + "-node-0-9999." + name);
  CHECK(env_of(launcher.admitted, "OMPI_MCA_orte_set_default_slots") == "8");
}

TEST_CASE(
    "count annotations fix only what they name: num-nodes and replicas on a replicated JobSet",
    "[layouts][server]") {
  SECTION("num-nodes: no GET; the job index still counts") {
    const auto s = serve(
        jobset("nn", json::array({replicated("node", 2, 2, {{"trainenv.io/num-nodes", "4"}})})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    CHECK(s.gets == 0);
    CHECK(env_of(s.pod("nn-node-1-1").admitted, "RANK") == "3");
  }
  SECTION("replicas alone: PET_NNODES follows it, not 1") {
    const auto s = serve(jobset(
        "rp", json::array({replicated("node", 2, 2, {{"trainenv.io/replicas", "node=4"}})})));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    CHECK(s.gets == 0);
    for (const auto& p : s.pods) {
      CHECK(env_of(p.admitted, "PET_NNODES") == "4");
      CHECK(env_of(p.admitted, "WORLD_SIZE") == "4");
    }
  }
}

TEST_CASE("num-nodes on an MPI launcher: its workers' GPUs from the owner still give the slots",
          "[layouts][server]") {
  auto launcher = replicated("launcher", 1, 1, {{"trainenv.io/num-nodes", "2"}});
  launcher["template"]["spec"]["template"]["metadata"]["labels"]["trainer.kubeflow.org/framework"] =
      "mpi";
  const auto s =
      serve(jobset("mp", {launcher, replicated("node", 1, 2, json::object(),
                                               {{"limits", {{"nvidia.com/gpu", "4"}}}})}),
            {}, 1);
  const auto& p = s.pods.front();
  INFO(p.d.message);
  REQUIRE(p.d.allowed);
  CHECK(env_of(p.admitted, "OMPI_MCA_orte_set_default_slots") == "4");
  CHECK(p.hostfile == std::vector<std::string>{"mp-node-0-0.mp", "mp-node-0-1.mp"});
}

TEST_CASE("a PyTorchJob's pod is its operator's: allowed unchanged, a warning, no GET",
          "[layouts][server]") {
  test::fake_apiserver api;
  test::server_options options;
  options.api = api.credentials();
  test::running_server server(options);
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata",
                     {{"name", "mnist-worker-0"},
                      {"namespace", "team-a"},
                      {"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}},
                      {"ownerReferences",
                       {{{"apiVersion", "kubeflow.org/v1"},
                         {"kind", "PyTorchJob"},
                         {"name", "mnist"},
                         {"uid", "u1"},
                         {"controller", true}}}}}},
                    {"spec", {{"containers", {{{"name", "pytorch"}, {"image", "x"}}}}}}};
  const auto [response, admitted] = admit(server.tls_port(), pod);
  CHECK(response["allowed"] == true);
  CHECK_FALSE(response.contains("patch"));
  REQUIRE(response.contains("warnings"));
  CHECK_THAT(response["warnings"][0].get<std::string>(), Contains("PyTorchJob"));
  CHECK(api.total_gets() == 0);
}

TEST_CASE("an owner that cannot be read denies with the code of whose fault it is",
          "[layouts][server]") {
  test::fake_apiserver api;
  const auto js = jobset("codes", json::array({replicated("node", 1, 2)}));
  auto created = core::create_job(js, {});
  REQUIRE(created.ok());
  std::string jobset_path;
  for (const auto& object : created->objects) {
    const auto path = api.add_object(object);
    if (object["kind"] == "JobSet") jobset_path = path;
  }
  test::server_options options;
  options.api = api.credentials();
  options.lookup_timeout = 500ms;
  test::running_server server(options);
  struct row {
    const char* what;
    test::misbehaviour m;
    bool remove;
    int code;
  };
  for (const auto& r :
       // "gone" last: a 404 is remembered briefly (for the same uid, which a recreated object
       // never has).
       std::vector<row>{{"forbidden", {0ms, test::fault::forbidden}, false, 500},
                        {"API server error", {0ms, test::fault::server_error}, false, 503},
                        {"time-out", {2000ms, test::fault::none}, false, 503},
                        {"gone", {}, true, 404}}) {
    INFO(r.what);
    api.behave();
    if (r.remove) api.remove_object(jobset_path);
    api.misbehave(jobset_path, r.m);
    const auto [response, admitted] =
        admit(server.tls_port(), created->pods[1].pod, std::string("u-") + r.what);
    CHECK(response["allowed"] == false);
    CHECK(response["status"]["code"] == r.code);
    CHECK_THAT(response["status"]["message"].get<std::string>(), Contains("JobSet team-a/codes"));
  }
}

// One budget per admission covers a wait on another request's GET (docs/contract.md §2.1): pod B
// spends 0.7 s on its Job, then joins the JobSet GET pod A started, which takes 1.9 s; B answers
// when its own 2 s are spent, not when A's GET ends.
TEST_CASE("a lookup that joins another pod's GET is bounded by its own admission's budget",
          "[layouts][server]") {
  test::fake_apiserver api;
  std::string job_path;
  std::string jobset_path;
  for (const auto& path : api.load_yaml(std::string(TRAINENV_SOURCE_DIR) +
                                        "/examples/owners/trainer-torch-owners.yaml")) {
    if (path.find("/jobs/") != std::string::npos) job_path = path;
    if (path.find("/jobsets/") != std::string::npos) jobset_path = path;
  }
  REQUIRE_FALSE(job_path.empty());
  REQUIRE_FALSE(jobset_path.empty());
  api.misbehave(job_path, {700ms, test::fault::none});
  api.misbehave(jobset_path, {1900ms, test::fault::none});
  test::server_options options;
  options.api = api.credentials();
  options.lookup_timeout = 2000ms;
  test::running_server server(options);
  const auto pod_b = document("examples/owners/trainer-torch-pod.yaml");  // through its Job
  auto pod_a = pod_b;  // the ancestor label of its own: straight to the JobSet
  pod_a["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const auto started = std::chrono::steady_clock::now();
  std::pair<json, json> b;
  std::chrono::steady_clock::duration took_b{};
  std::thread client_b([&] {
    b = admit(server.tls_port(), pod_b, "u-b");
    took_b = std::chrono::steady_clock::now() - started;
  });
  std::this_thread::sleep_for(500ms);
  const auto a = admit(server.tls_port(), pod_a, "u-a");
  client_b.join();
  CHECK(a.first["allowed"] == true);  // A's GET ended within A's budget
  INFO(b.first.dump());
  CHECK(b.first["allowed"] == false);
  CHECK(b.first["status"]["code"] == 503);
  CHECK_THAT(b.first["status"]["message"].get<std::string>(), Contains("another request's GET"));
  CHECK(took_b < 2300ms);  // not the 2.4 s A's GET took to end
  CHECK(took_b >= 1900ms);
}

TEST_CASE(
    "a TrainJob that sets numProcPerNode gets no warning: its value is read from the TrainJob",
    "[layouts][server]") {
  auto tj = document("examples/jobs/trainjob-torch.yaml");
  tj["spec"]["trainer"]["numProcPerNode"] = 4;
  const auto s = serve(tj, runtimes());
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods) {
    CHECK(p.d.warnings.empty());
    CHECK(env_of(p.admitted, "PET_NPROC_PER_NODE") ==
          "4");  // Trainer's, which trainenv agrees with
  }
}

TEST_CASE("replicas alone on an MPI launcher: the workers' names and GPUs still from its JobSet",
          "[layouts][server]") {
  auto launcher = replicated("launcher", 1, 1, {{"trainenv.io/replicas", "launcher=1,node=4"}});
  launcher["template"]["spec"]["template"]["metadata"]["labels"]["trainer.kubeflow.org/framework"] =
      "mpi";
  // The workers run as 2 Jobs of 2: only the JobSet tells their names past the first Job.
  const auto s = serve(
      jobset("rl", json::array({launcher, replicated("node", 2, 2, json::object(),
                                                     {{"limits", {{"nvidia.com/gpu", "2"}}}})})),
      {}, 1);
  const auto& p = s.pods.front();
  INFO(p.d.message);
  REQUIRE(p.d.allowed);
  CHECK(s.gets >= 1);
  CHECK(env_of(p.admitted, "OMPI_MCA_orte_set_default_slots") == "2");
  CHECK(p.hostfile == std::vector<std::string>{"rl-node-0-0.rl", "rl-node-0-1.rl", "rl-node-1-0.rl",
                                               "rl-node-1-1.rl"});
}

TEST_CASE("an MPI JobSet with no launcher role: node rank 0 launches, listing itself first",
          "[layouts][server]") {
  // GPU vendors' NCCL JobSets: every pod runs sshd, the pod of completion index 0 calls mpirun.
  auto workers = replicated("worker", 1, 3);
  workers["template"]["spec"]["template"]["metadata"]["labels"]["trainer.kubeflow.org/framework"] =
      "mpi";
  const auto s = serve(jobset("nccl", json::array({workers})));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& first = s.pod("nccl-worker-0-0");
  CHECK(first.d.policy == "mpi");
  CHECK(env_of(first.admitted, "OMPI_MCA_orte_default_hostfile") == "/etc/mpi/hostfile");
  REQUIRE(first.hostfile.size() == 3);
  CHECK(first.hostfile.front() == "nccl-worker-0-0.nccl");
  CHECK(first.hostfile.back() == "nccl-worker-0-2.nccl");
  for (const auto& p : s.pods) {
    CHECK_THAT(p.admitted.dump(), Contains("nccl-mpi-ssh-auth"));  // every pod: the keys
    if (p.created.name == first.created.name) continue;
    CHECK(env_of(p.admitted, "OMPI_MCA_orte_default_hostfile") == "<absent>");
    CHECK_FALSE(p.has_hostfile);
  }
}

TEST_CASE("a Volcano MPI job whose tasks the user named: the template's role names the launcher",
          "[layouts][server]") {
  // Volcano's own example: tasks mpimaster and mpiworker; the master's template is labelled.
  const auto task = [](const std::string& name, int replicas, const std::string& role) {
    json labels = {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
                   {"trainer.kubeflow.org/framework", "mpi"}};
    if (!role.empty()) labels["trainenv.io/role"] = role;
    return json{{"name", name},
                {"replicas", replicas},
                {"template",
                 {{"metadata", {{"labels", labels}}},
                  {"spec", {{"containers", {{{"name", "node"}, {"image", "mpi:1"}}}}}}}}};
  };
  const json vj = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
                   {"kind", "Job"},
                   {"metadata", {{"name", "lm"}, {"namespace", "team-a"}}},
                   {"spec",
                    {{"plugins", {{"ssh", json::array()}, {"svc", json::array()}}},
                     {"tasks", {task("mpimaster", 1, "launcher"), task("mpiworker", 2, "")}}}}};
  const auto s = serve(vj);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& launcher = s.pod("lm-mpimaster-0");
  CHECK(launcher.d.allowed);
  REQUIRE(launcher.hostfile.size() == 2);
  CHECK(launcher.hostfile.front() == "lm-mpiworker-0.lm");
  CHECK(launcher.hostfile.back() == "lm-mpiworker-1.lm");
  CHECK_FALSE(s.pod("lm-mpiworker-0").has_hostfile);
}

TEST_CASE("a Volcano Job with the mpi plugin: the mpi policy, its flags name launcher and workers",
          "[layouts][server]") {
  // Volcano's own MPI example, unlabelled: plugins {mpi: [--master=mpimaster, --worker=mpiworker,
  // --port=2222], ssh: [], svc: []} (its admission adds ssh and svc) and a third task the plugin
  // does not name (a TensorBoard), which is no worker.
  const auto task = [](const std::string& name, int replicas) {
    return json{
        {"name", name},
        {"replicas", replicas},
        {"template",
         {{"metadata", {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
          {"spec", {{"containers", {{{"name", "node"}, {"image", "mpi:1"}}}}}}}}};
  };
  json vj = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
             {"kind", "Job"},
             {"metadata", {{"name", "lm"}, {"namespace", "team-a"}}},
             {"spec",
              {{"plugins",
                {{"mpi", {"--master=mpimaster", "--worker=mpiworker", "--port=2222"}},
                 {"ssh", json::array()},
                 {"svc", json::array()}}},
               {"tasks", {task("mpimaster", 1), task("mpiworker", 3), task("board", 1)}}}}};
  SECTION("named tasks, another SSH port, a side task") {
    const auto s = serve(vj);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto& launcher = s.pod("lm-mpimaster-0");
    CHECK(launcher.d.allowed);
    CHECK(launcher.d.policy == "mpi");
    REQUIRE(launcher.hostfile.size() == 3);
    CHECK(launcher.hostfile.front() == "lm-mpiworker-0.lm");
    CHECK(launcher.hostfile.back() == "lm-mpiworker-2.lm");
    CHECK(env_of(launcher.admitted, "OMPI_MCA_plm_rsh_args") == "-p 2222 -o ConnectionAttempts=10");
    CHECK(env_of(launcher.admitted, "PRTE_MCA_plm_ssh_args") == "-p 2222 -o ConnectionAttempts=10");
    // The plugin's own MPI_HOST lists the same hosts the hostfile does.
    CHECK(env_of(launcher.created.pod, "MPI_HOST") ==
          "lm-mpiworker-0.lm,lm-mpiworker-1.lm,lm-mpiworker-2.lm");
    for (const auto& p : s.pods) {
      CHECK(p.d.policy == "mpi");
      // Volcano's ssh plugin mounts the keys: no Secret of trainenv's.
      CHECK(p.admitted["spec"].value("volumes", json::array()).dump().find("mpi-ssh-auth") ==
            std::string::npos);
    }
    CHECK_FALSE(s.pod("lm-mpiworker-0").has_hostfile);
    CHECK_FALSE(s.pod("lm-board-0").has_hostfile);
  }
  SECTION("no flags: the tasks master and worker, port 22") {
    vj["spec"]["plugins"] = {{"mpi", json::array()}};
    vj["spec"]["tasks"] = {task("master", 1), task("worker", 2)};
    const auto s = serve(vj);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto& launcher = s.pod("lm-master-0");
    CHECK(launcher.d.policy == "mpi");
    REQUIRE(launcher.hostfile.size() == 2);
    CHECK(launcher.hostfile.front() == "lm-worker-0.lm");
    CHECK(env_of(launcher.admitted, "OMPI_MCA_plm_rsh_args") == "-o ConnectionAttempts=10");
  }
  SECTION("a template's own role wins over the plugin's flag") {
    vj["spec"]["tasks"][2]["template"]["metadata"]["labels"]["trainenv.io/role"] = "launcher";
    const auto s = serve(vj);
    CHECK_THAT(s.problem_text(), Contains("both play role \"launcher\""));
  }
}

TEST_CASE("a worker-only Volcano Job: every task trains, worker 0 the master",
          "[layouts][server]") {
  // Volcano's pytorch plugin writes nothing without a master task; users wire worker 0 by hand.
  auto vj = document("examples/jobs/volcano-job.yaml");
  auto& tasks = vj["spec"]["tasks"];
  tasks.erase(0);  // the master task
  REQUIRE(tasks[0]["name"] == "worker");
  const auto s = serve(vj);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  for (const auto& p : s.pods) {
    CHECK(p.d.policy == "volcano-pytorch");
    CHECK(env_of(p.admitted, "MASTER_ADDR") == "mnist-worker-0.mnist");
  }
  CHECK(env_of(s.pod("mnist-worker-0").admitted, "RANK") == "0");
  CHECK(env_of(s.pod("mnist-worker-1").admitted, "RANK") == "1");
  // With no master, the strict roles do not hold: the evaluator's task trains too.
  CHECK(env_of(s.pod("mnist-evaluator-0").admitted, "RANK") == "2");
  CHECK(env_of(s.pod("mnist-evaluator-0").admitted, "WORLD_SIZE") == "3");
}

namespace {

// The env of the container that got trainenv's values, as the kubelet reads it (the last entry
// of a name wins): the first whose env gained one of `names` at admission.
json told_env(const trainenv::core::previewed_pod& p, const json& names) {
  const auto env_of_container = [](const json& c) {
    json values = json::object();
    for (const auto& e : c.value("env", json::array()))
      values[e.value("name", "")] = e.value("value", json());
    return values;
  };
  const auto& created = p.created.pod["spec"]["containers"];
  for (const auto& c : p.admitted["spec"]["containers"]) {
    json before = json::object();
    for (const auto& o : created)
      if (o.value("name", "") == c.value("name", "")) before = env_of_container(o);
    const auto after = env_of_container(c);
    for (const auto& [name, value] : names.items()) {
      if (after.contains(name) && (!before.contains(name) || before[name] != after[name]))
        return after;
    }
  }
  return env_of_container(p.admitted["spec"]["containers"][0]);
}

}  // namespace

TEST_CASE("every corpus manifest, served, gives its pods the values their authors wired by hand",
          "[layouts][server][corpus]") {
  // tests/corpus: published jobs, their hand-wired values taken out and given back by trainenv,
  // here through /mutate with the owners from the fake API server (check.py runs preview --job).
  namespace fs = std::filesystem;
  std::size_t entries = 0;
  for (const auto& dir :
       fs::directory_iterator(std::string(TRAINENV_SOURCE_DIR) + "/tests/corpus")) {
    if (!fs::exists(dir.path() / "expect.json")) continue;
    const auto id = dir.path().filename().string();
    INFO("corpus entry " << id);
    ++entries;
    const auto expect = json::parse(test::read_file((dir.path() / "expect.json").string()));
    REQUIRE_FALSE(expect.contains("refused"));  // none yet: add the refusal check with the first
    const auto s = serve(document("tests/corpus/" + id + "/job.yaml"));
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto pods = expect.value("pods", json::object());
    const auto hostfiles = expect.value("hostfile", json::object());
    for (const auto& [pod, values] : pods.items()) {
      const auto& p = s.pod(pod);
      INFO("pod " << pod << ": " << p.d.message);
      REQUIRE(p.d.allowed);
      const auto env = told_env(p, values);
      for (const auto& [name, value] : values.items()) {
        INFO("variable " << name);
        CHECK(env.value(name, json("<absent>")) == value);
      }
    }
    for (const auto& [pod, hosts] : hostfiles.items()) CHECK(json(s.pod(pod).hostfile) == hosts);
  }
  CHECK(entries >= 15);
}
