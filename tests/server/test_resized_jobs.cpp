// Jobs that change size, and values a controller got wrong (docs/contract.md §2.3, §4), through
// the real server over TLS with the owners in the fake API server: elastic bounds from the job,
// the pod or the runtime, their bad forms, Kueue's annotations, a JobSet grown while it lives, a
// TrainJob resumed at another size with Trainer's stale values, and Volcano's pytorch plugin as
// its releases before and after PR #4281 write. Each case fails without its behaviour.
#include <catch2/catch.hpp>

#include "served_jobs.hpp"
#include "shipped_policies.hpp"

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

const std::vector<std::string> static_names = {
    "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
    "MASTER_ADDR",   "MASTER_PORT",     "WORLD_SIZE",
    "RANK"};

// An elastic pod's env: only what does not change with the job's size.
void check_elastic(const json& pod, const std::string& bounds, const std::string& endpoint,
                   const std::string& id) {
  CHECK(env_of(pod, "PET_NNODES") == bounds);
  CHECK(env_of(pod, "PET_RDZV_BACKEND") == "c10d");
  CHECK(env_of(pod, "PET_RDZV_ENDPOINT") == endpoint);
  CHECK(env_of(pod, "PET_RDZV_ID") == id);
  for (const auto& name : static_names) CHECK(env_of(pod, name) == "<absent>");
}

std::string uid_of(const test::served_job& s, const std::string& kind) {
  for (const auto& o : s.job.objects) {
    if (o["kind"] == kind) return o["metadata"]["uid"];
  }
  FAIL("no " << kind);
  return {};
}

json elastic_jobset(const std::string& bounds, int pods) {
  auto js = jobset("el", json::array({replicated("node", 1, pods)}));
  js["metadata"]["annotations"] = {{"trainenv.io/elastic", bounds},
                                   {"trainenv.io/max-restarts", "3"}};
  return js;
}

// The Volcano example Job with its pytorch plugin on.
json volcano_with_plugin(const json& args = json::array({"--master=master", "--worker=worker"})) {
  auto vj = document("examples/jobs/volcano-job.yaml");
  vj["spec"]["plugins"] = {{"pytorch", args}, {"svc", json::array()}};
  return vj;
}

