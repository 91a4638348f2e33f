// The readiness wait (docs/contract.md §3.1) over the shipped policies: which pod of a job waits on
// what, as preview --job lays the job out and the engine decides each pod with the job's objects
// as its owners; the switches, level by level; the container itself; and the whole-job checks
// that no wait names a stranger or can deadlock.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "../test_support.hpp"
#include "shipped_policies.hpp"
#include "temp_dir.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/inputs/preview.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;
using Catch::Contains;

namespace {

const std::vector<json>& runtimes() {
  static const auto file = [] {
    auto parsed = inputs::owner_file::parse(
        test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/jobs/runtimes.yaml"),
        "runtimes.yaml");
    if (!parsed) FAIL(parsed.message());
    return std::move(*parsed);
  }();
  return file.objects();
}

core::job_preview preview(const std::string& yaml, const core::mutate_options& options = {},
                          const core::policy_set& policies = test::shipped_policies()) {
  auto job = inputs::read_job(yaml);
  REQUIRE(job);
  auto out = core::preview_job(*job, runtimes(), policies, core::cli_preview_bounds, options);
  REQUIRE(out);
  return std::move(*out);
}

const core::previewed_pod& pod(const core::job_preview& p, const std::string& name) {
  for (const auto& q : p.pods) {
    if (q.created.name == name) return q;
  }
  FAIL("no pod " << name);
  throw std::logic_error("unreachable");
}

// "host" (resolves) and "host:port" (accepts), in order.
std::vector<std::string> targets(const core::previewed_pod& p) {
  std::vector<std::string> out;
  REQUIRE(p.d.wait);
  for (const auto& t : p.d.wait->targets)
    out.push_back(t.port == 0 ? t.host : t.host + ":" + std::to_string(t.port));
  return out;
}

const json& wait_container(const core::previewed_pod& p) {
  const auto& init = p.admitted["spec"]["initContainers"];
  REQUIRE(init.is_array());
  REQUIRE(init.back()["name"] == "trainenv-wait");
  return init.back();
}

// A JobSet master 1 + worker 3, torchrun, with `network` and a template tweak.
std::string torch_jobset(const std::string& network = "{}", const std::string& annotations = "{}",
                         const std::string& extra = "") {
  std::string rjs;
  for (const auto& [role, pods] : {std::pair{"master", 1}, std::pair{"worker", 3}}) {
    rjs += R"(
    - name: )" +
           std::string(role) +
           R"(
      template:
        spec:
          parallelism: )" +
           std::to_string(pods) + R"(
          completions: )" +
           std::to_string(pods) + R"(
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
            spec:)" +
           extra +
           R"(
              containers:
                - name: node
                  image: pytorch/pytorch
                  command: [torchrun, train.py])";
  }
  return R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: gpt, namespace: team-a, annotations: )" +
         annotations + R"(}
spec:
  network: )" +
         network +
         R"(
  replicatedJobs:)" +
         rjs;
}

}  // namespace

