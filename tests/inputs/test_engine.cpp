// The engine over the shipped policies: docs/contract.md §1 (which requests), §3 (torch and
// platform rows), §4 (patch rules) and the §6 rows the core decides. Every patch is applied with
// nlohmann's json::patch, an applier this project did not write, and fed back in for idempotence.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "../test_support.hpp"
#include "owner_files.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

json pod_of(const std::string& fixture_name) {
  return test::fixture(fixture_name)["request"]["object"];
}

json example(const std::string& name) {
  auto doc = inputs::parse_document(
      test::read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/" + name));
  REQUIRE(doc.ok());
  return *doc;
}

// Applies the decision's patch with the independent applier and checks idempotence.
json apply_checked(const json& pod, const core::decision& d) {
  REQUIRE(d.allowed);
  const json mutated = pod.patch(d.patch());
  const auto again = core::mutate_pod(mutated, test::shipped_policies());
  CHECK(again.allowed);
  CHECK(again.patch().empty());
  CHECK(again.warnings.empty());
  return mutated;
}

std::map<std::string, json> env_of(const json& pod, std::size_t container = 0) {
  std::map<std::string, json> out;
  for (const auto& e : pod["spec"]["containers"][container].value("env", json::array()))
    out[e["name"]] = e;
  return out;
}

std::string value_of(const std::map<std::string, json>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return "<absent>";
  return it->second.contains("value") ? it->second["value"].get<std::string>() : "<valueFrom>";
}

const std::string completion_index_path =
    "metadata.annotations['batch.kubernetes.io/job-completion-index']";

json torch_node(int index, int nodes) {
  json pod = pod_of("review-torch-jobset-node3.json");
  pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
      std::to_string(index);
  pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = std::to_string(index);
  pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = std::to_string(nodes);
  pod["spec"]["hostname"] = "llama-ft-node-0-" + std::to_string(index);  // as the Job controller
  return pod;
}

}  // namespace

TEST_CASE("torch: node 3 of a 4-node JobSet gets the torchrun variables", "[engine][torch]") {
  const json pod = pod_of("review-torch-jobset-node3.json");
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  CHECK(d.policy == "torch");
  CHECK(d.warnings.empty());
  const json mutated = apply_checked(pod, d);
  const auto env = env_of(mutated);
  CHECK(value_of(env, "PET_NNODES") == "4");
  CHECK(value_of(env, "PET_NPROC_PER_NODE") == "auto");  // the container asks for GPUs
  CHECK(value_of(env, "PET_NODE_RANK") == "3");  // a literal: the node rank (contract §2.2)
  CHECK(value_of(env, "PET_MASTER_ADDR") == "llama-ft-node-0-0.llama-ft");
  CHECK(value_of(env, "PET_MASTER_PORT") == "29500");
  CHECK(value_of(env, "MASTER_ADDR") == "llama-ft-node-0-0.llama-ft");
  CHECK(value_of(env, "MASTER_PORT") == "29500");
  CHECK(value_of(env, "WORLD_SIZE") == "4");
  CHECK(value_of(env, "RANK") == "3");
  CHECK(value_of(env, "JOB_COMPLETION_INDEX") == "<valueFrom>");  // the user's own stays
  const auto& ports = mutated["spec"]["containers"][0]["ports"];
  REQUIRE(ports.size() == 1);
  CHECK(ports[0]["containerPort"].is_number_integer());
  CHECK(ports[0]["containerPort"] == 29500);
  CHECK(mutated["metadata"]["annotations"]["trainenv.io/injected"] == "torch");
}

TEST_CASE("torch: node 0 of the same JobSet is rank 0 and the rendezvous host", "[engine][torch]") {
  const json pod = torch_node(0, 4);
  const auto env = env_of(apply_checked(pod, core::mutate_pod(pod, test::shipped_policies())));
  CHECK(value_of(env, "RANK") == "0");
  CHECK(value_of(env, "WORLD_SIZE") == "4");
  CHECK(value_of(env, "PET_MASTER_ADDR") == "llama-ft-node-0-0.llama-ft");
}

TEST_CASE("torch: processes per node come from the CPU request without GPUs", "[engine][torch]") {
  json pod = torch_node(1, 2);
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "2500m"}}}};
  CHECK(value_of(env_of(apply_checked(pod, core::mutate_pod(pod, test::shipped_policies()))),
                 "PET_NPROC_PER_NODE") == "3");
}

