// Owner lookups end to end: the real server over TLS reads pods' owners from the fake API
// server (examples/owners objects, a bearer token) through its owner cache (docs/contract.md
// §2.1).
#include <catch2/catch.hpp>

#include <atomic>
#include <optional>
#include <thread>

#include "example_owners.hpp"
#include "fake_apiserver.hpp"
#include "server_harness.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace {

using namespace trainenv;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using nlohmann::json;

using test::example;

json pod_of(const std::string& pod_file) {
  return test::example_pod(pod_file);
}

json owner_of(const std::string& owners_file, const std::string& kind) {
  return test::example_owner(owners_file, kind);
}

json review_of(const std::string& pod_file, const std::string& uid) {
  return test::pod_review(pod_of(pod_file), uid);
}

// The AdmissionReview response's `response`, and the pod with its patch applied.
struct admitted {
  json response;
  json pod;
};

// The answer to one /mutate, or nullopt if it could not be had; no Catch macro, so that it runs
// on the tests' own threads (Catch is not thread-safe).
std::optional<admitted> try_admit(unsigned short port, const json& review) {
  test::tls_client client(port);
  if (client.handshake()) return std::nullopt;
  const auto res =
      client.send(test::make_request(test::http::verb::post, "/mutate", review.dump()));
  if (res.result_int() != 200) return std::nullopt;
  const auto body = json::parse(res.body(), nullptr, false);
  if (body.is_discarded() || !body.contains("response")) return std::nullopt;
  admitted out{body["response"], review["request"]["object"]};
  if (out.response.contains("patch")) {
    const auto patch = core::base64_decode(out.response["patch"].get<std::string>());
    if (!patch) return std::nullopt;
    out.pod = out.pod.patch(json::parse(*patch));
  }
  return out;
}

admitted admit(unsigned short port, const json& review) {
  test::tls_client client(port);
  REQUIRE_FALSE(client.handshake());
  const auto res =
      client.send(test::make_request(test::http::verb::post, "/mutate", review.dump()));
  REQUIRE(res.result_int() == 200);
  const auto body = json::parse(res.body());
  admitted out{body.at("response"), review["request"]["object"]};
  if (out.response.contains("patch")) {
    const auto patch = core::base64_decode(out.response["patch"].get<std::string>());
    REQUIRE(patch);
    out.pod = out.pod.patch(json::parse(*patch));
  }
  return out;
}

std::string env_of(const json& pod, const std::string& name) {
  for (const auto& c : pod["spec"]["containers"]) {
    for (const auto& e : c.value("env", json::array())) {
      if (e.value("name", "") == name && e.contains("value")) return e["value"];
    }
  }
  return {};
}

struct api_fixture {
  test::fake_apiserver api;
  std::vector<std::string> paths;
  explicit api_fixture(const std::string& owners) { paths = api.load_yaml(example(owners)); }
  test::server_options options(std::chrono::milliseconds budget = 2000ms) {
    test::server_options o;
    o.api = api.credentials();
    o.lookup_timeout = budget;
    return o;
  }
};

}  // namespace

TEST_CASE("a Trainer torch pod with no trainenv annotation is sized from its JobSet",
          "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  test::running_server server(f.options());
  const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-torch"));
  INFO(a.response.dump());
  REQUIRE(a.response["allowed"] == true);
  CHECK(env_of(a.pod, "WORLD_SIZE") == "3");
  CHECK(env_of(a.pod, "RANK") == "1");
  CHECK(f.api.total_gets() >= 1);
  CHECK(server.state.metrics.owner_lookups("jobset", server::lookup_source::fetched) == 1);
  // A second pod of the job: every owner from the cache, no further GET.
  const auto gets = f.api.total_gets();
  const auto again = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-torch-2"));
  CHECK(env_of(again.pod, "WORLD_SIZE") == "3");
  CHECK(f.api.total_gets() == gets);
  // The walk takes cached owners as it asks (one pass): each still counts as a hit, and the
  // answer is the one the walk gave when it fetched them.
  for (const auto* kind : {"job", "jobset", "trainjob", "clustertrainingruntime"}) {
    INFO(kind);
    CHECK(server.state.metrics.owner_lookups(kind, server::lookup_source::fetched) == 1);
    CHECK(server.state.metrics.owner_lookups(kind, server::lookup_source::cached) == 1);
  }
  CHECK(again.response["patch"] == a.response["patch"]);
  CHECK(again.response.value("warnings", json::array()) ==
        a.response.value("warnings", json::array()));
}