TEST_CASE(
    "static torch: ranks > 0 wait on the master's name, rank 0 on its own where JobSet "
    "publishes not-ready addresses",
    "[wait]") {
  const auto p = preview(torch_jobset());
  REQUIRE(p.ok());
  CHECK(targets(pod(p, "gpt-master-0-0")) == std::vector<std::string>{"gpt-master-0-0.gpt"});
  for (const auto* worker : {"gpt-worker-0-0", "gpt-worker-0-1", "gpt-worker-0-2"}) {
    INFO(worker);
    CHECK(targets(pod(p, worker)) == std::vector<std::string>{"gpt-master-0-0.gpt"});
    const auto& c = wait_container(pod(p, worker));
    CHECK(c["image"] == std::string(core::default_wait_image));
    CHECK(c["command"] == json::array({"/usr/local/bin/trainenv", "wait"}));
    CHECK(c["args"] == json::array({"--timeout=600", "--job=jobset/gpt", "--namespace=team-a",
                                    "--resolve=gpt-master-0-0.gpt"}));
    // Requests equal limits: a Guaranteed pod stays Guaranteed, and quota counts it.
    CHECK(c["resources"]["requests"] == c["resources"]["limits"]);
    CHECK(c["resources"]["limits"] == json{{"cpu", "50m"}, {"memory", "64Mi"}});
    CHECK(c["securityContext"]["runAsNonRoot"] == true);
    CHECK(c["securityContext"]["runAsUser"] == 65532);
    CHECK(c["securityContext"]["allowPrivilegeEscalation"] == false);
    CHECK(c["securityContext"]["readOnlyRootFilesystem"] == true);
    CHECK(c["securityContext"]["capabilities"]["drop"] == json::array({"ALL"}));
    CHECK(c["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault");
    CHECK(c["terminationMessagePolicy"] == "FallbackToLogsOnError");
  }
}

TEST_CASE(
    "names published only once Ready: rank 0 never waits on itself, and a readiness probe "
    "is warned about",
    "[wait]") {
  const auto p = preview(torch_jobset("{publishNotReadyAddresses: false}", "{}", R"(
              restartPolicy: OnFailure)"));
  REQUIRE(p.ok());
  const auto& master = pod(p, "gpt-master-0-0");
  CHECK_FALSE(master.d.wait);
  CHECK(master.d.no_wait_reason == core::no_wait::nothing_to_dial);
  CHECK_THAT(master.d.no_wait_why, Contains("only once Ready"));
  CHECK(targets(pod(p, "gpt-worker-0-1")) == std::vector<std::string>{"gpt-master-0-0.gpt"});

  std::string probed = torch_jobset("{publishNotReadyAddresses: false}");
  const std::string at = "command: [torchrun, train.py]";
  for (auto i = probed.find(at); i != std::string::npos; i = probed.find(at, i + 1)) {
    probed.insert(i + at.size(), "\n                  readinessProbe: {tcpSocket: {port: 29500}}");
  }
  const auto warned = preview(probed);
  CHECK_THAT(pod(warned, "gpt-worker-0-0").d.warnings.front(),
             Contains("container \"node\" has a readinessProbe, and its name is published only "
                      "once Ready"));
}

TEST_CASE(
    "xgboost workers wait until the tracker's port accepts; elastic pods until the "
    "endpoint's does",
    "[wait]") {
  const auto x = preview(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: xg, namespace: team-a}
spec:
  runtimeRef: {name: xgboost-distributed}
  trainer: {numNodes: 3, command: [python, train.py]}
)");
  REQUIRE(x.ok());
  CHECK(targets(pod(x, "xg-node-0-1")) == std::vector<std::string>{"xg-node-0-0.xg"});
  CHECK(targets(pod(x, "xg-node-0-0")) == std::vector<std::string>{"xg-node-0-0.xg"});
  CHECK(wait_container(pod(x, "xg-node-0-2"))["args"][1] == "--job=trainjob/xg");

  const auto e = preview(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/jobs/jobset-elastic.yaml"));
  REQUIRE(e.ok());
  const std::string endpoint = "bert-node-0-0.bert.team-a.svc.cluster.local";
  CHECK(targets(pod(e, "bert-node-0-0")) == std::vector<std::string>{endpoint});
  CHECK(targets(pod(e, "bert-node-0-2")) == std::vector<std::string>{endpoint + ":29500"});
}

TEST_CASE("an MPI launcher waits on every other host of its hostfile, on sshd's port", "[wait]") {
  // Trainer's DeepSpeed runtime: the launcher is a node too, sshd on the readiness probe's 2222.
  const auto ds = preview(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/jobs/trainjob-deepspeed.yaml"));
  REQUIRE(ds.ok());
  const auto& launcher = pod(ds, "ds-launcher-0-0");
  REQUIRE(launcher.d.wait);
  CHECK(launcher.d.wait->hostfile == "/etc/mpi/hostfile");
  CHECK(launcher.d.wait->hostfile_port == 2222);
  CHECK(launcher.d.wait->skip == "ds-launcher-0-0.ds");
  // Its own name only resolves, and only because the runtime publishes not-ready addresses.
  CHECK(targets(launcher) == std::vector<std::string>{"ds-launcher-0-0.ds"});
  const auto& c = wait_container(launcher);
  CHECK(c["volumeMounts"] ==
        json::array({{{"name", "mpi-hostfile"}, {"mountPath", "/etc/mpi"}, {"readOnly", true}}}));
  std::size_t arg_bytes = 0;
  for (const auto& a : c["args"]) arg_bytes += a.get<std::string>().size();
  CHECK(arg_bytes < 1024);

  // Volcano's mpi plugin opens --port on every container for sshd.
  const auto v = preview(test::read_file(std::string(TRAINENV_SOURCE_DIR) +
                                         "/tests/launch/jobs/volcano-mpi-plugin.yaml"));
  REQUIRE(v.ok());
  std::vector<std::string> waiting;
  for (const auto& q : v.pods) {
    if (!q.d.wait) continue;
    waiting.push_back(q.created.name);
    CHECK(q.d.wait->hostfile_port == 2222);
  }
  CHECK(waiting == std::vector<std::string>{"lm-mpimaster-0"});
}

TEST_CASE("the switches: serve --wait off, then the pod, then an owner, then the policy's role",
          "[wait]") {
  SECTION("serve --wait off adds none anywhere, whatever an annotation says") {
    core::mutate_options off;
    off.wait = false;
    const auto p = preview(torch_jobset("{}", R"({"trainenv.io/wait": connect})"), off);
    for (const auto& q : p.pods) {
      CHECK_FALSE(q.d.wait);
      CHECK(q.d.no_wait_reason == core::no_wait::switched_off);
      CHECK(q.d.no_wait_why == "serve --wait off says off");
    }
  }
  SECTION("an owner's annotation: connect makes the workers connect, never rank 0 to itself") {
    const auto p = preview(torch_jobset("{}", R"({"trainenv.io/wait": connect})"));
    CHECK(targets(pod(p, "gpt-worker-0-0")) ==
          std::vector<std::string>{"gpt-master-0-0.gpt:29500"});
    CHECK(targets(pod(p, "gpt-master-0-0")) == std::vector<std::string>{"gpt-master-0-0.gpt"});
    CHECK_THAT(pod(p, "gpt-worker-0-0").d.wait->decided_by,
               Contains("annotation trainenv.io/wait of JobSet team-a/gpt"));
  }
  SECTION("the pod's annotation wins over its owner's") {
    const auto p = preview(torch_jobset("{}", R"({"trainenv.io/wait": connect})", R"(
              restartPolicy: OnFailure)"));
    std::string yaml = torch_jobset("{}", R"({"trainenv.io/wait": connect})");
    const std::string at = "labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}";
    yaml.replace(yaml.find(at), at.size(),
                 at + "\n              annotations: {trainenv.io/wait: \"off\"}");
    const auto q = preview(yaml);
    CHECK_FALSE(pod(q, "gpt-master-0-0").d.wait);
    CHECK(pod(q, "gpt-master-0-0").d.no_wait_reason == core::no_wait::switched_off);
    CHECK(targets(pod(q, "gpt-worker-0-0")) ==
          std::vector<std::string>{"gpt-master-0-0.gpt:29500"});
  }
  SECTION("the policy's wait.roles, under the annotations") {
    // The shipped policies with torch's wait turned off for role worker.
    const test::temp_dir scratch("wait-roles");
    const auto& dir = scratch.path;
    std::filesystem::copy(TRAINENV_POLICIES_DIR, dir);
    auto torch = test::read_file((dir / "torch.yaml").string());
    const std::string row = "    master: dns";
    torch.replace(torch.find(row), row.size(), row + "\n    roles: {worker: \"off\"}");
    std::ofstream(dir / "torch.yaml") << torch;
    const auto loaded = inputs::load_policy_dir(dir.string());
    REQUIRE(loaded.errors.empty());
    const auto p = preview(torch_jobset(), {}, *loaded.policies);
    CHECK(pod(p, "gpt-worker-0-0").d.no_wait_why ==
          "policy \"torch\" for role \"worker\" says off");
    CHECK(pod(p, "gpt-master-0-0").d.wait);
    // An owner's annotation says something first.
    const auto q =
        preview(torch_jobset("{}", R"({"trainenv.io/wait": dns})"), {}, *loaded.policies);
    CHECK(targets(pod(q, "gpt-worker-0-0")) == std::vector<std::string>{"gpt-master-0-0.gpt"});
  }
}

TEST_CASE("bad trainenv.io/wait and wait-timeout values are refused, naming the key and the form",
          "[wait]") {
  for (const auto& [annotations, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"trainenv.io/wait": sometimes})",
            "annotation trainenv.io/wait of JobSet team-a/gpt is \"sometimes\"; expected off, dns"},
           {R"({"trainenv.io/wait-timeout": "10 minutes"})",
            "annotation trainenv.io/wait-timeout of JobSet team-a/gpt is \"10 minutes\"; expected "
            "seconds or a duration"},
           {R"({"trainenv.io/wait-timeout": "0"})", "wait-timeout of JobSet team-a/gpt is \"0\""},
           {R"({"trainenv.io/wait-timeout": "25h"})", "is \"25h\"; expected seconds"},
           {R"({"trainenv.io/ssh-port": "70000"})", "ssh-port"},
       }) {
    INFO(annotations);
    const auto p = preview(torch_jobset("{}", annotations));
    if (annotations.find("ssh-port") != std::string::npos) {
      CHECK(p.ok());  // read only for an MPI launcher
      continue;
    }
    for (const auto& q : p.pods) {
      CHECK_FALSE(q.d.allowed);
      CHECK(q.d.code == 400);
      CHECK_THAT(q.d.message, Contains(expected));
    }
  }
  const auto timed = preview(torch_jobset("{}", R"({"trainenv.io/wait-timeout": "1h30m"})"));
  CHECK(timed.ok());
  CHECK(pod(timed, "gpt-worker-0-0").d.wait->timeout_seconds == 5400);
}

TEST_CASE("a policy's wait: block is checked at load", "[wait]") {
  const auto parse = [](const std::string& wait) {
    return core::parse_policy(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
      "kind": "TrainingPolicy", "metadata": {"name": "p"},
      "spec": {"wait": )" + wait + "}}"),
                              "p.json");
  };
  CHECK(parse(R"({"master": "dns", "timeout": "10m", "resources": {"cpu": "100m"},
                  "roles": {"worker": "off"}})"));
  for (const auto& [wait, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "spec.wait: names no row"},
           {R"({"master": "off"})", "spec.wait.master: \"off\" is not a check"},
           {R"({"master": "always"})", "spec.wait.master: \"always\" is not a check"},
           {R"({"hostfile": "connect"})", "spec.wait.hostfile: needs spec.hostfile"},
           {R"({"master": "dns", "timeout": "forever"})", "spec.wait.timeout: \"forever\""},
           {R"({"master": "dns", "timeout": 0})", "spec.wait.timeout: \"0\""},
           {R"({"master": "dns", "resources": {"cpu": "-1"}})", "spec.wait.resources.cpu"},
           {R"({"master": "dns", "resources": {"gpu": "1"}})", "gpu"},
           {R"({"master": "dns", "roles": {"worker": "maybe"}})", "spec.wait.roles.worker"},
           {R"({"master": "dns", "every": 1})", "every"},
       }) {
    INFO(wait);
    const auto parsed = parse(wait);
    REQUIRE_FALSE(parsed);
    CHECK_THAT(parsed.message(), Contains(expected));
  }
}