TEST_CASE("patch ops: escaped pointers, appends to existing lists, whole values for missing ones",
          "[engine][patch]") {
  const json pod = pod_of("review-torch-jobset-node3.json");
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  std::vector<std::string> paths;
  for (const auto& op : d.patch()) {
    CHECK(op["op"] == "add");
    paths.push_back(op["path"]);
  }
  CHECK(std::count(paths.begin(), paths.end(), "/spec/containers/0/env/-") == 9);
  CHECK(std::count(paths.begin(), paths.end(), "/spec/containers/0/ports") == 1);  // created whole
  REQUIRE(paths.size() >= 2);
  CHECK(paths[paths.size() - 2] == "/metadata/annotations/trainenv.io~1injected");
  CHECK(paths.back() == "/metadata/annotations/trainenv.io~1status");
}

TEST_CASE("a container without env, and a pod without annotations, get them created whole",
          "[engine][patch]") {
  json pod = torch_node(0, 1);
  pod["spec"]["containers"][0].erase("env");
  // Without annotations the counts would come from the owners: make it a bare pod, which takes
  // the policy's defaults instead.
  pod["metadata"].erase("annotations");
  pod["metadata"].erase("ownerReferences");
  pod["metadata"]["labels"].erase("jobset.sigs.k8s.io/jobset-uid");
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  REQUIRE(d.allowed);
  CHECK(d.patch()[0]["path"] == "/spec/containers/0/env");
  CHECK(d.patch()[0]["value"].is_array());
  const auto patch = d.patch();
  REQUIRE(patch.size() >= 2);
  CHECK(patch[patch.size() - 2]["path"] == "/metadata/annotations");
  CHECK(patch[patch.size() - 2]["value"] == json{{"trainenv.io/injected", "torch"}});
  // Why it got its values, added into the annotations just made.
  CHECK(patch.back()["path"] == "/metadata/annotations/trainenv.io~1status");
  CHECK(json::parse(patch.back()["value"].get<std::string>())["policy"] == "torch");
  apply_checked(pod, d);
}

TEST_CASE("env: null is treated as missing", "[engine][patch]") {
  json pod = torch_node(0, 1);
  pod["spec"]["containers"][0]["env"] = nullptr;
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  CHECK(d.patch()[0]["path"] == "/spec/containers/0/env");
  apply_checked(pod, d);
}

TEST_CASE("the target is the container named node, else the first", "[engine]") {
  json pod = torch_node(0, 1);
  json sidecar = {{"name", "proxy"}, {"image", "envoy"}};
  pod["spec"]["containers"].insert(pod["spec"]["containers"].begin(), sidecar);
  auto mutated = apply_checked(pod, core::mutate_pod(pod, test::shipped_policies()));
  CHECK(env_of(mutated, 0).empty());
  CHECK(value_of(env_of(mutated, 1), "RANK") == "0");

  pod["spec"]["containers"][1]["name"] = "trainer";
  mutated = apply_checked(pod, core::mutate_pod(pod, test::shipped_policies()));
  CHECK(value_of(env_of(mutated, 0), "RANK") == "0");
  CHECK(value_of(env_of(mutated, 1), "RANK") == "<absent>");
}

TEST_CASE("user-set values are kept, with a warning naming them", "[engine][user-set]") {
  json pod = torch_node(2, 4);
  pod["spec"]["containers"][0]["env"].push_back({{"name", "WORLD_SIZE"}, {"value", "8"}});
  pod["spec"]["containers"][0]["ports"] =
      json::array({{{"containerPort", 29500}, {"name", "c10d"}}});
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  REQUIRE(d.allowed);
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0] == "trainenv: kept user-set WORLD_SIZE=8 in container \"node\"");
  const json mutated = pod.patch(d.patch());
  const auto env = env_of(mutated);
  CHECK(value_of(env, "WORLD_SIZE") == "8");
  CHECK(value_of(env, "RANK") == "2");
  CHECK(mutated["spec"]["containers"][0]["ports"].size() ==
        1);  // the user's port already covers it
  for (const auto& op : d.patch()) CHECK(op["path"] != "/spec/containers/0/ports/-");
  // Reinvocation: nothing more to add, and the same warning again.
  const auto again = core::mutate_pod(mutated, test::shipped_policies());
  CHECK(again.patch().empty());
  CHECK(again.warnings == d.warnings);
}