std::size_t count_of(const json& pod, const std::string& name, std::size_t container = 0) {
  std::size_t n = 0;
  for (const auto& e : pod["spec"]["containers"][container].value("env", json::array()))
    n += e.value("name", "") == name ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("an elastic JobSet: every pod the same bounds and c10d rendezvous, no rank or master",
          "[resized][server]") {
  const auto s = serve(elastic_jobset("2:4", 3));
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto id = uid_of(s, "JobSet");
  for (const auto& p : s.pods) {
    check_elastic(p.admitted, "2:4", "el-node-0-0.el.team-a.svc.cluster.local:29500", id);
    CHECK(env_of(p.admitted, "PET_MAX_RESTARTS") == "3");
    CHECK(p.d.warnings.empty());
  }
  // preview --job reports it as one: its bounds, its size now, where it rendezvous.
  const auto preview = core::preview_job(elastic_jobset("2:4", 3), {}, test::shipped_policies());
  REQUIRE(preview.ok());
  CHECK(preview->ok());
  REQUIRE(preview->elastic);
  CHECK(preview->elastic->bounds == "2:4");
  CHECK(preview->elastic->size == 3);
  CHECK(preview->elastic->rendezvous == "el-node-0-0.el.team-a.svc.cluster.local:29500");
}

TEST_CASE("elastic bounds on the pod itself, and the cluster's own domain in the endpoint",
          "[resized][server]") {
  test::fake_apiserver api;
  const auto js =
      jobset("pe", json::array({replicated("node", 1, 2, {{"trainenv.io/elastic", "1:8"}})}));
  auto created = core::create_job(js, {});
  REQUIRE(created.ok());
  for (const auto& object : created->objects) api.add_object(object);
  test::server_options options;
  options.api = api.credentials();
  options.cluster_domain = "corp.internal";
  test::running_server server(options);
  const auto [response, admitted] = test::admit(server.tls_port(), created->pods[1].pod);
  CHECK(response["allowed"] == true);
  CHECK(env_of(admitted, "PET_NNODES") == "1:8");
  CHECK(env_of(admitted, "PET_RDZV_ENDPOINT") == "pe-node-0-0.pe.team-a.svc.corp.internal:29500");
  CHECK(env_of(admitted, "PET_MAX_RESTARTS") == "<absent>");
}

TEST_CASE("a runtime's elasticPolicy makes a TrainJob elastic, and Trainer's static values go",
          "[resized][server]") {
  auto given = runtimes();
  for (auto& r : given) {
    if (r["metadata"]["name"] == "torch-distributed")
      r["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = {
          {"minNodes", 1}, {"maxNodes", 4}, {"maxRestarts", 2}};
  }
  const auto s = serve(document("examples/jobs/trainjob-torch.yaml"), given);
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& tj = document("examples/jobs/trainjob-torch.yaml");
  const auto name = tj["metadata"]["name"].get<std::string>();
  const auto id = uid_of(s, "TrainJob");
  const auto& p = s.pod(name + "-node-0-1");
  check_elastic(p.admitted, "1:4", name + "-node-0-0." + name + ".team-a.svc.cluster.local:29500",
                id);
  CHECK(env_of(p.admitted, "PET_MAX_RESTARTS") == "2");
  // Trainer wrote a static PET_NNODES, PET_NODE_RANK and PET_MASTER_*: replaced, removed, said so.
  std::string warnings;
  for (const auto& w : p.d.warnings) warnings += w + "\n";
  CHECK_THAT(warnings, Contains("replaced PET_NNODES=") && Contains("Kubeflow Trainer") &&
                           Contains("removed PET_NODE_RANK") &&
                           Contains("removed PET_MASTER_ADDR"));
}

TEST_CASE("bad elastic bounds are refused naming the annotation and the form",
          "[resized][server]") {
  for (const auto* bounds : {"8:2", "0:4", "a:b", "4"}) {
    INFO(bounds);
    const auto s = serve(elastic_jobset(bounds, 2), {}, 1);
    const auto& p = s.pods.front();
    CHECK_FALSE(p.d.allowed);
    CHECK(p.d.code == 400);
    CHECK_THAT(p.d.message, Contains("trainenv.io/elastic") && Contains("MIN:MAX") &&
                                Contains(std::string("\"") + bounds + "\""));
  }
}

TEST_CASE("Kueue's elastic job without bounds is wired statically, one past MAX warned of",
          "[resized][server]") {
  SECTION("Kueue marks it elastic, trainenv.io/elastic is absent") {
    auto js = jobset("ku", json::array({replicated("node", 1, 2)}));
    js["metadata"]["annotations"] = {{"kueue.x-k8s.io/elastic-job", "true"}};
    const auto s = serve(js);
    CHECK(s.problems.empty());
    const auto& p = s.pod("ku-node-0-1");
    CHECK(env_of(p.admitted, "PET_NNODES") == "2");
    CHECK(env_of(p.admitted, "RANK") == "1");
    REQUIRE_FALSE(p.d.warnings.empty());
    CHECK_THAT(p.d.warnings[0], Contains("Kueue marks the job elastic"));
  }
  SECTION("a job larger than its maximum") {
    const auto s = serve(elastic_jobset("1:2", 3));
    REQUIRE_FALSE(s.pods.front().d.warnings.empty());
    CHECK_THAT(s.pods.front().d.warnings[0], Contains("more than its elastic maximum 2"));
  }
}

TEST_CASE("a JobSet grown while it lives: the pods created after are wired for the new size",
          "[resized][server]") {
  test::fake_apiserver api;
  const auto small = core::create_job(jobset("gr", json::array({replicated("node", 1, 2)})), {});
  const auto large = core::create_job(jobset("gr", json::array({replicated("node", 1, 4)})), {});
  REQUIRE(small.ok());
  REQUIRE(large.ok());
  std::string jobset_path;
  for (const auto& object : small->objects) {
    const auto path = api.add_object(object);
    if (object["kind"] == "JobSet") jobset_path = path;
  }
  test::server_options options;
  options.api = api.credentials();
  test::running_server server(options);
  const auto first = test::admit(server.tls_port(), small->pods[0].pod, "u0").second;
  CHECK(env_of(first, "PET_NNODES") == "2");
  // ElasticJobSet raises the parallelism; the Job controller creates pods 2 and 3. Pod 2's index
  // is past the cached JobSet's two pods: the JobSet is read again, not wired from the old size.
  for (const auto& object : large->objects) {
    if (object["kind"] == "JobSet" || object["kind"] == "Job") api.add_object(object);
  }
  const auto gets_before = api.gets(jobset_path);
  const auto grown = test::admit(server.tls_port(), large->pods[2].pod, "u2").second;
  CHECK(api.gets(jobset_path) == gets_before + 1);
  CHECK(env_of(grown, "PET_NNODES") == "4");
  CHECK(env_of(grown, "RANK") == "2");
  // A pod re-created at index 0 afterwards gets the new size from the refreshed cache.
  const auto again = test::admit(server.tls_port(), large->pods[0].pod, "u3").second;
  CHECK(env_of(again, "PET_NNODES") == "4");
  CHECK(env_of(again, "WORLD_SIZE") == "4");
}

TEST_CASE(
    "Kueue's partial admission: the Job's own parallelism counts, and a warning when its "
    "completions do not follow",
    "[resized][server]") {
  auto job = document("examples/jobs/indexed-job.yaml");
  job["metadata"]["annotations"] = {{"kueue.x-k8s.io/job-min-parallelism", "2"}};
  job["spec"]["parallelism"] = 3;  // admitted 3 of the 4 asked for
  job["spec"]["completions"] = 4;
  auto s = serve(job);
  const auto& p = s.pods.front();
  CHECK(env_of(p.admitted, "WORLD_SIZE") == "3");
  REQUIRE_FALSE(p.d.warnings.empty());
  CHECK_THAT(p.d.warnings[0], Contains("Kueue admitted") && Contains("partially"));
  // With completions following parallelism, as Kueue can be asked to do: no warning.
  job["metadata"]["annotations"]["kueue.x-k8s.io/job-completions-equal-parallelism"] = "true";
  job["spec"]["completions"] = 3;
  s = serve(job);
  CHECK(s.pods.front().d.warnings.empty());
  CHECK(env_of(s.pods.front().admitted, "WORLD_SIZE") == "3");
}

TEST_CASE("a TrainJob resumed at another size: Trainer's stale PET_NNODES is replaced, said so",
          "[resized][server]") {
  auto tj = document("examples/jobs/trainjob-torch.yaml");
  tj["spec"]["trainer"]["numNodes"] = 4;
  const auto name = tj["metadata"]["name"].get<std::string>();
  const auto s = serve(tj, runtimes(), 0, [&](json& pod) {
    if (pod["metadata"]["generateName"] != name + "-node-0-1-") return;
    for (auto& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == "PET_NNODES") e["value"] = "2";  // written before the resize
    }
  });
  INFO(s.problem_text());
  CHECK(s.problems.empty());
  const auto& stale = s.pod(name + "-node-0-1");
  CHECK(env_of(stale.admitted, "PET_NNODES") == "4");
  CHECK(count_of(stale.admitted, "PET_NNODES") == 1);
  REQUIRE(stale.d.warnings.size() == 1);
  CHECK_THAT(stale.d.warnings[0], Contains("replaced PET_NNODES=2 with 4") &&
                                      Contains("Kubeflow Trainer") && Contains("JobSet"));
  // Where Trainer's value agrees with the live layout, nothing changes and nothing is said.
  CHECK(s.pod(name + "-node-0-2").d.warnings.empty());
}

