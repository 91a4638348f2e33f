// trainenv doctor reading the cluster: every doctor fixture served by the fake API server (HTTPS,
// a bearer token, LISTs by label and field selector in pages, items without kind or apiVersion as
// the API server lists them) gives the same diagnosis as the fixture read offline (--from), so
// each finding is tested through both; refused reads are not checked (optional kinds) or fail
// the run (the job, its pods).
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "doctor_fixtures.hpp"
#include "fake_apiserver.hpp"
#include "shipped_policies.hpp"
#include "temp_dir.hpp"
#include "trainenv/inputs/doctor.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/live_job_reader.hpp"
#include "trainenv/server/owner_lookup.hpp"

namespace {

using namespace trainenv;
using nlohmann::json;

// Every object of the fixture, served.
void serve(test::fake_apiserver& api, const inputs::owner_file& dump) {
  for (const auto& object : dump.objects()) api.add_object(object);
}

core::result<server::live_job_read> read(const test::fake_apiserver& api, const std::string& target,
                                         server::live_job_read_options options = {}) {
  boost::asio::io_context ioc;
  auto client = server::kube_client::create(ioc.get_executor(), api.credentials());
  REQUIRE(client);
  auto parsed = inputs::parse_doctor_target(target);
  REQUIRE(parsed);
  return server::run_to_end(ioc, server::read_live_job(*client, *parsed, "team-a", options));
}

core::diagnosis diagnosed(const std::vector<json>& objects, const std::string& target,
                          std::vector<std::string> not_checked = {},
                          std::vector<core::pod_log> logs = {}) {
  auto job = inputs::live_job_from(objects, *inputs::parse_doctor_target(target), "team-a",
                                   "the objects read");
  INFO((job.ok() ? std::string() : job.message()));
  REQUIRE(job);
  job->not_checked = std::move(not_checked);
  job->logs = std::move(logs);
  auto d = core::diagnose(*job, test::shipped_policies());
  INFO((d.ok() ? std::string() : d.message()));
  REQUIRE(d);
  return std::move(*d);
}

std::multiset<std::string> kinds_of(const core::diagnosis& d) {
  std::multiset<std::string> out;
  for (const auto& f : d.findings) out.insert(f.kind);
  return out;
}

bool has(const std::vector<std::string>& texts, const std::string& prefix) {
  return std::any_of(texts.begin(), texts.end(),
                     [&](const std::string& t) { return t.rfind(prefix, 0) == 0; });
}

}  // namespace

TEST_CASE("doctor through the API: each fixture gives what --from gives", "[doctor]") {
  for (const auto& c : test::doctor_cases()) {
    INFO(c.fixture);
    const auto dump = test::doctor_fixture(c.fixture);
    test::fake_apiserver api;
    serve(api, dump);
    // Pages of two: every LIST of more than two items goes on with `continue`.
    const auto got = read(api, c.target, {.page_size = 2});
    INFO((got.ok() ? std::string() : got.message()));
    REQUIRE(got);
    CHECK(got->not_checked.empty());
    const auto through_api = diagnosed(got->objects, c.target, got->not_checked);
    const auto from_file = diagnosed(dump.objects(), c.target);
    INFO(inputs::to_table(through_api));
    CHECK(kinds_of(through_api) == c.kinds);
    CHECK(through_api.healthy() == c.healthy);
    const auto difference = json::diff(inputs::to_json(from_file), inputs::to_json(through_api));
    INFO(difference.dump());
    CHECK(difference.empty());
  }
}

TEST_CASE("doctor through the API: pods by their job's label, Warning events, pages", "[doctor]") {
  const auto dump = test::doctor_fixture("denied");
  test::fake_apiserver api;
  serve(api, dump);
  // Another JobSet's pod in the namespace, and a Normal event: neither is read.
  api.add_object(json::parse(R"({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "other-0", "namespace": "team-a",
                   "labels": {"jobset.sigs.k8s.io/jobset-name": "other"}},
      "spec": {"containers": [{"name": "c", "image": "x"}]}})"));
  api.add_object(json::parse(R"({"apiVersion": "v1", "kind": "Event",
      "metadata": {"name": "gpt.normal", "namespace": "team-a"}, "type": "Normal",
      "reason": "SuccessfulCreate", "involvedObject": {"kind": "JobSet", "name": "gpt"}})"));
  const auto got = read(api, "jobset/gpt", {.page_size = 1});
  REQUIRE(got);
  std::size_t pods = 0;
  std::size_t events = 0;
  for (const auto& object : got->objects) {
    const auto kind = object.value("kind", "");
    CHECK(object.contains("apiVersion"));
    if (kind == "Pod") {
      ++pods;
      CHECK(object["metadata"]["name"] != "other-0");
    }
    if (kind == "Event") {
      ++events;
      CHECK(object["type"] == "Warning");
    }
  }
  CHECK(pods == 3);
  CHECK(events == 1);
  const auto targets = api.targets();
  const auto asked = [&](const std::string& part) {
    return std::any_of(targets.begin(), targets.end(),
                       [&](const std::string& t) { return t.find(part) != std::string::npos; });
  };
  CHECK(
      asked("/api/v1/namespaces/team-a/pods?labelSelector=jobset.sigs.k8s.io%2Fjobset-name%3Dgpt"
            "&limit=1"));
  CHECK(asked("&continue=offset-2"));
  CHECK(asked("/api/v1/namespaces/team-a/events?fieldSelector=type%3DWarning"));
  CHECK(
      asked("/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices?labelSelector="
            "kubernetes.io%2Fservice-name%3Dtrain-svc"));
  CHECK(
      asked("/apis/batch/v1/namespaces/team-a/jobs?labelSelector="
            "jobset.sigs.k8s.io%2Fjobset-name%3Dgpt"));
}