TEST_CASE("a DeepSpeed launcher's owners give its hostfile slots", "[owners][server]") {
  api_fixture f("deepspeed-owners.yaml");
  test::running_server server(f.options());
  const auto a = admit(server.tls_port(), review_of("deepspeed-launcher-pod.yaml", "u-ds"));
  INFO(a.response.dump());
  REQUIRE(a.response["allowed"] == true);
  CHECK_THAT(a.pod.dump(), Contains("slots=4"));
}

// Recognising fails open: with no API access the pod's Job cannot be read, so a Trainer pod
// (no ancestor label of its own) passes unchanged, with a warning, and is counted.
TEST_CASE("with no API access a Trainer pod passes unrecognised, with a warning",
          "[owners][server]") {
  test::running_server server;
  const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-none"));
  INFO(a.response.dump());
  CHECK(a.response["allowed"] == true);
  CHECK_FALSE(a.response.contains("patch"));
  REQUIRE(a.response.contains("warnings"));
  CHECK(server.state.metrics.value(trainenv::server::counter::pods_unrecognised) == 1);
  CHECK(server.state.metrics.owner_lookups("job", server::lookup_source::fetched,
                                           core::lookup_failure::no_access) == 1);
}

TEST_CASE("each lookup failure denies within the budget with a message naming the owner",
          "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  std::string jobset_path;
  for (const auto& p : f.paths) {
    if (p.find("/jobsets/") != std::string::npos) jobset_path = p;
  }
  REQUIRE_FALSE(jobset_path.empty());
  test::running_server server(f.options(500ms));
  struct row {
    test::misbehaviour m;
    const char* words;
  };
  const std::vector<row> rows = {
      {{0ms, test::fault::forbidden}, "forbidden"},
      {{0ms, test::fault::server_error}, "server error"},
      {{2000ms, test::fault::none}, "time"},
  };
  for (const auto& r : rows) {
    INFO(r.words);
    f.api.behave();
    f.api.misbehave(jobset_path, r.m);
    const auto started = std::chrono::steady_clock::now();
    const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-fail"));
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(took < 1500ms);
    CHECK(a.response["allowed"] == false);
    const auto message = a.response["status"]["message"].get<std::string>();
    CHECK_THAT(message, Contains("JobSet team-a/bert") && Contains(r.words));
  }
  // Not found: the object is gone.
  f.api.behave();
  f.api.remove_object(jobset_path);
  const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-404"));
  CHECK(a.response["allowed"] == false);
  CHECK_THAT(a.response["status"]["message"].get<std::string>(),
             Contains("JobSet team-a/bert") && Contains("not found"));
}

TEST_CASE("64 concurrent pods of one job cost at most 2 GETs per owner", "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  test::running_server server(f.options());
  std::atomic<int> sized{0};
  std::vector<json> reviews;
  for (int i = 0; i < 64; ++i)
    reviews.push_back(review_of("trainer-torch-pod.yaml", "u-burst-" + std::to_string(i)));
  std::vector<std::thread> clients;
  for (int i = 0; i < 64; ++i) {
    clients.emplace_back([&, i] {
      const auto a = try_admit(server.tls_port(), reviews[static_cast<std::size_t>(i)]);
      if (a && env_of(a->pod, "WORLD_SIZE") == "3") ++sized;
    });
  }
  for (auto& t : clients) t.join();
  CHECK(sized == 64);
  for (const auto& p : f.paths) {
    INFO(p);
    CHECK(f.api.gets(p) <= 2);
  }
}

TEST_CASE("a pod of a JobSet whose Job has no ancestor label passes unchanged, silently",
          "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  auto job = owner_of("trainer-torch-owners.yaml", "Job");
  job["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-ancestor-step");
  f.api.add_object(job);
  test::running_server server(f.options());
  const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-other"));
  INFO(a.response.dump());
  CHECK(a.response["allowed"] == true);
  CHECK_FALSE(a.response.contains("patch"));
  CHECK_FALSE(a.response.contains("warnings"));
  // Only the Job was read: nothing about the JobSet, the TrainJob or the runtime.
  CHECK(f.api.total_gets() == 1);
}