TEST_CASE("reinvocation adds nothing, and a wait already there is respected", "[wait]") {
  const auto p = preview(torch_jobset());
  // The job's objects as its owners, as the API would give them.
  json list = {{"kind", "List"}, {"items", p.job.objects}};
  for (const auto& r : runtimes()) list["items"].push_back(r);
  const auto owners = inputs::owner_file::parse(list.dump(), "objects");
  REQUIRE(owners);
  for (const auto& q : p.pods) {
    INFO(q.created.name);
    const auto again = core::decide(q.admitted, test::shipped_policies(), {},
                                    [&](const core::owner_ref& ref, core::owner_values& values) {
                                      owners->answer(ref, values);
                                    });
    REQUIRE(again.allowed);
    CHECK(again.patch().empty());
    REQUIRE(again.wait);
    CHECK(again.wait->present);
  }
  // Volcano's own wait-for-master: no second wait.
  std::string volcano =
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/jobs/volcano-job.yaml");
  const std::string at = "        spec:\n          restartPolicy: OnFailure\n";
  volcano.replace(volcano.find(at, volcano.find("name: worker")), at.size(),
                  at + "          initContainers:\n            - {name: wait-for-master, image: "
                       "busybox, command: [sh, -c, \"until nc -z mnist-master-0.mnist 23456; "
                       "do sleep 5; done\"]}\n");
  const auto v = preview(volcano);
  REQUIRE(v.ok());
  for (const auto* worker : {"mnist-worker-0", "mnist-worker-1"})
    CHECK(pod(v, worker).d.no_wait_reason == core::no_wait::waits_already);
}