TEST_CASE("doctor through the API: a pod walks up to its TrainJob, each uid checked", "[doctor]") {
  const auto dump = test::doctor_fixture("healthy-trainjob");
  test::fake_apiserver api;
  serve(api, dump);
  std::string pod;
  for (const auto& object : dump.objects()) {
    if (object.value("kind", "") == "Pod") pod = object["metadata"]["name"];
  }
  const auto got = read(api, "pod/" + pod);
  REQUIRE(got);
  const auto by_pod = diagnosed(got->objects, "pod/" + pod);
  CHECK(by_pod.kind == "TrainJob");
  CHECK(by_pod.name == "llama");
  CHECK(by_pod.findings.empty());

  // The JobSet replaced (another uid): the walk stops at the Job, whose JobSet is not the one
  // the pod's Job names.
  for (auto object : dump.objects()) {
    if (object.value("kind", "") != "JobSet") continue;
    object["metadata"]["uid"] = "a-new-uid";
    api.add_object(object);
  }
  const auto replaced = read(api, "pod/" + pod);
  REQUIRE(replaced);
  bool trainjob_read = false;
  for (const auto& object : replaced->objects)
    trainjob_read = trainjob_read || object.value("kind", "") == "TrainJob";
  CHECK_FALSE(trainjob_read);
}

TEST_CASE("doctor through the API: a refused optional read is not checked", "[doctor]") {
  struct refusal {
    std::string fixture;
    std::string path;
    std::string listed;        // the not-checked entry's start
    std::string lost_finding;  // the finding that needed the read
  };
  const std::vector<refusal> refusals = {
      {"denied", "/api/v1/namespaces/team-a/events", "events: ", "denied"},
      {"no-service", "/api/v1/namespaces/team-a/services", "services: ", "no-service"},
      {"queued", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads",
       "workloads: ", "queued"},
      {"podgroup-pending", "/apis/scheduling.volcano.sh/v1beta1/namespaces/team-a/podgroups",
       "podgroups: ", "podgroup-pending"},
      {"missing-ssh-secret", "/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices",
       "endpointslices: ", ""},
      // The launcher's hostfile unread: what it was told is not compared, not called stale.
      {"missing-ssh-secret", "/api/v1/namespaces/team-a/configmaps/ds-mpi-hostfile",
       "configmaps: ", "stale"},
  };
  for (const auto& r : refusals) {
    INFO(r.fixture << " " << r.path);
    test::fake_apiserver api;
    serve(api, test::doctor_fixture(r.fixture));
    api.misbehave(r.path, {std::chrono::milliseconds(0), test::fault::forbidden});
    const auto target = r.fixture == "podgroup-pending"     ? "vcjob/mnist"
                        : r.fixture == "missing-ssh-secret" ? "trainjob/ds"
                                                            : "jobset/gpt";
    const auto got = read(api, target);
    REQUIRE(got);
    REQUIRE(got->not_checked.size() == 1);
    CHECK(has(got->not_checked, r.listed));
    CHECK_THAT(got->not_checked[0], Catch::Contains("forbidden"));
    const auto d = diagnosed(got->objects, target, got->not_checked);
    if (!r.lost_finding.empty()) CHECK(kinds_of(d).count(r.lost_finding) == 0);
    CHECK_THAT(inputs::to_table(d), Catch::Contains("not checked: " + r.listed));
  }
}

