// Shared by the test_policy_*.cpp files: policy documents to parse, the parse helpers, and the
// pod variables their templates render against.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "trainenv/core/policy/policy.hpp"

namespace policy_test {

using nlohmann::json;
using namespace trainenv::core;

inline constexpr const char* source = "policies/test.yaml";

inline json minimal_doc(const std::string& name = "torch") {
  return {{"apiVersion", "trainenv.io/v1alpha1"},
          {"kind", "TrainingPolicy"},
          {"metadata", {{"name", name}}},
          {"spec", json::object()}};
}

// A document with every field the format knows.
inline json full_doc() {
  return json::parse(R"({
    "apiVersion": "trainenv.io/v1alpha1",
    "kind": "TrainingPolicy",
    "metadata": {"name": "torch", "labels": {"team": "ml"}, "annotations": {"note": "x"}},
    "spec": {
      "frameworks": ["torch", "pytorch"],
      "default": true,
      "container": "trainer",
      "trainingRoles": ["master", "worker"],
      "defaults": {"masterPort": 23456, "numNodes": 2, "nprocPerNode": "gpu"},
      "env": [
        {"name": "PET_NNODES", "value": "${numNodes}"},
        {"name": "PET_NODE_RANK",
         "valueFrom": {"fieldRef": {"fieldPath":
           "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "MASTER_ADDR", "value": "${job}-master-0.${job}"},
        {"name": "WORLD_SIZE", "value": "${worldSize}", "roles": ["training"]},
        {"name": "RANK", "value": "${rank}", "roles": ["master", "worker"]},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile",
         "roles": ["launcher"]}
      ],
      "ports": [
        {"containerPort": "${masterPort}", "name": "master", "protocol": "TCP",
         "roles": ["master"]},
        {"containerPort": 8080, "protocol": "UDP"}
      ]
    }
  })");
}

inline policy parse_ok(const json& doc) {
  auto p = parse_policy(doc, source);
  INFO("document: " << doc.dump());
  if (!p.ok()) FAIL("unexpected error: " << p.message());
  return std::move(p).value();
}

inline std::string parse_error(const json& doc) {
  auto p = parse_policy(doc, source);
  INFO("document: " << doc.dump());
  REQUIRE_FALSE(p.ok());
  return p.message();
}

inline json with_env(json env_item) {
  json doc = minimal_doc();
  doc["spec"]["env"] = json::array({std::move(env_item)});
  return doc;
}

inline json with_port(json port_item) {
  json doc = minimal_doc();
  doc["spec"]["ports"] = json::array({std::move(port_item)});
  return doc;
}

inline policy named(const std::string& name, const std::string& from,
                    std::vector<std::string> frameworks = {}, bool is_default = false) {
  policy p;
  p.name = name;
  p.source = from;
  p.frameworks = std::move(frameworks);
  p.is_default = is_default;
  return p;
}

inline variable_values values_for_render() {
  variable_values v;
  v.set(variable::job, "j");
  v.set(variable::master_port, std::int64_t{23456});
  v.set(variable::num_nodes, std::int64_t{2});
  return v;
}

inline json with_spec(const std::string& spec_json) {
  json doc = minimal_doc();
  doc["spec"] = json::parse(spec_json);
  return doc;
}

// The message starts with the file and the field, as check-policies prints it.
inline std::string at(const std::string& field) {
  return std::string(source) + ": " + field + ": ";
}

inline variable_values pod_values() {
  variable_values v;
  v.set(variable::job, "j");
  v.set(variable::namespace_name, "ns");
  v.set(variable::role, "node");
  v.set(variable::index, std::int64_t{1});
  v.set(variable::num_nodes, std::int64_t{3});
  v.set(variable::nproc_per_node, "4");
  v.set(variable::master_port, std::int64_t{29500});
  v.set(variable::world_size, std::int64_t{3});
  v.set(variable::rank, std::int64_t{1});
  v.set(variable::gpus_per_node, std::int64_t{4});
  v.set(variable::slots, std::int64_t{4});
  v.set(variable::processes_per_node, std::int64_t{4});
  v.set_replicas({{"master", 1}, {"worker", 2}});
  return v;
}

inline std::string render_ok(const template_string& t,
                             const variable_values& values = pod_values()) {
  auto r = t.render(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

inline json render_ok(const template_json& t, const variable_values& values = pod_values()) {
  auto r = t.render(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

inline bool evaluate_ok(const condition& c, const variable_values& values = pod_values()) {
  auto r = c.evaluate(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

inline policy replacing(const std::string& name, const std::string& target) {
  policy p = named(name, name + ".yaml");
  p.replaces = replacement{target, {"tune", "run"}};
  return p;
}

}  // namespace policy_test