TEST_CASE("a user-set value from valueFrom is kept too", "[engine][user-set]") {
  json pod = torch_node(0, 2);
  pod["spec"]["containers"][0]["env"].push_back(
      {{"name", "MASTER_ADDR"},
       {"valueFrom", {{"configMapKeyRef", {{"name", "cfg"}, {"key", "addr"}}}}}});
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0] == "trainenv: kept user-set MASTER_ADDR (valueFrom) in container \"node\"");
}

TEST_CASE("the apiserver's defaulting on reinvocation does not look like a user edit",
          "[engine][idempotence]") {
  json pod = torch_node(1, 2);
  json mutated = pod.patch(core::mutate_pod(pod, test::shipped_policies()).patch());
  // What the apiserver adds when it decodes the patched pod.
  for (auto& port : mutated["spec"]["containers"][0]["ports"]) port["protocol"] = "TCP";
  const auto again = core::mutate_pod(mutated, test::shipped_policies());
  CHECK(again.patch().empty());
  CHECK(again.warnings.empty());
}

TEST_CASE("f(f(x)) = f(x) for every fixture and example", "[engine][idempotence]") {
  std::vector<json> pods = {pod_of("review-torch-jobset-node3.json"), torch_node(0, 4),
                            example("torch-pod.yaml"), example("platform-pod.yaml")};
  for (const auto& name : {"review-volcano-worker1.json", "review-mpi-launcher.json"}) {
    pods.push_back(pod_of(name));
  }
  for (const auto& pod : pods) {
    const auto d = core::mutate_pod(pod, test::shipped_policies());
    if (!d.allowed) continue;  // policies issue 3 ships (volcano-pytorch, mpi) are not loaded yet
    apply_checked(pod, d);
  }
}

TEST_CASE("platform: MASTER_ADDR, MASTER_PORT, WORLD_SIZE = nodes, RANK from the index",
          "[engine][platform]") {
  const json pod = example("platform-pod.yaml");
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  CHECK(d.policy == "platform");
  const auto env = env_of(apply_checked(pod, d));
  CHECK(env.size() == 4);
  CHECK(value_of(env, "MASTER_ADDR") == "resnet-node-0-0.resnet");
  CHECK(value_of(env, "MASTER_PORT") == "29500");
  CHECK(value_of(env, "WORLD_SIZE") == "3");
  CHECK(value_of(env, "RANK") == "2");
}

TEST_CASE("roles that do not train get no WORLD_SIZE or RANK", "[engine][roles]") {
  json pod = torch_node(0, 1);
  pod["metadata"]["annotations"]["trainenv.io/role"] = "evaluator";
  pod["metadata"]["annotations"]["trainenv.io/replicas"] = "node=1,evaluator=1";
  const auto env = env_of(apply_checked(pod, core::mutate_pod(pod, test::shipped_policies())));
  CHECK(value_of(env, "WORLD_SIZE") == "<absent>");
  CHECK(value_of(env, "RANK") == "<absent>");
  CHECK(value_of(env, "PET_NNODES") == "1");
}

TEST_CASE("policy selection: annotation, then framework label, then the default",
          "[engine][selection]") {
  json pod = torch_node(0, 1);
  CHECK(core::mutate_pod(pod, test::shipped_policies()).policy == "torch");
  pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "pytorch";
  CHECK(core::mutate_pod(pod, test::shipped_policies()).policy == "torch");
  pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "platform";
  CHECK(core::mutate_pod(pod, test::shipped_policies()).policy == "platform");
  pod["metadata"]["annotations"]["trainenv.io/policy"] = "torch";
  CHECK(core::mutate_pod(pod, test::shipped_policies()).policy == "torch");
  CHECK(core::mutate_pod(pod, test::shipped_policies(), {"platform"}).policy == "platform");
}