TEST_CASE("a classic mesh: Istio's pods wait as its proxy's user, Linkerd's check names only",
          "[wait]") {
  const auto with = [](const std::string& containers, const std::string& init) {
    std::string yaml = torch_jobset("{}", R"({"trainenv.io/wait": connect})",
                                    init.empty() ? "" : "\n              initContainers: " + init);
    const std::string at = "                  command: [torchrun, train.py]";
    for (auto i = yaml.find(at); i != std::string::npos; i = yaml.find(at, i + 1))
      yaml.insert(i + at.size(), "\n                - " + containers);
    return preview(yaml);
  };
  const auto istio = with("{name: istio-proxy, image: istio/proxyv2}",
                          "[{name: istio-init, image: istio/proxyv2}]");
  CHECK(wait_container(pod(istio, "gpt-worker-0-0"))["securityContext"]["runAsUser"] == 1337);
  CHECK(targets(pod(istio, "gpt-worker-0-0")) ==
        std::vector<std::string>{"gpt-master-0-0.gpt:29500"});
  const auto linkerd = with("{name: linkerd-proxy, image: linkerd/proxy}",
                            "[{name: linkerd-init, image: linkerd/proxy-init}]");
  CHECK(targets(pod(linkerd, "gpt-worker-0-0")) == std::vector<std::string>{"gpt-master-0-0.gpt"});
  CHECK_THAT(pod(linkerd, "gpt-worker-0-0").d.warnings.back(), Contains("checks names only"));
  // A native sidecar runs before the wait: it connects, as itself.
  const auto native = with("{name: sidecar-log, image: x}",
                           "[{name: istio-proxy, image: istio/proxyv2, restartPolicy: Always}]");
  const auto& c = wait_container(pod(native, "gpt-worker-0-0"));
  CHECK(c["securityContext"]["runAsUser"] == 65532);
  CHECK(pod(native, "gpt-worker-0-0").admitted["spec"]["initContainers"][0]["name"] ==
        "istio-proxy");
}