TEST_CASE("doctor through the API: the job or its pods unreadable is an error", "[doctor]") {
  const auto dump = test::doctor_fixture("healthy-jobset");
  {
    test::fake_apiserver api;
    serve(api, dump);
    api.misbehave("/api/v1/namespaces/team-a/pods",
                  {std::chrono::milliseconds(0), test::fault::forbidden});
    const auto got = read(api, "jobset/gpt");
    REQUIRE_FALSE(got);
    CHECK_THAT(got.message(), Catch::Contains("listing pods") && Catch::Contains("forbidden") &&
                                  Catch::Contains("cannot list resource \"pods\""));
  }
  {
    test::fake_apiserver api;
    serve(api, dump);
    const auto missing = read(api, "jobset/nope");
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.message(), Catch::Contains("JobSet.jobset.x-k8s.io nope not found in "
                                                  "namespace team-a"));
    api.set_tokens({"another-token"});
    const auto refused = read(api, "jobset/gpt");
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.message(), Catch::Contains("Unauthorized"));
  }
}

namespace {

// The rules of the ClusterRoles `names` in manifests/base/doctor-clusterroles.yaml.
std::vector<test::rbac_rule> doctor_role_rules(const std::set<std::string>& names) {
  const auto docs = inputs::parse_documents(test::read_file(
      std::string(TRAINENV_SOURCE_DIR) + "/manifests/base/doctor-clusterroles.yaml"));
  REQUIRE(docs);
  std::vector<test::rbac_rule> out;
  for (const auto& role : *docs) {
    if (!names.contains(role["metadata"]["name"].get<std::string>())) continue;
    for (const auto& rule : role["rules"]) {
      out.push_back({rule["apiGroups"].get<std::set<std::string>>(),
                     rule["resources"].get<std::set<std::string>>(),
                     rule["verbs"].get<std::set<std::string>>()});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("doctor's ClusterRoles grant what it reads of every fixture, and nothing it does not",
          "[doctor]") {
  const auto rules = doctor_role_rules({"trainenv-doctor", "trainenv-doctor-cluster"});
  REQUIRE_FALSE(rules.empty());
  std::set<std::string> used;
  for (const auto& c : test::doctor_cases()) {
    INFO(c.fixture);
    test::fake_apiserver api({.rules_of = {{"test-token", rules}}});
    serve(api, test::doctor_fixture(c.fixture));
    const auto got = read(api, c.target);
    INFO((got.ok() ? std::string() : got.message()));
    REQUIRE(got);
    CHECK(got->not_checked.empty());
    const auto reads = api.reads();
    used.insert(reads.begin(), reads.end());
    // A pod named for its job reads pods by name, then walks up.
    if (c.fixture.rfind("healthy-", 0) == 0) {
      std::string pod;
      for (const auto& object : got->objects) {
        if (object.value("kind", "") == "Pod") pod = object["metadata"]["name"];
      }
      REQUIRE(read(api, "pod/" + pod));
      const auto walked = api.reads();
      used.insert(walked.begin(), walked.end());
    }
  }
  {
    // A TrainJob whose runtime is a namespaced TrainingRuntime.
    test::fake_apiserver api({.rules_of = {{"test-token", rules}}});
    const auto dump = test::doctor_fixture("healthy-trainjob");
    for (auto object : dump.objects()) {
      if (object["kind"] == "ClusterTrainingRuntime") {
        object["kind"] = "TrainingRuntime";
        object["metadata"]["namespace"] = "team-a";
      }
      if (object["kind"] == "TrainJob") object["spec"]["runtimeRef"]["kind"] = "TrainingRuntime";
      api.add_object(object);
    }
    const auto got = read(api, "trainjob/llama");
    INFO((got.ok() ? std::string() : got.message()));
    REQUIRE(got);
    CHECK(diagnosed(got->objects, "trainjob/llama").findings.empty());
    const auto reads = api.reads();
    used.insert(reads.begin(), reads.end());
  }
  // Every resource the roles name was read by some verb (get beside list is SPEC's pair: a LIST
  // shows all a GET would).
  std::set<std::string> granted;
  for (const auto& rule : rules) {
    for (const auto& group : rule.api_groups) {
      for (const auto& resource : rule.resources)
        granted.insert(group.empty() ? resource : resource + "." + group);
    }
  }
  for (const auto& resource : granted) {
    INFO(resource);
    CHECK((used.contains("get " + resource) || used.contains("list " + resource)));
  }
  // Without the cluster role, a TrainJob's ClusterTrainingRuntime cannot be read: an error.
  test::fake_apiserver api({.rules_of = {{"test-token", doctor_role_rules({"trainenv-doctor"})}}});
  serve(api, test::doctor_fixture("healthy-trainjob"));
  const auto without = read(api, "trainjob/llama");
  REQUIRE_FALSE(without);
  CHECK_THAT(without.message(),
             Catch::Contains("ClusterTrainingRuntime torch-distributed: ") &&
                 Catch::Contains("cannot get resource \"clustertrainingruntimes\""));
}

namespace {

// The first pod of `dump` (by name) and its first container.
std::pair<std::string, std::string> first_pod(const inputs::owner_file& dump) {
  std::pair<std::string, std::string> out;
  for (const auto& object : dump.objects()) {
    if (object.value("kind", "") != "Pod") continue;
    const std::string name = object["metadata"]["name"];
    if (!out.first.empty() && out.first < name) continue;
    out = {name, object["status"]["containerStatuses"][0]["name"].get<std::string>()};
  }
  REQUIRE_FALSE(out.first.empty());
  return out;
}

// The startup-failure findings of `d`, by the failure's name in their text.
bool names_failure(const core::diagnosis& d, const std::string& failure) {
  return std::any_of(d.findings.begin(), d.findings.end(), [&](const core::finding& f) {
    return f.kind == "startup-failure" && f.what.find("(" + failure + ")") != std::string::npos;
  });
}

}  // namespace

TEST_CASE("doctor --logs names each known start-up failure as the real program prints it",
          "[doctor]") {
  // The real programs, failing: tests/doctor/startup_failures.sh.
  const test::temp_dir scratch("startup-failures");
  const auto& dir = scratch.path;
  const std::string script = std::string(TRAINENV_SOURCE_DIR) + "/tests/doctor/startup_failures.sh";
  REQUIRE(std::system(("bash " + script + " " + dir.string() + " >/dev/null").c_str()) == 0);
  const auto& failures = test::shipped_policies().startup_failures();
  REQUIRE(failures.size() >= 10);
  const auto dump = test::doctor_fixture("healthy-jobset");
  const auto [pod, container] = first_pod(dump);
  for (const auto& failure : failures) {
    INFO(failure.name);
    const auto log = test::read_file((dir / (failure.name + ".log")).string());
    INFO(log);
    REQUIRE_FALSE(log.empty());
    test::fake_apiserver api;
    serve(api, dump);
    api.set_log("team-a", pod, container, log);
    const auto got = read(api, "jobset/gpt", {.logs = true});
    REQUIRE(got);
    CHECK(got->not_checked.empty());
    CHECK(got->logs.size() == 1);  // only the pod given a log: the others' containers answer 400
    const auto d = diagnosed(got->objects, "jobset/gpt", got->not_checked, got->logs);
    INFO(inputs::to_table(d));
    CHECK(names_failure(d, failure.name));
    CHECK_FALSE(d.healthy());
  }
  // A log without any: nothing found.
  test::fake_apiserver api;
  serve(api, dump);
  api.set_log("team-a", pod, container, "epoch 1 loss 0.31\nepoch 2 loss 0.27\n");
  const auto got = read(api, "jobset/gpt", {.logs = true});
  REQUIRE(got);
  REQUIRE(got->logs.size() == 1);
  CHECK(diagnosed(got->objects, "jobset/gpt", {}, got->logs).findings.empty());
}

TEST_CASE("doctor --logs reads the run before a restart, and a refusal is not checked",
          "[doctor]") {
  const auto dump = test::doctor_fixture("crash-loop");
  {
    test::fake_apiserver api;
    serve(api, dump);
    const auto [pod, container] = first_pod(dump);
    api.set_log("team-a", pod, container,
                "ssh: Could not resolve hostname gpt-worker-0-0.train-svc: Name or service not "
                "known\n",
                true);
    const auto got = read(api, "jobset/gpt", {.logs = true});
    REQUIRE(got);
    const auto d = diagnosed(got->objects, "jobset/gpt", got->not_checked, got->logs);
    INFO(inputs::to_table(d));
    CHECK(names_failure(d, "ssh-unresolved-host"));
    CHECK_THAT(inputs::to_table(d), Catch::Contains("the run before its restart"));
    CHECK(api.reads().contains("get pods/log"));
  }
  {
    // Without trainenv-doctor-logs: the logs are not checked, the rest is.
    const auto rules = doctor_role_rules({"trainenv-doctor", "trainenv-doctor-cluster"});
    test::fake_apiserver api({.rules_of = {{"test-token", rules}}});
    serve(api, dump);
    const auto got = read(api, "jobset/gpt", {.logs = true});
    REQUIRE(got);
    REQUIRE(got->not_checked.size() == 1);
    CHECK_THAT(got->not_checked[0], Catch::StartsWith("pods/log: ") &&
                                        Catch::Contains("cannot get resource \"pods/log\""));
    // With it, they are read.
    auto with_logs = rules;
    const auto logs_rules = doctor_role_rules({"trainenv-doctor-logs"});
    with_logs.insert(with_logs.end(), logs_rules.begin(), logs_rules.end());
    test::fake_apiserver allowed({.rules_of = {{"test-token", with_logs}}});
    serve(allowed, dump);
    const auto [pod, container] = first_pod(dump);
    allowed.set_log("team-a", pod, container, "crashed\n", true);
    const auto read_back = read(allowed, "jobset/gpt", {.logs = true});
    REQUIRE(read_back);
    CHECK(read_back->not_checked.empty());
    CHECK_FALSE(read_back->logs.empty());
  }
}