TEST_CASE("the Volcano fix at admission: the pytorch plugin's output before and after PR #4281",
          "[resized][server]") {
  SECTION("before: WORLD_SIZE counts every task; replaced on master and workers, removed else") {
    core::controller_model old_volcano;
    old_volcano.volcano_counts_every_task = true;
    const auto s = serve(
        volcano_with_plugin(), {}, 0, [](json&) {}, old_volcano);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto& worker = s.pod("mnist-worker-1");
    CHECK(env_of(worker.created.pod, "WORLD_SIZE") == "4");  // what the plugin wrote
    CHECK(env_of(worker.admitted, "WORLD_SIZE") == "3");
    CHECK(env_of(worker.admitted, "RANK") == "2");
    CHECK_THAT(worker.d.warnings[0],
               Contains("replaced WORLD_SIZE=4 with 3") && Contains("Volcano's pytorch plugin"));
    const auto& evaluator = s.pod("mnist-evaluator-0");
    CHECK(env_of(evaluator.admitted, "WORLD_SIZE") == "<absent>");
    CHECK(env_of(evaluator.admitted, "MASTER_ADDR") == "mnist-master-0.mnist");  // kept
  }
  SECTION("after: master and workers agree, the evaluator's WORLD_SIZE still goes") {
    const auto s = serve(volcano_with_plugin());
    CHECK(s.problems.empty());
    CHECK(s.pod("mnist-worker-1").d.warnings.empty());
    CHECK(env_of(s.pod("mnist-worker-1").admitted, "WORLD_SIZE") == "3");
    CHECK(env_of(s.pod("mnist-evaluator-0").created.pod, "WORLD_SIZE") == "3");
    CHECK(env_of(s.pod("mnist-evaluator-0").admitted, "WORLD_SIZE") == "<absent>");
  }
  SECTION(
      "a WORLD_SIZE the task template sets: the plugin's duplicate goes, the template's stays") {
    auto vj = volcano_with_plugin();
    for (auto& task : vj["spec"]["tasks"]) {
      if (task["name"] == "worker")
        task["template"]["spec"]["containers"][0]["env"] = {
            {{"name", "WORLD_SIZE"}, {"value", "8"}}};
    }
    const auto s = serve(vj);
    const auto& worker = s.pod("mnist-worker-0");
    CHECK(count_of(worker.created.pod, "WORLD_SIZE") == 2);
    CHECK(count_of(worker.admitted, "WORLD_SIZE") == 1);
    CHECK(env_of(worker.admitted, "WORLD_SIZE") == "8");
  }
  SECTION("its --master, --worker and --port name the roles and the port") {
    auto vj =
        volcano_with_plugin(json::array({"--master=chief", "--worker=replica", "--port=23457"}));
    for (auto& task : vj["spec"]["tasks"]) {
      if (task["name"] == "master") task["name"] = "chief";
      if (task["name"] == "worker") task["name"] = "replica";
    }
    const auto s = serve(vj);
    INFO(s.problem_text());
    CHECK(s.problems.empty());
    const auto& replica = s.pod("mnist-replica-1");
    CHECK(env_of(replica.admitted, "MASTER_ADDR") == "mnist-chief-0.mnist");
    CHECK(env_of(replica.admitted, "MASTER_PORT") == "23457");
    CHECK(env_of(replica.admitted, "WORLD_SIZE") == "3");
    CHECK(env_of(replica.admitted, "RANK") == "2");
    CHECK(replica.d.warnings.empty());  // the plugin's values agree
  }
}