TEST_CASE("pods that are not training pods pass unchanged", "[engine][pass]") {
  for (const char* step : {"dataset-initializer", "model-initializer", ""}) {
    json pod = torch_node(0, 1);
    pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = step;
    const auto d = core::mutate_pod(pod, test::shipped_policies());
    CHECK(d.allowed);
    CHECK(d.patch().empty());
    CHECK(d.policy.empty());
  }
  json unlabelled = torch_node(0, 1);
  unlabelled["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-ancestor-step");
  CHECK(core::mutate_pod(unlabelled, test::shipped_policies()).patch().empty());
}

TEST_CASE("annotation trainenv.io/inject=false opts out", "[engine][pass]") {
  json pod = torch_node(0, 1);
  pod["metadata"]["annotations"]["trainenv.io/inject"] = "false";
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  CHECK(d.allowed);
  CHECK(d.patch().empty());
  CHECK_THAT(d.message, Catch::Contains("trainenv.io/inject"));
}

TEST_CASE("only CREATE of pods is mutated", "[engine][pass]") {
  const auto text =
      test::read_file(std::string(TRAINENV_FIXTURES_DIR) + "/review-torch-jobset-node3.json");
  const auto decoded = [&] {
    auto request = core::decode_review(text);
    REQUIRE(request.ok());
    return std::move(*request);
  };
  CHECK(core::mutate(decoded(), test::shipped_policies()).mutated());
  auto update = decoded();
  update.operation = "UPDATE";
  CHECK_FALSE(core::mutate(update, test::shipped_policies()).mutated());
  auto other = decoded();
  other.resource = "deployments";
  other.group = "apps";
  CHECK_FALSE(core::mutate(other, test::shipped_policies()).mutated());
  auto sub = decoded();
  sub.sub_resource = "ephemeralcontainers";
  CHECK_FALSE(core::mutate(sub, test::shipped_policies()).mutated());
}

TEST_CASE("contract violations deny with status 400 and a message naming key, value and form",
          "[engine][violation]") {
  struct row {
    const char* what;
    std::function<void(json&)> edit;
    std::vector<std::string> mentions;
  };
  const std::vector<row> rows = {
      {"no job name",
       [](json& p) {
         // JobSet writes its name as an annotation too, which counts as well.
         p["metadata"]["labels"].erase("jobset.sigs.k8s.io/jobset-name");
         p["metadata"]["annotations"].erase("jobset.sigs.k8s.io/jobset-name");
         p["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-name");
         p["metadata"]["labels"].erase("batch.kubernetes.io/job-name");
         p["spec"].erase("subdomain");
       },
       {"job name", "jobset.sigs.k8s.io/jobset-name"}},
      {"num-nodes abc",
       [](json& p) { p["metadata"]["annotations"]["trainenv.io/num-nodes"] = "abc"; },
       {"trainenv.io/num-nodes", "\"abc\"", "whole number"}},
      {"unknown policy",
       [](json& p) { p["metadata"]["annotations"]["trainenv.io/policy"] = "paddle"; },
       {"trainenv.io/policy", "\"paddle\"", "torch"}},
      {"unknown framework",
       [](json& p) { p["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "caffe"; },
       {"trainer.kubeflow.org/framework", "\"caffe\"", "pytorch"}},
      {"missing index, 4 replicas",
       [](json& p) {
         p["metadata"]["annotations"].erase("batch.kubernetes.io/job-completion-index");
         p["metadata"]["labels"].erase("batch.kubernetes.io/job-completion-index");
       },
       {"index", "batch.kubernetes.io/job-completion-index"}},
      {"bad quantity",
       [](json& p) {
         p["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "eight"}}}};
       },
       {"resources.requests.cpu", "\"eight\""}},
      {"bad replicas",
       [](json& p) { p["metadata"]["annotations"]["trainenv.io/replicas"] = "node=four"; },
       {"trainenv.io/replicas", "\"node=four\""}},
      {"env not a list",
       [](json& p) { p["spec"]["containers"][0]["env"] = "WORLD_SIZE=1"; },
       {"spec.containers[0].env"}},
      {"env entry not an object",
       [](json& p) { p["spec"]["containers"][0]["env"] = json::array({1}); },
       {"spec.containers[0].env"}},
      {"containers not a list",
       [](json& p) { p["spec"]["containers"] = json::object(); },
       {"spec.containers"}},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    json pod = torch_node(1, 4);
    r.edit(pod);
    const auto d = core::mutate_pod(pod, test::shipped_policies());
    CHECK_FALSE(d.allowed);
    CHECK(d.patch().empty());
    CHECK_THAT(d.message, Catch::StartsWith("trainenv: "));
    for (const auto& m : r.mentions) CHECK_THAT(d.message, Catch::Contains(m));

    core::admission_request request;
    request.api_version = "admission.k8s.io/v1";
    request.uid = "u";
    const auto response = json::parse(core::encode_response(request, d));
    CHECK(response["response"]["allowed"] == false);
    CHECK(response["response"]["status"]["code"] == 400);
    CHECK(response["response"]["status"]["message"] == d.message);
  }
}

TEST_CASE("warnings are single printable lines of at most 120 characters", "[engine][user-set]") {
  json pod = torch_node(0, 1);
  pod["spec"]["containers"][0]["env"].push_back(
      {{"name", "MASTER_ADDR"}, {"value", std::string(300, 'x') + "\n"}});
  const auto d = core::mutate_pod(pod, test::shipped_policies());
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0].size() <= 120);
  for (char c : d.warnings[0]) CHECK((c >= 0x20 && c < 0x7f));
}

namespace {

// `pod` in a CREATE review for team-a, decoded from its text as the server decodes it.
core::admission_request decoded_create(const json& pod) {
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "u-1"},
                         {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                         {"operation", "CREATE"},
                         {"namespace", "team-a"},
                         {"object", pod}}}};
  auto request = core::decode_review(review.dump());
  REQUIRE(request.ok());
  return std::move(*request);
}

}  // namespace

