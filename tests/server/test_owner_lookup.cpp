// Owner lookups end to end: the real server over TLS reads pods' owners from the fake API
// server (examples/owners objects, a bearer token) through its owner cache (docs/contract.md
// §2.1).
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "fake_apiserver.hpp"
#include "server_harness.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace {

using namespace trainenv;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using nlohmann::json;

std::string example(const std::string& name) {
  return std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name;
}

json review_of(const std::string& pod_file, const std::string& uid) {
  auto pod = inputs::parse_document(test::read_file(example(pod_file)));
  REQUIRE(pod.ok());
  const std::string ns = (*pod)["metadata"].value("namespace", "default");
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "system:serviceaccount:kube-system:job-controller"}}},
            {"object", *pod}}}};
}

// The AdmissionReview response's `response`, and the pod with its patch applied.
struct admitted {
  json response;
  json pod;
};

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
  CHECK(server.state.metrics.owner_lookups("jobset", server::owner_lookup_label::ok) == 1);
  // A second pod of the job: every owner from the cache, no further GET.
  const auto gets = f.api.total_gets();
  const auto again = admit(server.tls_port(), review_of("trainer-torch-pod.yaml", "u-torch-2"));
  CHECK(env_of(again.pod, "WORLD_SIZE") == "3");
  CHECK(f.api.total_gets() == gets);
  CHECK(server.state.metrics.owner_lookups("jobset", server::owner_lookup_label::hit) == 1);
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
  CHECK(server.state.metrics.pods_unrecognised() == 1);
  CHECK(server.state.metrics.owner_lookups("job", server::owner_lookup_label::no_access) == 1);
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
  std::vector<std::thread> clients;
  for (int i = 0; i < 64; ++i) {
    clients.emplace_back([&, i] {
      const auto a = admit(server.tls_port(),
                           review_of("trainer-torch-pod.yaml", "u-burst-" + std::to_string(i)));
      if (env_of(a.pod, "WORLD_SIZE") == "3") ++sized;
    });
  }
  for (auto& t : clients) t.join();
  CHECK(sized == 64);
  for (const auto& p : f.paths) {
    INFO(p);
    CHECK(f.api.gets(p) <= 2);
  }
}