TEST_CASE("an owner recreated under the same name (another uid) is not the pod's owner",
          "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  auto jobset = owner_of("trainer-torch-owners.yaml", "JobSet");
  jobset["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000";
  f.api.add_object(jobset);
  test::running_server server(f.options());
  const auto a = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-uid"));
  INFO(a.response.dump());
  CHECK(a.response["allowed"] == false);
  CHECK_THAT(a.response["status"]["message"].get<std::string>(),
             Contains("JobSet team-a/bert") && Contains("uid"));
}

TEST_CASE("a pod whose labels and annotations give everything causes no GET", "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  test::running_server server(f.options());
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "torch";
  pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = "3";
  pod["metadata"]["annotations"]["trainenv.io/nproc-per-node"] = "2";
  const auto a = admit(server.tls_port(), test::pod_review(pod, "u-annotated"));
  INFO(a.response.dump());
  REQUIRE(a.response["allowed"] == true);
  CHECK(env_of(a.pod, "WORLD_SIZE") == "3");
  CHECK(f.api.total_gets() == 0);
}

TEST_CASE(
    "Volcano: a worker is ranked after the master, and an extra task gets no WORLD_SIZE or RANK",
    "[owners][server]") {
  api_fixture f("volcano-owners.yaml");
  test::running_server server(f.options());
  const auto worker = admit(server.tls_port(), review_of("volcano-worker-pod.yaml", "u-vc-w"));
  INFO(worker.response.dump());
  REQUIRE(worker.response["allowed"] == true);
  CHECK(env_of(worker.pod, "WORLD_SIZE") == "3");
  CHECK(env_of(worker.pod, "RANK") == "1");
  CHECK(env_of(worker.pod, "MASTER_ADDR") == "mnist-master-0.mnist");

  auto evaluator = pod_of("volcano-worker-pod.yaml");
  evaluator["metadata"]["name"] = "mnist-evaluator-0";
  evaluator["metadata"]["labels"]["volcano.sh/task-spec"] = "evaluator";
  evaluator["metadata"]["annotations"]["volcano.sh/task-spec"] = "evaluator";
  evaluator["metadata"]["annotations"]["volcano.sh/template-uid"] = "mnist-evaluator";
  evaluator["spec"]["hostname"] = "mnist-evaluator-0";
  const auto e = admit(server.tls_port(), test::pod_review(evaluator, "u-vc-e"));
  INFO(e.response.dump());
  REQUIRE(e.response["allowed"] == true);
  CHECK(env_of(e.pod, "WORLD_SIZE").empty());
  CHECK(env_of(e.pod, "RANK").empty());
  CHECK(env_of(e.pod, "MASTER_ADDR").empty());  // the policy's variables are for training roles
  CHECK(e.pod["metadata"]["annotations"]["trainenv.io/injected"] == "volcano-pytorch");
}

TEST_CASE("while one lookup waits on a slow API server, other requests are answered",
          "[owners][server]") {
  api_fixture f("trainer-torch-owners.yaml");
  std::string jobset_path;
  for (const auto& p : f.paths) {
    if (p.find("/jobsets/") != std::string::npos) jobset_path = p;
  }
  f.api.misbehave(jobset_path, {1500ms, test::fault::none});
  test::server_options options = f.options(3000ms);
  options.io_threads = 1;  // the slow lookup and the others share the one I/O thread
  test::running_server server(options);
  std::atomic<bool> slow_done{false};
  std::optional<admitted> slow_answer;
  const auto slow_review = review_of("trainer-torch-pod.yaml", "u-slow");
  std::thread slow([&] {
    slow_answer = try_admit(server.tls_port(), slow_review);
    slow_done = true;
  });
  std::this_thread::sleep_for(200ms);  // the slow pod's JobSet GET is under way
  auto annotated = pod_of("trainer-torch-pod.yaml");
  annotated["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  annotated["metadata"]["annotations"]["trainenv.io/num-nodes"] = "3";
  annotated["metadata"]["annotations"]["trainenv.io/nproc-per-node"] = "2";
  for (int i = 0; i < 5; ++i) {
    const auto started = std::chrono::steady_clock::now();
    const auto a =
        admit(server.tls_port(), test::pod_review(annotated, "u-fast-" + std::to_string(i)));
    CHECK(std::chrono::steady_clock::now() - started < 500ms);
    CHECK(a.response["allowed"] == true);
  }
  CHECK_FALSE(slow_done);
  slow.join();
  REQUIRE(slow_answer);
  CHECK(env_of(slow_answer->pod, "WORLD_SIZE") == "3");
}