TEST_CASE("hostNetwork pods get ClusterFirstWithHostNet for ClusterFirst or none, with a warning",
          "[wait]") {
  const auto p = preview(torch_jobset("{}", "{}", "\n              hostNetwork: true"));
  const auto& worker = pod(p, "gpt-worker-0-0");
  CHECK(worker.admitted["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet");
  CHECK(worker.d.injected.dns_policy == "ClusterFirstWithHostNet");
  CHECK_THAT(worker.d.warnings.front(),
             Contains("set dnsPolicy ClusterFirstWithHostNet (was none)"));
  const auto first = preview(torch_jobset(
      "{}", "{}", "\n              hostNetwork: true\n              dnsPolicy: ClusterFirst"));
  CHECK(pod(first, "gpt-worker-0-0").admitted["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet");
  const auto kept = preview(torch_jobset(
      "{}", "{}", "\n              hostNetwork: true\n              dnsPolicy: Default"));
  CHECK(pod(kept, "gpt-worker-0-0").admitted["spec"]["dnsPolicy"] == "Default");
  CHECK_THAT(pod(kept, "gpt-worker-0-0").d.warnings.front(), Contains("kept dnsPolicy Default"));
}

namespace {

// A wait on one target.
core::wait_plan waiting_on(const std::string& host, std::int64_t port) {
  core::wait_plan plan;
  plan.targets.push_back({host, port});
  return plan;
}

}  // namespace

TEST_CASE("preview --job refuses a wait on a stranger and waits that deadlock", "[wait]") {
  auto p = preview(torch_jobset("{publishNotReadyAddresses: false}"));
  REQUIRE(p.ok());
  const auto problems_with =
      [&](const std::function<void(std::vector<core::previewed_pod>&)>& edit) {
        auto pods = p.pods;
        edit(pods);
        std::vector<std::string> messages;
        for (const auto& problem : core::check_job(p.job, pods, test::shipped_policies()))
          messages.push_back(problem.message);
        return messages;
      };
  const auto at = [](std::vector<core::previewed_pod> & pods, const std::string& name) -> auto& {
    for (auto& q : pods) {
      if (q.created.name == name) return q;
    }
    throw std::logic_error("no pod " + name);
  };
  CHECK(problems_with([](auto&) {}).empty());
  auto stranger = problems_with([&](auto& pods) {
    at(pods, "gpt-worker-0-0").d.wait->targets = {{"gpt-master-0-0.other", 0}};
  });
  REQUIRE(stranger.size() == 1);
  CHECK_THAT(stranger[0],
             Contains("gpt-worker-0-0 waits on gpt-master-0-0.other, which is no pod"));
  // Rank 0 on its own name, which only Ready publishes: it never becomes Ready.
  auto self = problems_with(
      [&](auto& pods) { at(pods, "gpt-master-0-0").d.wait = waiting_on("gpt-master-0-0.gpt", 0); });
  REQUIRE(self.size() == 1);
  CHECK_THAT(self[0], Contains("gpt-master-0-0 -> gpt-master-0-0 (its own name"));
  // The master connecting to a worker that waits on it.
  auto cycle = problems_with([&](auto& pods) {
    at(pods, "gpt-master-0-0").d.wait = waiting_on("gpt-worker-0-1.gpt", 22);
  });
  REQUIRE(cycle.size() == 1);
  CHECK_THAT(cycle[0], Contains("pods wait on each other and never start"));
}