// A pod read from a review's text (in the review's document, its namespace the request's) and the
// same pod held as values get the same decision.
TEST_CASE("a review decoded from text gets the same decision as its whole pod",
          "[engine][decode]") {
  std::vector<std::pair<std::string, json>> pods;
  for (const auto* name : {"review-torch-jobset-node3.json", "review-mpi-launcher.json",
                           "review-volcano-worker1.json"})
    pods.emplace_back(name, pod_of(name));
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TRAINENV_SOURCE_DIR) + "/examples"))
    // examples/owners/ holds pods whose counts come from their owners, previewed with them.
    if (entry.is_regular_file())
      pods.emplace_back(entry.path().filename().string(),
                        example(entry.path().filename().string()));
  REQUIRE(pods.size() >= 14);
  const auto owners = test::owner_file_at("tests/fixtures/owners/ds-job-jobset.yaml");
  for (const auto& [name, pod] : pods) {
    INFO("pod " << name);
    const auto request = decoded_create(pod);
    // The launcher's layout is its JobSet's: read from the file, as from the API.
    const auto from_text = test::decide_with(request.pod(), owners);
    const auto whole = test::decide_with(pod, owners);
    CHECK(from_text.allowed == whole.allowed);
    CHECK(from_text.policy == whole.policy);
    CHECK(from_text.patch() == whole.patch());
    CHECK(from_text.warnings == whole.warnings);
    CHECK(from_text.message == whole.message);
    CHECK(whole.mutated());
  }
}

TEST_CASE("a pod whose metadata or containers have the wrong shape gets the same answer decoded",
          "[engine][decode]") {
  json pod = pod_of("review-torch-jobset-node3.json");
  // A list where the metadata object belongs, holding what would select a policy: the decoder
  // must not read labels out of its items when the whole pod has none.
  json as_list = pod;
  as_list["metadata"] = json::array({pod["metadata"]});
  json containers_object = pod;
  containers_object["spec"]["containers"] = pod["spec"]["containers"][0];
  json container_not_object = pod;
  container_not_object["spec"]["containers"].push_back("sidecar");
  for (const auto& [what, shaped] :
       {std::pair{"metadata as a list", as_list},
        std::pair{"containers as an object", containers_object},
        std::pair{"a container that is a string", container_not_object}}) {
    INFO(what);
    const auto request = decoded_create(shaped);
    const auto from_text = core::mutate(request, test::shipped_policies());
    const auto whole = core::mutate_pod(shaped, test::shipped_policies());
    CHECK(from_text.allowed == whole.allowed);
    CHECK(from_text.patch() == whole.patch());
    CHECK(from_text.message == whole.message);
  }
}
