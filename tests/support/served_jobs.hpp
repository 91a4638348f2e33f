// Jobs served whole (docs/contract.md §2.2): laid out as their controllers create them
// (core/controllers), every object in the fake API server, every pod sent to the real server's
// /mutate over TLS, and the admitted pods checked as a whole with preview --job's checks.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "fake_apiserver.hpp"
#include "server_harness.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::test {

using nlohmann::json;

inline json document(const std::string& path) {
  auto doc = inputs::parse_document(read_file(std::string(TRAINENV_SOURCE_DIR) + "/" + path));
  REQUIRE(doc.ok());
  return std::move(*doc);
}

inline std::vector<json> runtimes() {
  auto docs = inputs::parse_documents(
      read_file(std::string(TRAINENV_SOURCE_DIR) + "/examples/jobs/runtimes.yaml"));
  REQUIRE(docs.ok());
  return std::move(*docs);
}

// One /mutate: the response and the pod with its patch applied.
inline std::pair<json, json> admit(unsigned short port, const json& pod,
                                   const std::string& uid = "u") {
  tls_client client(port);
  REQUIRE_FALSE(client.handshake());
  const auto res =
      client.send(make_request(http::verb::post, "/mutate", pod_review(pod, uid).dump()));
  REQUIRE(res.result_int() == 200);
  const auto response = json::parse(res.body()).at("response");
  json admitted = pod;
  if (response.contains("patch")) {
    const auto patch = core::base64_decode(response["patch"].get<std::string>());
    REQUIRE(patch);
    admitted = pod.patch(json::parse(*patch));
  }
  return {response, admitted};
}

// The value of env var `name` in container `container` (the first when empty).
inline std::string env_of(const json& pod, const std::string& name,
                          const std::string& container = {}) {
  for (const auto& c : pod["spec"]["containers"]) {
    if (!container.empty() && c.value("name", "") != container) continue;
    for (const auto& e : c.value("env", json::array())) {
      if (e.value("name", "") == name && e.contains("value")) return e["value"];
    }
    break;
  }
  return "<absent>";
}

// A job laid out and served: its objects in the fake API server, every pod through /mutate.
struct served_job {
  core::created_job job;
  std::vector<core::previewed_pod> pods;
  std::vector<core::job_problem> problems;
  std::size_t gets = 0;                 // the GETs its pods cost
  std::uint64_t unknown_framework = 0;  // pods counted as passed for their runtime's framework

  [[nodiscard]] const core::previewed_pod& pod(const std::string& name) const {
    for (const auto& p : pods) {
      if (p.created.name == name) return p;
    }
    FAIL("no pod " << name);
    return pods.front();
  }
  [[nodiscard]] std::string problem_text() const {
    std::string out;
    for (const auto& p : problems) out += p.message + "\n";
    return out;
  }
};

// `first_pods`: only that many pods, in layout order (0: all). `edit` changes each created pod
// before it is sent, as another webhook before trainenv would.
template <class Edit>
served_job serve(const json& applied, const std::vector<json>& given, std::size_t first_pods,
                 Edit edit, const core::controller_model& model = {}) {
  fake_apiserver api;
  auto created = core::create_job(applied, given, core::cli_preview_bounds, model);
  INFO((created ? std::string() : created.message()));
  REQUIRE(created.ok());
  for (const auto& object : created->objects) api.add_object(object);
  for (const auto& object : given) api.add_object(object);
  server_options options;
  options.api = api.credentials();
  running_server server(options);
  served_job out;
  out.job = *created;
  const auto count = first_pods == 0 ? created->pods.size() : first_pods;
  for (std::size_t i = 0; i < count && i < created->pods.size(); ++i) {
    auto c = created->pods[i];
    edit(c.pod);
    auto [response, admitted] = admit(server.tls_port(), c.pod, "u-" + std::to_string(i));
    core::previewed_pod p;
    p.created = c;
    p.d.allowed = response.value("allowed", false);
    p.d.message = response.contains("status") ? response["status"].value("message", "") : "";
    p.d.code = response.contains("status") ? response["status"].value("code", 0) : 0;
    if (response.contains("auditAnnotations"))
      p.d.policy = response["auditAnnotations"].value("policy", "");
    for (const auto& w : response.value("warnings", json::array())) p.d.warnings.push_back(w);
    p.admitted = std::move(admitted);
    const auto& spec = p.admitted["spec"];
    if (spec.contains("hostname") && spec.contains("subdomain"))
      p.dns_name = spec["hostname"].get<std::string>() + "." + spec["subdomain"].get<std::string>();
    out.pods.push_back(std::move(p));
  }
  out.problems = core::check_job(out.job, out.pods, *server.state.policies.read());
  out.gets = api.total_gets();
  out.unknown_framework =
      server.state.metrics.value(trainenv::server::counter::pods_unknown_framework);
  return out;
}

inline served_job serve(const json& applied, const std::vector<json>& given = {},
                        std::size_t first_pods = 0) {
  return serve(applied, given, first_pods, [](json&) {});
}

inline json jobset(const std::string& name, const json& replicated_jobs,
                   const json& network = nullptr) {
  json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
             {"kind", "JobSet"},
             {"metadata", {{"name", name}, {"namespace", "team-a"}}},
             {"spec", {{"replicatedJobs", replicated_jobs}}}};
  if (!network.is_null()) js["spec"]["network"] = network;
  return js;
}

// A replicatedJob of `replicas` Jobs of `pods` pods, its pods labelled as trainers.
inline json replicated(const std::string& name, int replicas, int pods,
                       json annotations = json::object(), json resources = json::object()) {
  json container = {{"name", "node"}, {"image", "example.com/train:1"}, {"command", {"torchrun"}}};
  if (!resources.empty()) container["resources"] = resources;
  return {{"name", name},
          {"replicas", replicas},
          {"template",
           {{"spec",
             {{"parallelism", pods},
              {"completions", pods},
              {"template",
               {{"metadata",
                 {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}},
                  {"annotations", annotations}}},
                {"spec", {{"containers", {container}}}}}}}}}}};
}

}  // namespace trainenv::test
