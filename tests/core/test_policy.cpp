// core/policy.hpp: policy documents, their validation messages (which name the file and the
// field), and the policy set's selection rules (docs/contract.md §1, §3, §5 check-policies).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "trainenv/core/policy.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;

namespace {

constexpr const char* source = "policies/test.yaml";

json minimal_doc(const std::string& name = "torch") {
  return {{"apiVersion", "trainenv.io/v1alpha1"},
          {"kind", "TrainingPolicy"},
          {"metadata", {{"name", name}}},
          {"spec", json::object()}};
}

// A document with every field the format knows.
json full_doc() {
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

policy parse_ok(const json& doc) {
  auto p = parse_policy(doc, source);
  INFO("document: " << doc.dump());
  if (!p.ok()) FAIL("unexpected error: " << p.message());
  return std::move(p).value();
}

std::string parse_error(const json& doc) {
  auto p = parse_policy(doc, source);
  INFO("document: " << doc.dump());
  REQUIRE_FALSE(p.ok());
  return p.message();
}

json with_env(json env_item) {
  json doc = minimal_doc();
  doc["spec"]["env"] = json::array({std::move(env_item)});
  return doc;
}

json with_port(json port_item) {
  json doc = minimal_doc();
  doc["spec"]["ports"] = json::array({std::move(port_item)});
  return doc;
}

policy named(const std::string& name, const std::string& from,
             std::vector<std::string> frameworks = {}, bool is_default = false) {
  policy p;
  p.name = name;
  p.source = from;
  p.frameworks = std::move(frameworks);
  p.is_default = is_default;
  return p;
}

variable_values values_for_render() {
  variable_values v;
  v.set(variable::job, "j");
  v.set(variable::master_port, "23456");
  v.set(variable::num_nodes, "2");
  return v;
}

}  // namespace

// --- valid documents ---

TEST_CASE("a policy with every field parses into its values", "[policy]") {
  const auto p = parse_ok(full_doc());
  CHECK(p.name == "torch");
  CHECK(p.source == source);
  CHECK(p.frameworks == std::vector<std::string>{"torch", "pytorch"});
  CHECK(p.is_default);
  CHECK(p.container == "trainer");
  CHECK(p.training_roles == std::vector<std::string>{"master", "worker"});
  CHECK(p.default_master_port == 23456);
  CHECK(p.default_num_nodes == 2);
  CHECK(p.default_nproc.kind == nproc_setting::mode::gpu);

  REQUIRE(p.env.size() == 6);
  CHECK(p.env[0].name == "PET_NNODES");
  REQUIRE(p.env[0].value.has_value());
  CHECK(p.env[0].value->source() == "${numNodes}");
  CHECK(p.env[0].scope.roles.all);
  CHECK_FALSE(p.env[1].value.has_value());
  CHECK(p.env[1].value_from.has_value());
  CHECK(p.env[3].scope.roles.training);
  CHECK_FALSE(p.env[3].scope.roles.all);
  CHECK(p.env[4].scope.roles.names == std::vector<std::string>{"master", "worker"});
  CHECK(p.env[5].scope.roles.names == std::vector<std::string>{"launcher"});

  REQUIRE(p.ports.size() == 2);
  CHECK(p.ports[0].container_port.uses(variable::master_port));
  CHECK(p.ports[0].name == "master");
  CHECK(p.ports[0].protocol == "TCP");
  CHECK(p.ports[0].scope.roles.names == std::vector<std::string>{"master"});
  CHECK(p.ports[1].container_port.is_literal());
  CHECK(p.ports[1].container_port.source() == "8080");
  CHECK(p.ports[1].protocol == "UDP");
  CHECK(p.ports[1].name.empty());
}

TEST_CASE("a minimal policy takes the documented defaults", "[policy]") {
  const auto p = parse_ok(minimal_doc("plain"));
  CHECK(p.name == "plain");
  CHECK(p.frameworks.empty());
  CHECK_FALSE(p.is_default);
  CHECK(p.container == "node");
  CHECK(p.training_roles == std::vector<std::string>{"master", "worker", "node"});
  CHECK(p.default_master_port == 29500);
  CHECK(p.default_num_nodes == 1);
  CHECK(p.default_nproc.kind == nproc_setting::mode::automatic);
  CHECK(p.env.empty());
  CHECK(p.ports.empty());
}

TEST_CASE("valueFrom fieldRef gets apiVersion v1 so reinvocation stays silent", "[policy]") {
  const auto p = parse_ok(full_doc());
  REQUIRE(p.env[1].value_from.has_value());
  auto rendered = p.env[1].value_from->render(values_for_render());
  REQUIRE(rendered.ok());
  CHECK(*rendered == json::parse(R"({"fieldRef": {"apiVersion": "v1", "fieldPath":
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"}})"));
}

TEST_CASE("a templated value renders against the pod variables", "[policy]") {
  const auto p = parse_ok(full_doc());
  auto rendered = p.env[2].value->render(values_for_render());
  REQUIRE(rendered.ok());
  CHECK(*rendered == "j-master-0.j");
}

TEST_CASE("an integer nprocPerNode default is a count", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"nprocPerNode", 4}};
  const auto p = parse_ok(doc);
  CHECK(p.default_nproc.kind == nproc_setting::mode::count);
  CHECK(p.default_nproc.count == 4);
}

TEST_CASE("WORLD_SIZE scoped to named training roles is accepted", "[policy]") {
  const auto p = parse_ok(with_env({{"name", "WORLD_SIZE"},
                                    {"value", "${worldSize}"},
                                    {"roles", {"master", "worker", "node"}}}));
  CHECK(p.env[0].scope.roles.names.size() == 3);
}

TEST_CASE("the same env name with disjoint roles is accepted", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["env"] = json::parse(R"([
    {"name": "MASTER_PORT", "value": "1", "roles": ["launcher"]},
    {"name": "MASTER_PORT", "value": "2", "roles": ["worker"]}
  ])");
  CHECK(parse_ok(doc).env.size() == 2);
}

// --- validation errors: each names the source file and the field ---

TEST_CASE("an unknown spec key is rejected with a did-you-mean suggestion", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["framework"] = json::array({"torch"});
  const auto message = parse_error(doc);
  CHECK(message ==
        std::string(source) + ": spec: unknown field \"framework\"; did you mean \"frameworks\"?");
}

TEST_CASE("an unknown env item key is rejected with a did-you-mean suggestion", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"}, {"valeu", "1"}}));
  CHECK(message ==
        std::string(source) + ": spec.env[0]: unknown field \"valeu\"; did you mean \"value\"?");
}

TEST_CASE("an unknown key far from any known one lists the known fields", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"completelyDifferent", 1}};
  const auto message = parse_error(doc);
  CHECK(message == std::string(source) +
                       ": spec.defaults: unknown field \"completelyDifferent\"; known fields here: "
                       "masterPort, numNodes, nprocPerNode, replicas");
}

TEST_CASE("an unknown top-level key is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["status"] = json::object();
  CHECK_THAT(parse_error(doc),
             StartsWith(std::string(source) + ": document: unknown field \"status\""));
}

TEST_CASE("a wrong apiVersion is rejected naming the expected one", "[policy]") {
  json doc = minimal_doc();
  doc["apiVersion"] = "trainenv.io/v1";
  const auto message = parse_error(doc);
  CHECK_THAT(message, StartsWith(std::string(source) + ": apiVersion: "));
  CHECK_THAT(message, Contains("trainenv.io/v1alpha1"));
  doc.erase("apiVersion");
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": apiVersion: "));
}

TEST_CASE("a wrong kind is rejected naming the expected one", "[policy]") {
  json doc = minimal_doc();
  doc["kind"] = "Policy";
  const auto message = parse_error(doc);
  CHECK_THAT(message, StartsWith(std::string(source) + ": kind: "));
  CHECK_THAT(message, Contains("TrainingPolicy"));
}

TEST_CASE("a document that is not a mapping is rejected", "[policy]") {
  CHECK_THAT(parse_error(json::array({1})), StartsWith(std::string(source) + ": document: "));
  CHECK_THAT(parse_error(json("text")), StartsWith(std::string(source) + ": document: "));
}

TEST_CASE("a policy without a name is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["metadata"].erase("name");
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": metadata.name: missing"));
  doc.erase("metadata");
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": metadata: "));
}

TEST_CASE("a policy name that is not a DNS label is rejected", "[policy]") {
  const auto message = parse_error(minimal_doc("Torch_2"));
  CHECK_THAT(message, StartsWith(std::string(source) + ": metadata.name: "));
  CHECK_THAT(message, Contains("Torch_2"));
}

TEST_CASE("a missing spec is rejected", "[policy]") {
  json doc = minimal_doc();
  doc.erase("spec");
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec: "));
}

TEST_CASE("a bad env name is rejected", "[policy]") {
  for (const char* bad : {"1ABC", "A=B", "A B", ""}) {
    INFO("env name \"" << bad << "\"");
    const auto message = parse_error(with_env({{"name", bad}, {"value", "1"}}));
    CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].name: "));
  }
}

TEST_CASE("an env item without a name is rejected", "[policy]") {
  CHECK_THAT(parse_error(with_env({{"value", "1"}})),
             StartsWith(std::string(source) + ": spec.env[0].name: missing"));
}

TEST_CASE("an env item with both value and valueFrom is rejected", "[policy]") {
  const auto message =
      parse_error(with_env({{"name", "A"},
                            {"value", "1"},
                            {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0]: "));
  CHECK_THAT(message, Contains("exactly one of value or valueFrom"));
}

TEST_CASE("an env item with neither value nor valueFrom is rejected", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0]: "));
  CHECK_THAT(message, Contains("exactly one of value or valueFrom"));
}

TEST_CASE("an env value that is not a string is rejected with a quoting hint", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"}, {"value", 4}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].value: "));
  CHECK_THAT(message, Contains("\"4\""));
}

TEST_CASE("an unknown variable in a value is rejected naming it", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"}, {"value", "${jobName}-x"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].value: "));
  CHECK_THAT(message, Contains("${jobName}"));
}

TEST_CASE("an unknown variable inside valueFrom is rejected naming it", "[policy]") {
  const auto message = parse_error(
      with_env({{"name", "A"},
                {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['${nope}']"}}}}}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].valueFrom: "));
  CHECK_THAT(message, Contains("${nope}"));
}

TEST_CASE("valueFrom with two sources is rejected", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"},
                                             {"valueFrom",
                                              {{"fieldRef", {{"fieldPath", "metadata.name"}}},
                                               {"secretKeyRef", {{"name", "s"}, {"key", "k"}}}}}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].valueFrom: "));
}

// Regression (fixed): only fieldRef is checked inside valueFrom; configMapKeyRef, secretKeyRef and
// resourceFieldRef are copied into the Pod as written, so a policy that check-policies accepts
// yields Pods the apiserver cannot decode or validate (docs/contract.md §4: the patched Pod must be
// a valid v1.Pod). Inputs: valueFrom: {secretKeyRef: "token"}, valueFrom: {configMapKeyRef: {}}.
TEST_CASE("valueFrom key references must be mappings with name and key", "[policy]") {
  for (const json& ref : {json("token"), json::object(), json{{"name", "cm"}}}) {
    INFO("configMapKeyRef " << ref.dump());
    auto p =
        parse_policy(with_env({{"name", "A"}, {"valueFrom", {{"configMapKeyRef", ref}}}}), source);
    CHECK_FALSE(p.ok());
  }
  auto p =
      parse_policy(with_env({{"name", "A"}, {"valueFrom", {{"secretKeyRef", "token"}}}}), source);
  CHECK_FALSE(p.ok());
}

TEST_CASE("valueFrom fieldRef without fieldPath is rejected", "[policy]") {
  const auto message =
      parse_error(with_env({{"name", "A"}, {"valueFrom", {{"fieldRef", json::object()}}}}));
  CHECK_THAT(message,
             StartsWith(std::string(source) + ": spec.env[0].valueFrom.fieldRef.fieldPath"));
}

TEST_CASE("WORLD_SIZE using worldSize without roles training is rejected", "[policy]") {
  const auto message = parse_error(with_env({{"name", "WORLD_SIZE"}, {"value", "${worldSize}"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0]: "));
  CHECK_THAT(message, Contains("roles: [training]"));
}

TEST_CASE("RANK using rank for a non-training role is rejected", "[policy]") {
  const auto message = parse_error(
      with_env({{"name", "RANK"}, {"value", "${rank}"}, {"roles", {"worker", "launcher"}}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0]: "));
  CHECK_THAT(message, Contains("${rank}"));
}

TEST_CASE("a port whose number uses rank must be scoped to training roles", "[policy]") {
  const auto message = parse_error(with_port({{"containerPort", "${rank}"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0]: "));
}

TEST_CASE("an empty roles list is rejected", "[policy]") {
  const auto message =
      parse_error(with_env({{"name", "A"}, {"value", "1"}, {"roles", json::array()}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].roles: "));
  CHECK_THAT(message, Contains("names no role"));
}

TEST_CASE("an empty roles list on a port is rejected", "[policy]") {
  const auto message = parse_error(with_port({{"containerPort", 8080}, {"roles", json::array()}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0].roles: "));
}

TEST_CASE("a role listed twice is rejected", "[policy]") {
  const auto message =
      parse_error(with_env({{"name", "A"}, {"value", "1"}, {"roles", {"worker", "worker"}}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].roles[1]: "));
}

TEST_CASE("the same env name for overlapping roles is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["env"] = json::parse(R"([
    {"name": "A", "value": "1"},
    {"name": "A", "value": "2", "roles": ["worker"]}
  ])");
  const auto message = parse_error(doc);
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[1].name: "));
}

TEST_CASE("a container port out of range is rejected", "[policy]") {
  for (const json& port : {json(0), json(65536), json(70000), json(-1)}) {
    INFO("containerPort " << port.dump());
    const auto message = parse_error(with_port({{"containerPort", port}}));
    CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0].containerPort: "));
  }
}

TEST_CASE("a literal container port string out of range is rejected", "[policy]") {
  for (const char* port : {"0", "65536", "http", ""}) {
    INFO("containerPort \"" << port << "\"");
    const auto message = parse_error(with_port({{"containerPort", port}}));
    CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0].containerPort: "));
  }
}

TEST_CASE("a port without containerPort is rejected", "[policy]") {
  CHECK_THAT(parse_error(with_port({{"name", "x"}})),
             StartsWith(std::string(source) + ": spec.ports[0].containerPort: missing"));
}

TEST_CASE("a port boundary value 65535 is accepted", "[policy]") {
  CHECK(parse_ok(with_port({{"containerPort", 65535}})).ports.size() == 1);
  CHECK(parse_ok(with_port({{"containerPort", "1"}})).ports.size() == 1);
}

TEST_CASE("a bad port protocol is rejected", "[policy]") {
  for (const char* protocol : {"HTTP", "tcp", ""}) {
    INFO("protocol " << protocol);
    const auto message = parse_error(with_port({{"containerPort", 80}, {"protocol", protocol}}));
    CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0].protocol: "));
    CHECK_THAT(message, Contains("TCP, UDP or SCTP"));
  }
}

TEST_CASE("a bad port name is rejected", "[policy]") {
  const auto message =
      parse_error(with_port({{"containerPort", 80}, {"name", "this-name-is-too-long"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.ports[0].name: "));
}

// Regression (fixed): is_port_name accepts names Kubernetes rejects (IANA_SVC_NAME needs at least
// one letter and no "--"), so check-policies passes a policy whose every patched Pod the apiserver
// then refuses ("must contain at least one letter (a-z)"). Inputs: name "8080", name "a--b".
TEST_CASE("a port name Kubernetes would reject is rejected", "[policy]") {
  for (const char* bad : {"8080", "a--b"}) {
    INFO("port name " << bad);
    auto p = parse_policy(with_port({{"containerPort", 80}, {"name", bad}}), source);
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.message(), StartsWith(std::string(source) + ": spec.ports[0].name: "));
  }
}

TEST_CASE("defaults masterPort out of range is rejected", "[policy]") {
  for (const json& port : {json(0), json(65536), json("29500"), json(1.5)}) {
    INFO("masterPort " << port.dump());
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"masterPort", port}};
    CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.defaults.masterPort: "));
  }
}

TEST_CASE("defaults numNodes below one is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"numNodes", 0}};
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.defaults.numNodes: "));
}

TEST_CASE("an invalid defaults nprocPerNode is rejected", "[policy]") {
  for (const json& nproc : {json("0"), json(0), json("many"), json(-2), json("Auto"), json(true)}) {
    INFO("nprocPerNode " << nproc.dump());
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"nprocPerNode", nproc}};
    CHECK_THAT(parse_error(doc),
               StartsWith(std::string(source) + ": spec.defaults.nprocPerNode: "));
  }
}

TEST_CASE("an empty trainingRoles list is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["trainingRoles"] = json::array();
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.trainingRoles: "));
}

TEST_CASE("a framework value that is not a DNS label is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["frameworks"] = {"torch", "Py Torch"};
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.frameworks[1]: "));
}

TEST_CASE("a default flag that is not a boolean is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["default"] = "true";
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.default: "));
}

TEST_CASE("env that is not a list is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["env"] = {{"name", "A"}};
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": spec.env: "));
}

// --- policy_set ---

TEST_CASE("policy_set finds policies by name, by framework and the default", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {"torch", "pytorch"}, true));
  list.push_back(named("mpi", "b.yaml", {"mpi", "deepspeed", "mlx"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  REQUIRE(set->by_name("torch") != nullptr);
  CHECK(set->by_name("torch")->source == "a.yaml");
  REQUIRE(set->by_name("mpi") != nullptr);
  CHECK(set->by_name("mpi")->name == "mpi");
  CHECK(set->by_name("jax") == nullptr);
  CHECK(set->by_name("") == nullptr);

  REQUIRE(set->by_framework("pytorch") != nullptr);
  CHECK(set->by_framework("pytorch")->name == "torch");
  REQUIRE(set->by_framework("deepspeed") != nullptr);
  CHECK(set->by_framework("deepspeed")->name == "mpi");
  CHECK(set->by_framework("xgboost") == nullptr);
  CHECK(set->by_framework("Torch") == nullptr);

  REQUIRE(set->default_policy() != nullptr);
  CHECK(set->default_policy()->name == "torch");
  CHECK(set->all().size() == 2);
}

TEST_CASE("policy_set without a default policy has none", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("mpi", "b.yaml", {"mpi"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  CHECK(set->default_policy() == nullptr);
}

TEST_CASE("policy_set rejects two policies with the same name naming both files", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml"));
  list.push_back(named("torch", "b.yaml"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: metadata.name: "));
  CHECK_THAT(set.message(), Contains("a.yaml"));
  CHECK_THAT(set.message(), Contains("\"torch\""));
}

TEST_CASE("policy_set rejects a framework value claimed by two policies", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {"torch", "deepspeed"}));
  list.push_back(named("mpi", "b.yaml", {"mpi", "deepspeed"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: spec.frameworks: "));
  CHECK_THAT(set.message(), Contains("\"deepspeed\""));
  CHECK_THAT(set.message(), Contains("\"torch\"") && Contains("a.yaml"));
}

TEST_CASE("policy_set rejects two default policies", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {}, true));
  list.push_back(named("platform", "b.yaml", {}, true));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: spec.default: "));
  CHECK_THAT(set.message(), Contains("\"torch\"") && Contains("a.yaml"));
}

TEST_CASE("policy_set of parsed documents keeps each policy's source", "[policy]") {
  std::vector<policy> list;
  auto torch = parse_policy(full_doc(), "torch.yaml");
  json other = minimal_doc("platform");
  other["spec"]["frameworks"] = {"platform"};
  auto platform = parse_policy(other, "platform.yaml");
  REQUIRE(torch.ok());
  REQUIRE(platform.ok());
  list.push_back(std::move(torch).value());
  list.push_back(std::move(platform).value());
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  REQUIRE(set->by_framework("platform") != nullptr);
  CHECK(set->by_framework("platform")->source == "platform.yaml");
  CHECK(set->default_policy() == set->by_name("torch"));
}

TEST_CASE("an empty policy_set finds nothing", "[policy]") {
  auto set = policy_set::build({});
  REQUIRE(set.ok());
  CHECK(set->by_name("torch") == nullptr);
  CHECK(set->by_framework("torch") == nullptr);
  CHECK(set->default_policy() == nullptr);
}

// --- shared validators ---

TEST_CASE("nproc_setting parses counts and the three keywords", "[policy]") {
  auto four = nproc_setting::parse("4");
  REQUIRE(four.has_value());
  CHECK(four->kind == nproc_setting::mode::count);
  CHECK(four->count == 4);
  CHECK(nproc_setting::parse("1")->count == 1);
  CHECK(nproc_setting::parse("auto")->kind == nproc_setting::mode::automatic);
  CHECK(nproc_setting::parse("cpu")->kind == nproc_setting::mode::cpu);
  CHECK(nproc_setting::parse("gpu")->kind == nproc_setting::mode::gpu);
}

TEST_CASE("nproc_setting rejects zero, negatives and other words", "[policy]") {
  for (const char* bad :
       {"0", "-1", "", "Auto", "GPU", "1.5", " 4", "4 ", "four", "1e3", "99999999999999999999"}) {
    INFO("nproc \"" << bad << "\"");
    CHECK_FALSE(nproc_setting::parse(bad).has_value());
  }
}

TEST_CASE("role_scope without roles matches every role", "[policy]") {
  const role_scope scope;
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("worker", true));
}

TEST_CASE("role_scope training matches only training roles", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.training = true;
  CHECK(scope.matches("worker", true));
  CHECK(scope.matches("anything", true));
  CHECK_FALSE(scope.matches("launcher", false));
  CHECK_FALSE(scope.matches("worker", false));
}

TEST_CASE("role_scope names match exactly the listed roles", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.names = {"launcher", "evaluator"};
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("evaluator", true));
  CHECK_FALSE(scope.matches("worker", true));
  CHECK_FALSE(scope.matches("Launcher", false));
}

TEST_CASE("role_scope training plus names matches either", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.training = true;
  scope.names = {"launcher"};
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("master", true));
  CHECK_FALSE(scope.matches("evaluator", false));
}

TEST_CASE("policy knows its training roles", "[policy]") {
  const auto p = parse_ok(full_doc());
  CHECK(p.is_training_role("master"));
  CHECK(p.is_training_role("worker"));
  CHECK_FALSE(p.is_training_role("node"));
  CHECK_FALSE(p.is_training_role("launcher"));
}

TEST_CASE("is_dns_label accepts lower-case names up to 63 characters", "[policy]") {
  const std::vector<std::string> names = {"a", "torch", "intel-mpi",         "a1",
                                          "0", "x-y-z", std::string(63, 'a')};
  for (const auto& good : names) {
    INFO("name \"" << good << "\"");
    CHECK(is_dns_label(good));
  }
}

TEST_CASE("is_dns_label rejects empty, long, upper-case, dotted and dash-edged names", "[policy]") {
  const std::vector<std::string> names = {
      "", std::string(64, 'a'), "Torch", "a.b", "a_b", "-a", "a-", "a b", "é"};
  for (const auto& bad : names) {
    INFO("name \"" << bad << "\"");
    CHECK_FALSE(is_dns_label(bad));
  }
}

TEST_CASE("parse_decimal reads unsigned decimal integers up to the maximum", "[policy]") {
  CHECK(parse_decimal("0", 10) == 0);
  CHECK(parse_decimal("10", 10) == 10);
  CHECK(parse_decimal("65535", 65535) == 65535);
  CHECK(parse_decimal("999999999999999999", INT64_MAX) == 999'999'999'999'999'999);
}

TEST_CASE("parse_decimal rejects signs, spaces, empty, over-maximum and overlong text",
          "[policy]") {
  for (const char* bad :
       {"", "-1", "+1", " 1", "1 ", "1.0", "0x1", "abc", "11", "1000000000000000000"}) {
    INFO("text \"" << bad << "\"");
    CHECK_FALSE(parse_decimal(bad, 10).has_value());
  }
  CHECK_FALSE(parse_decimal("1000000000000000000", INT64_MAX).has_value());
  CHECK_FALSE(parse_decimal("65536", 65535).has_value());
}

// --- the policy language's newer fields: when, replaces, extraContainers, defaults.replicas,
// args, volumes, volumeMounts, annotations ---

namespace {

json with_spec(const std::string& spec_json) {
  json doc = minimal_doc();
  doc["spec"] = json::parse(spec_json);
  return doc;
}

// The message starts with the file and the field, as check-policies prints it.
std::string at(const std::string& field) {
  return std::string(source) + ": " + field + ": ";
}

variable_values pod_values() {
  variable_values v;
  v.set(variable::job, "j");
  v.set(variable::namespace_name, "ns");
  v.set(variable::role, "node");
  v.set(variable::index, "1");
  v.set(variable::num_nodes, "3");
  v.set(variable::nproc_per_node, "4");
  v.set(variable::master_port, "29500");
  v.set(variable::world_size, "3");
  v.set(variable::rank, "1");
  v.set(variable::gpus_per_node, "4");
  v.set(variable::slots, "4");
  v.set(variable::processes_per_node, "4");
  v.set_replicas({{"master", 1}, {"worker", 2}});
  return v;
}

std::string render_ok(const template_string& t, const variable_values& values = pod_values()) {
  auto r = t.render(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

json render_ok(const template_json& t, const variable_values& values = pod_values()) {
  auto r = t.render(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

bool evaluate_ok(const condition& c, const variable_values& values = pod_values()) {
  auto r = c.evaluate(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

policy replacing(const std::string& name, const std::string& target) {
  policy p = named(name, name + ".yaml");
  p.replaces = replacement{target, {"tune", "run"}};
  return p;
}

}  // namespace

// when

TEST_CASE("a policy-level when is compiled and keeps its source", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"when": "replicas(master) > 0"})"));
  REQUIRE(p.when.has_value());
  CHECK(p.when_source == "replicas(master) > 0");
  CHECK(evaluate_ok(*p.when));
  variable_values none;
  CHECK_FALSE(evaluate_ok(*p.when, none));
}

TEST_CASE("a policy without when has none", "[policy][when]") {
  const auto p = parse_ok(minimal_doc());
  CHECK_FALSE(p.when.has_value());
  CHECK(p.when_source.empty());
}

TEST_CASE("a policy-level when that is not a comparison is rejected", "[policy][when]") {
  const auto message = parse_error(with_spec(R"({"when": "numNodes"})"));
  CHECK_THAT(message, StartsWith(at("spec.when")));
  CHECK_THAT(message, Contains("not a comparison"));
}

TEST_CASE("a policy-level when that is not a string is rejected", "[policy][when]") {
  CHECK_THAT(parse_error(with_spec(R"({"when": true})")), StartsWith(at("spec.when")));
}

TEST_CASE("a policy-level when may not use rank, worldSize or i", "[policy][when]") {
  for (const char* when : {"rank > 0", "worldSize > 1", "i == 0", "numNodes + rank > 0"}) {
    INFO("when: " << when);
    json doc = minimal_doc();
    doc["spec"]["when"] = when;
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.when")));
    CHECK_THAT(message, Contains("may not use"));
  }
}

TEST_CASE("a policy-level when may use index and the node counts", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"when": "numNodes * processesPerNode > index"})"));
  REQUIRE(p.when.has_value());
  CHECK(evaluate_ok(*p.when));
}

TEST_CASE("an item's when is compiled into its scope", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"env": [
    {"name": "A", "value": "1", "when": "numNodes > 1"},
    {"name": "B", "value": "2"}]})"));
  REQUIRE(p.env[0].scope.when.has_value());
  CHECK(evaluate_ok(*p.env[0].scope.when));
  CHECK(p.env[0].scope.roles.all);
  CHECK_FALSE(p.env[1].scope.when.has_value());
}

TEST_CASE("a bad when on any kind of item is rejected at that item's when", "[policy][when]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"env": [{"name": "A", "value": "1", "when": "numNodes"}]})", "spec.env[0].when"},
      {R"({"ports": [{"containerPort": 80, "when": "job > 1"}]})", "spec.ports[0].when"},
      {R"({"args": {"items": [{"value": "x", "when": "nodes > 1"}]}})", "spec.args.items[0].when"},
      {R"({"volumes": [{"name": "v", "emptyDir": {}, "when": "1 <"}]})", "spec.volumes[0].when"},
      {R"({"volumeMounts": [{"name": "v", "mountPath": "/v", "when": 1}]})",
       "spec.volumeMounts[0].when"},
      {R"({"annotations": [{"name": "a", "value": "x", "when": "a == b"}]})",
       "spec.annotations[0].when"}};
  for (const auto& [spec, field] : cases) {
    INFO("spec: " << spec);
    CHECK_THAT(parse_error(with_spec(spec)), StartsWith(at(field)));
  }
}

TEST_CASE("an item whose when uses rank must be scoped to training roles", "[policy][when]") {
  const auto message =
      parse_error(with_spec(R"({"env": [{"name": "A", "value": "1", "when": "rank == 0"}]})"));
  CHECK_THAT(message, StartsWith(at("spec.env[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  CHECK(parse_ok(with_spec(R"({"env": [{"name": "A", "value": "1", "when": "rank == 0",
                                         "roles": ["training"]}]})"))
            .env.size() == 1);
}

TEST_CASE("two env entries of the same name are accepted when both have a when", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"env": [
    {"name": "A", "value": "1", "when": "numNodes == 1"},
    {"name": "A", "value": "2", "when": "numNodes > 1"}]})"));
  CHECK(p.env.size() == 2);
}

TEST_CASE("two env entries of the same name are rejected when only one has a when",
          "[policy][when]") {
  for (const char* spec : {R"({"env": [{"name": "A", "value": "1", "when": "numNodes == 1"},
                                       {"name": "A", "value": "2"}]})",
                           R"({"env": [{"name": "A", "value": "1"},
                                       {"name": "A", "value": "2", "when": "numNodes > 1"}]})"}) {
    INFO("spec: " << spec);
    CHECK_THAT(parse_error(with_spec(spec)), StartsWith(at("spec.env[1].name")));
  }
}

// replaces

TEST_CASE("replaces names the policy and the command prefix", "[policy][replaces]") {
  const auto p = parse_ok(
      with_spec(R"({"replaces": {"policy": "torch-base", "commandPrefix": ["tune", "run"]}})"));
  REQUIRE(p.replaces.has_value());
  CHECK(p.replaces->policy == "torch-base");
  CHECK(p.replaces->command_prefix == std::vector<std::string>{"tune", "run"});
  CHECK_FALSE(parse_ok(minimal_doc()).replaces.has_value());
}

TEST_CASE("replaces without policy is rejected", "[policy][replaces]") {
  CHECK_THAT(parse_error(with_spec(R"({"replaces": {"commandPrefix": ["tune"]}})")),
             StartsWith(at("spec.replaces.policy") + "missing"));
}

TEST_CASE("replaces without commandPrefix is rejected", "[policy][replaces]") {
  CHECK_THAT(parse_error(with_spec(R"({"replaces": {"policy": "torch"}})")),
             StartsWith(at("spec.replaces.commandPrefix") + "missing"));
}

TEST_CASE("replaces with an empty commandPrefix is rejected", "[policy][replaces]") {
  const auto message =
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": []}})"));
  CHECK_THAT(message, StartsWith(at("spec.replaces.commandPrefix")));
  CHECK_THAT(message, Contains("is empty"));
}

TEST_CASE("replaces rejects a commandPrefix that is not a list of strings", "[policy][replaces]") {
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": "tune run"}})")),
      StartsWith(at("spec.replaces.commandPrefix")));
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": ["tune", 1]}})")),
      StartsWith(at("spec.replaces.commandPrefix[1]")));
}

TEST_CASE("replaces rejects a policy that is not a string", "[policy][replaces]") {
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": ["torch"], "commandPrefix": ["tune"]}})")),
      StartsWith(at("spec.replaces.policy")));
}

TEST_CASE("replaces rejects unknown keys and non-mappings", "[policy][replaces]") {
  const auto message =
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefx": ["tune"]}})"));
  CHECK(message ==
        at("spec.replaces") + "unknown field \"commandPrefx\"; did you mean \"commandPrefix\"?");
  CHECK_THAT(parse_error(with_spec(R"({"replaces": "torch"})")), StartsWith(at("spec.replaces")));
}

TEST_CASE("policy_set rejects replaces naming no loaded policy", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(replacing("torchtune", "pytorch"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("torchtune.yaml: spec.replaces.policy: "));
  CHECK_THAT(set.message(), Contains("\"pytorch\""));
}

TEST_CASE("policy_set rejects a policy that replaces itself", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(replacing("torchtune", "torchtune"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("torchtune.yaml: spec.replaces.policy: "));
  CHECK_THAT(set.message(), Contains("itself"));
}

TEST_CASE("replacements_of lists the policies that replace a policy", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(replacing("torchtune", "torch"));
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(named("mpi", "mpi.yaml"));
  list.push_back(replacing("other", "torch"));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  const auto& replacers = set->replacements_of("torch");
  REQUIRE(replacers.size() == 2);
  CHECK(replacers[0] == set->by_name("torchtune"));
  CHECK(replacers[1] == set->by_name("other"));
  CHECK(set->replacements_of("mpi").empty());
  CHECK(set->replacements_of("torchtune").empty());
  CHECK(set->replacements_of("nothing").empty());
}

TEST_CASE("replacements_of points into a moved policy_set", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(replacing("torchtune", "torch"));
  auto built = policy_set::build(std::move(list));
  REQUIRE(built.ok());
  const policy_set set = std::move(built).value();
  REQUIRE(set.replacements_of("torch").size() == 1);
  CHECK(set.replacements_of("torch")[0] == set.by_name("torchtune"));
  CHECK(set.replacements_of("torch")[0]->replaces->command_prefix ==
        std::vector<std::string>{"tune", "run"});
}

// extraContainers

TEST_CASE("extraContainers parse with init defaulting to false", "[policy][extra-containers]") {
  const auto p = parse_ok(
      with_spec(R"({"extraContainers": [{"name": "sidecar"}, {"name": "setup", "init": true}]})"));
  REQUIRE(p.extra_containers.size() == 2);
  CHECK(p.extra_containers[0].name == "sidecar");
  CHECK_FALSE(p.extra_containers[0].init);
  CHECK(p.extra_containers[1].name == "setup");
  CHECK(p.extra_containers[1].init);
}

TEST_CASE("an extra container without a valid name is rejected", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"init": true}]})")),
             StartsWith(at("spec.extraContainers[0].name") + "missing"));
  CHECK_THAT(
      parse_error(with_spec(R"({"extraContainers": [{"name": "a"}, {"name": "Side_Car"}]})")),
      StartsWith(at("spec.extraContainers[1].name")));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": 3}]})")),
             StartsWith(at("spec.extraContainers[0].name")));
}

TEST_CASE("an extra container's init must be a boolean", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": "a", "init": "yes"}]})")),
             StartsWith(at("spec.extraContainers[0].init")));
}

TEST_CASE("extraContainers reject unknown keys and non-lists", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": "a", "inti": true}]})")),
             StartsWith(at("spec.extraContainers[0]") + "unknown field \"inti\""));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": {"name": "a"}})")),
             StartsWith(at("spec.extraContainers")));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": ["a"]})")),
             StartsWith(at("spec.extraContainers[0]")));
}

// defaults.replicas

TEST_CASE("defaults.replicas takes integers and templates over numNodes", "[policy][defaults]") {
  const auto p = parse_ok(with_spec(
      R"({"defaults": {"replicas": {"master": 1, "worker": "${numNodes - 1}", "extra": "2"}}})"));
  REQUIRE(p.default_replicas.size() == 3);
  std::map<std::string, std::string> rendered;
  for (const auto& [role, count] : p.default_replicas) rendered[role] = render_ok(count);
  // numNodes is 3 in pod_values().
  CHECK(rendered ==
        std::map<std::string, std::string>{{"master", "1"}, {"worker", "2"}, {"extra", "2"}});
  CHECK(parse_ok(minimal_doc()).default_replicas.empty());
}

TEST_CASE("defaults.replicas may use no variable but numNodes", "[policy][defaults]") {
  for (const char* count :
       {"${index}", "${numNodes * gpusPerNode}", "${rank}", "${i}", "${replicas(worker) + 1}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.defaults.replicas.worker")));
    CHECK_THAT(message, Contains("may use only numNodes"));
  }
  // A text variable is not a count at all.
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"replicas", {{"worker", "${job}"}}}};
  CHECK_THAT(parse_error(doc), Contains("must be a whole number"));
}

TEST_CASE("defaults.replicas rejects counts out of range and non-numbers", "[policy][defaults]") {
  for (const json& count : {json(-1), json(1000001), json(1.5), json(true), json::array({1})}) {
    INFO("count: " << count.dump());
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    CHECK_THAT(parse_error(doc), StartsWith(at("spec.defaults.replicas.worker")));
  }
}

TEST_CASE("defaults.replicas accepts the bounds 0 and 1000000", "[policy][defaults]") {
  const auto p =
      parse_ok(with_spec(R"({"defaults": {"replicas": {"master": 0, "worker": 1000000}}})"));
  REQUIRE(p.default_replicas.size() == 2);
}

TEST_CASE("defaults.replicas rejects a role that is not a DNS label", "[policy][defaults]") {
  CHECK_THAT(parse_error(with_spec(R"({"defaults": {"replicas": {"Worker": 1}}})")),
             StartsWith(at("spec.defaults.replicas.Worker")));
  CHECK_THAT(parse_error(with_spec(R"({"defaults": {"replicas": [1]}})")),
             StartsWith(at("spec.defaults.replicas")));
}

// Regression (fixed): defaults.replicas promises "a whole number, or a template over numNodes that
// renders to one", but a literal string that is no number (or text around ${numNodes}) is accepted
// at load and fails only at admission. Input: defaults: {replicas: {worker: "abc"}} (also
// "x${numNodes}").
TEST_CASE("defaults.replicas rejects a literal that is not a number at load",
          "[policy][defaults]") {
  for (const char* count : {"abc", "x${numNodes}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
    if (!p.ok()) CHECK_THAT(p.message(), StartsWith(at("spec.defaults.replicas.worker")));
  }
}

// args

TEST_CASE("args parse their command prefix and items with roles and when", "[policy][args]") {
  const auto p = parse_ok(with_spec(R"({"args": {"after": ["tune", "run"], "items": [
    {"value": "--nnodes=${numNodes}"},
    {"value": "--rdzv=${job}:${masterPort}", "when": "numNodes * processesPerNode > 1"},
    {"value": "--rank=${rank}", "roles": ["training"]}]}})"));
  CHECK(p.args_after == std::vector<std::string>{"tune", "run"});
  REQUIRE(p.args.size() == 3);
  CHECK(render_ok(p.args[0].value) == "--nnodes=3");
  CHECK(p.args[0].scope.roles.all);
  REQUIRE(p.args[1].scope.when.has_value());
  CHECK(evaluate_ok(*p.args[1].scope.when));
  CHECK(render_ok(p.args[1].value) == "--rdzv=j:29500");
  CHECK(p.args[2].scope.roles.training);
}

TEST_CASE("args without after insert with an empty prefix", "[policy][args]") {
  const auto p = parse_ok(with_spec(R"({"args": {"items": [{"value": "--x"}]}})"));
  CHECK(p.args_after.empty());
  REQUIRE(p.args.size() == 1);
  CHECK(p.args[0].value.is_literal());
}

TEST_CASE("args without items is rejected", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"after": ["tune", "run"]}})")),
             StartsWith(at("spec.args.items") + "missing"));
}

TEST_CASE("args with an empty after is rejected", "[policy][args]") {
  const auto message = parse_error(with_spec(R"({"args": {"after": [], "items": []}})"));
  CHECK_THAT(message, StartsWith(at("spec.args.after")));
  CHECK_THAT(message, Contains("is empty"));
}

TEST_CASE("an arg item needs a string value", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"roles": ["node"]}]}})")),
             StartsWith(at("spec.args.items[0].value") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "a"}, {"value": 4}]}})")),
             StartsWith(at("spec.args.items[1].value")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "${nope}"}]}})")),
             StartsWith(at("spec.args.items[0].value")));
}

TEST_CASE("args reject unknown keys and wrong shapes", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "a", "valeu": "b"}]}})")),
             StartsWith(at("spec.args.items[0]") + "unknown field \"valeu\""));
  CHECK(parse_error(with_spec(R"({"args": {"item": []}})")) ==
        at("spec.args") + "unknown field \"item\"; did you mean \"items\"?");
  CHECK_THAT(parse_error(with_spec(R"({"args": ["--x"]})")), StartsWith(at("spec.args")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": {"value": "a"}}})")),
             StartsWith(at("spec.args.items")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": ["--x"]}})")),
             StartsWith(at("spec.args.items[0]")));
}

TEST_CASE("an arg using worldSize or rank must be scoped to training roles", "[policy][args]") {
  const auto message =
      parse_error(with_spec(R"({"args": {"items": [{"value": "--world=${worldSize}"}]}})"));
  CHECK_THAT(message, StartsWith(at("spec.args.items[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  CHECK_THAT(parse_error(with_spec(
                 R"({"args": {"items": [{"value": "--r=${rank}", "roles": ["launcher"]}]}})")),
             StartsWith(at("spec.args.items[0]")));
}

// volumes

TEST_CASE("a secret volume becomes a whole v1.Volume with integer modes", "[policy][volumes]") {
  const auto p = parse_ok(with_spec(R"({"volumes": [{"name": "ssh", "secret": {
    "secretName": "${job}-mpi-ssh-auth", "defaultMode": 256, "optional": true,
    "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 416}]}}]})"));
  REQUIRE(p.volumes.size() == 1);
  CHECK(p.volumes[0].name == "ssh");
  CHECK(p.volumes[0].scope.roles.all);
  CHECK(p.volumes[0].volume.uses(variable::job));
  CHECK(render_ok(p.volumes[0].volume) == json::parse(R"({"name": "ssh", "secret": {
    "secretName": "j-mpi-ssh-auth", "defaultMode": 256, "optional": true,
    "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 416}]}})"));
}

TEST_CASE("a configMap volume becomes a whole v1.Volume", "[policy][volumes]") {
  const auto p = parse_ok(with_spec(R"({"volumes": [{"name": "hostfile", "roles": ["launcher"],
    "configMap": {"name": "${job}-mpi-hostfile", "items": [{"key": "hostfile", "path": "hostfile",
    "mode": 292}]}}]})"));
  REQUIRE(p.volumes.size() == 1);
  CHECK(p.volumes[0].scope.roles.names == std::vector<std::string>{"launcher"});
  CHECK(render_ok(p.volumes[0].volume) ==
        json::parse(R"({"name": "hostfile", "configMap": {"name": "j-mpi-hostfile",
    "items": [{"key": "hostfile", "path": "hostfile", "mode": 292}]}})"));
}

TEST_CASE("an emptyDir volume becomes a whole v1.Volume", "[policy][volumes]") {
  const auto p = parse_ok(with_spec(R"({"volumes": [
    {"name": "scratch", "emptyDir": {}},
    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]})"));
  REQUIRE(p.volumes.size() == 2);
  CHECK(render_ok(p.volumes[0].volume) == json::parse(R"({"name": "scratch", "emptyDir": {}})"));
  CHECK(render_ok(p.volumes[1].volume) ==
        json::parse(R"({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}})"));
}

TEST_CASE("a downwardAPI volume's fieldRef gets apiVersion v1 written in", "[policy][volumes]") {
  const auto p = parse_ok(with_spec(R"({"volumes": [{"name": "hostfile", "downwardAPI": {
    "items": [
      {"path": "hostfile", "mode": 292,
       "fieldRef": {"fieldPath": "metadata.annotations['trainenv.io/hostfile']"}},
      {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels", "apiVersion": "v2"}}]}}]})"));
  REQUIRE(p.volumes.size() == 1);
  CHECK(render_ok(p.volumes[0].volume) == json::parse(R"({"name": "hostfile", "downwardAPI": {
    "items": [
      {"path": "hostfile", "mode": 292, "fieldRef": {"apiVersion": "v1",
       "fieldPath": "metadata.annotations['trainenv.io/hostfile']"}},
      {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels", "apiVersion": "v2"}}]}})"));
}

TEST_CASE("a volume needs exactly one source", "[policy][volumes]") {
  for (const char* spec :
       {R"({"volumes": [{"name": "v"}]})",
        R"({"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]})",
        R"({"volumes": [{"name": "v", "configMap": {"name": "c"},
                         "downwardAPI": {"items": []}}]})"}) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at("spec.volumes[0]")));
    CHECK_THAT(message, Contains("exactly one of secret, configMap, downwardAPI, emptyDir"));
  }
}

TEST_CASE("a volume source of another kind is an unknown field", "[policy][volumes]") {
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]})")),
             StartsWith(at("spec.volumes[0]") + "unknown field \"hostPath\""));
}

TEST_CASE("a volume needs a unique DNS-label name", "[policy][volumes]") {
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"emptyDir": {}}]})")),
             StartsWith(at("spec.volumes[0].name") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "My_Vol", "emptyDir": {}}]})")),
             StartsWith(at("spec.volumes[0].name")));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "${job}", "emptyDir": {}}]})")),
             StartsWith(at("spec.volumes[0].name")));
  const auto message = parse_error(
      with_spec(R"({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]})"));
  CHECK_THAT(message, StartsWith(at("spec.volumes[1].name")));
  CHECK_THAT(message, Contains("defined twice"));
}

TEST_CASE("a volume source must be a mapping", "[policy][volumes]") {
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "secret": "s"}]})")),
             StartsWith(at("spec.volumes[0].secret")));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "emptyDir": null}]})")),
             StartsWith(at("spec.volumes[0].emptyDir")));
}

TEST_CASE("a volume source's required members are checked", "[policy][volumes]") {
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "secret": {}}]})")),
             StartsWith(at("spec.volumes[0].secret.secretName") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "configMap": {}}]})")),
             StartsWith(at("spec.volumes[0].configMap.name") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "downwardAPI": {}}]})")),
             StartsWith(at("spec.volumes[0].downwardAPI.items") + "missing"));
}

TEST_CASE("a volume source's member names are checked", "[policy][volumes]") {
  const auto message =
      parse_error(with_spec(R"({"volumes": [{"name": "v", "secret": {"secretname": "s"}}]})"));
  // Kubernetes' own members get the same message, with the nearest name.
  CHECK(message == at("spec.volumes[0].secret") +
                       "unknown field \"secretname\"; did you mean \"secretName\"?");
  CHECK_THAT(
      parse_error(with_spec(R"({"volumes": [{"name": "v", "configMap": {"name": "c", "x": 1}}]})")),
      StartsWith(at("spec.volumes[0].configMap") + "unknown field \"x\"; known fields here: "));
  CHECK_THAT(parse_error(with_spec(R"({"volumes": [{"name": "v", "emptyDir": {"size": "1Gi"}}]})")),
             StartsWith(at("spec.volumes[0].emptyDir") + "unknown field \"size\""));
}

TEST_CASE("a volume source's member types are checked", "[policy][volumes]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"secretName": 1})", "spec.volumes[0].secret.secretName"},
      {R"({"secretName": "s", "optional": "true"})", "spec.volumes[0].secret.optional"},
      {R"({"secretName": "s", "items": {"key": "k"}})", "spec.volumes[0].secret.items"},
      {R"({"secretName": "s", "items": ["k"]})", "spec.volumes[0].secret.items[0]"}};
  for (const auto& [secret, field] : cases) {
    INFO("secret: " << secret);
    json doc = minimal_doc();
    doc["spec"]["volumes"] = json::array({{{"name", "v"}, {"secret", json::parse(secret)}}});
    CHECK_THAT(parse_error(doc), StartsWith(at(field)));
  }
  CHECK_THAT(
      parse_error(with_spec(R"({"volumes": [{"name": "v", "emptyDir": {"sizeLimit": 1024}}]})")),
      StartsWith(at("spec.volumes[0].emptyDir.sizeLimit")));
}

TEST_CASE("a volume defaultMode must be an integer from 0 to 0777", "[policy][volumes]") {
  for (const json& mode : {json(512), json(-1), json("0400"), json(256.0), json(true)}) {
    INFO("defaultMode " << mode.dump());
    json doc = minimal_doc();
    doc["spec"]["volumes"] =
        json::array({{{"name", "v"}, {"secret", {{"secretName", "s"}, {"defaultMode", mode}}}}});
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.volumes[0].secret.defaultMode")));
    CHECK_THAT(message, Contains("0777"));
  }
  CHECK_THAT(
      parse_error(with_spec(
          R"({"volumes": [{"name": "v", "configMap": {"name": "c", "defaultMode": 1000}}]})")),
      StartsWith(at("spec.volumes[0].configMap.defaultMode")));
  CHECK_THAT(
      parse_error(with_spec(
          R"({"volumes": [{"name": "v", "downwardAPI": {"items": [], "defaultMode": 512}}]})")),
      StartsWith(at("spec.volumes[0].downwardAPI.defaultMode")));
}

TEST_CASE("a volume defaultMode accepts the bounds 0 and 0777", "[policy][volumes]") {
  for (int mode : {0, 0777}) {
    INFO("defaultMode " << mode);
    json doc = minimal_doc();
    doc["spec"]["volumes"] =
        json::array({{{"name", "v"}, {"secret", {{"secretName", "s"}, {"defaultMode", mode}}}}});
    const auto p = parse_ok(doc);
    CHECK(render_ok(p.volumes[0].volume)["secret"]["defaultMode"] == mode);
  }
}

TEST_CASE("a volume's key items need key and path and a valid mode", "[policy][volumes]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"path": "p"}])", "spec.volumes[0].configMap.items[0].key"},
      {R"([{"key": "k", "path": "p"}, {"key": "k"}])", "spec.volumes[0].configMap.items[1].path"},
      {R"([{"key": "k", "path": "p", "mode": 512}])", "spec.volumes[0].configMap.items[0].mode"},
      {R"([{"key": "k", "path": "p", "mode": "0644"}])", "spec.volumes[0].configMap.items[0].mode"},
      {R"([{"key": 1, "path": "p"}])", "spec.volumes[0].configMap.items[0].key"},
      // An unknown member is reported at its object (the message names it).
      {R"([{"key": "k", "path": "p", "mod": 420}])", "spec.volumes[0].configMap.items[0]"}};
  for (const auto& [items, field] : cases) {
    INFO("items: " << items);
    json doc = minimal_doc();
    doc["spec"]["volumes"] = json::array(
        {{{"name", "v"}, {"configMap", {{"name", "c"}, {"items", json::parse(items)}}}}});
    CHECK_THAT(parse_error(doc), StartsWith(at(field)));
  }
}

TEST_CASE("a downwardAPI item needs path and fieldRef with fieldPath", "[policy][volumes]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"fieldRef": {"fieldPath": "metadata.name"}}])",
       "spec.volumes[0].downwardAPI.items[0].path"},
      {R"([{"path": "p"}])", "spec.volumes[0].downwardAPI.items[0].fieldRef"},
      {R"([{"path": "p", "fieldRef": "metadata.name"}])",
       "spec.volumes[0].downwardAPI.items[0].fieldRef"},
      {R"([{"path": "p", "fieldRef": {}}])",
       "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath"},
      {R"([{"path": "p", "fieldRef": {"fieldPath": "x", "extra": 1}}])",
       "spec.volumes[0].downwardAPI.items[0].fieldRef"},
      {R"([{"path": "p", "fieldRef": {"fieldPath": "x"}, "mode": 4095}])",
       "spec.volumes[0].downwardAPI.items[0].mode"},
      {R"(["p"])", "spec.volumes[0].downwardAPI.items[0]"}};
  for (const auto& [items, field] : cases) {
    INFO("items: " << items);
    json doc = minimal_doc();
    doc["spec"]["volumes"] =
        json::array({{{"name", "v"}, {"downwardAPI", {{"items", json::parse(items)}}}}});
    CHECK_THAT(parse_error(doc), StartsWith(at(field)));
  }
}

TEST_CASE("a volume using worldSize or rank must be scoped to training roles",
          "[policy][volumes]") {
  const auto message = parse_error(
      with_spec(R"({"volumes": [{"name": "v", "secret": {"secretName": "s-${rank}"}}]})"));
  CHECK_THAT(message, StartsWith(at("spec.volumes[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  const auto p = parse_ok(with_spec(
      R"({"volumes": [{"name": "v", "secret": {"secretName": "s-${rank}"}, "roles": ["training"]}]})"));
  CHECK(render_ok(p.volumes[0].volume)["secret"]["secretName"] == "s-1");
}

TEST_CASE("an unknown variable in a volume is rejected at the volume", "[policy][volumes]") {
  const auto message = parse_error(
      with_spec(R"({"volumes": [{"name": "v", "secret": {"secretName": "${jobName}"}}]})"));
  CHECK_THAT(message, StartsWith(at("spec.volumes[0]")));
  CHECK_THAT(message, Contains("jobName"));
}

// volumeMounts

TEST_CASE("a volume mount becomes a whole v1.VolumeMount", "[policy][volume-mounts]") {
  const auto p = parse_ok(with_spec(R"({"volumeMounts": [
    {"name": "hostfile", "mountPath": "/etc/mpi", "readOnly": true, "roles": ["launcher"]},
    {"name": "data", "mountPath": "/data/${job}", "subPath": "${namespace}/x"}]})"));
  REQUIRE(p.volume_mounts.size() == 2);
  CHECK(p.volume_mounts[0].mount_path == "/etc/mpi");
  CHECK(p.volume_mounts[0].scope.roles.names == std::vector<std::string>{"launcher"});
  CHECK(render_ok(p.volume_mounts[0].mount) ==
        json::parse(R"({"name": "hostfile", "mountPath": "/etc/mpi", "readOnly": true})"));
  CHECK(p.volume_mounts[1].mount_path == "/data/${job}");
  CHECK(render_ok(p.volume_mounts[1].mount) ==
        json::parse(R"({"name": "data", "mountPath": "/data/j", "subPath": "ns/x"})"));
}

TEST_CASE("a volume mount needs a name and a mountPath", "[policy][volume-mounts]") {
  CHECK_THAT(parse_error(with_spec(R"({"volumeMounts": [{"mountPath": "/x"}]})")),
             StartsWith(at("spec.volumeMounts[0].name") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"volumeMounts": [{"name": "v"}]})")),
             StartsWith(at("spec.volumeMounts[0].mountPath") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"volumeMounts": [{"name": 1, "mountPath": "/x"}]})")),
             StartsWith(at("spec.volumeMounts[0].name")));
}

TEST_CASE("a volume mount's mountPath must be absolute", "[policy][volume-mounts]") {
  for (const char* path : {"etc/mpi", "", "${job}/x", "./x"}) {
    INFO("mountPath: " << path);
    json doc = minimal_doc();
    doc["spec"]["volumeMounts"] = json::array({{{"name", "v"}, {"mountPath", path}}});
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.volumeMounts[0].mountPath")));
    CHECK_THAT(message, Contains("absolute"));
  }
}

TEST_CASE("a volume mount's readOnly must be a boolean", "[policy][volume-mounts]") {
  CHECK_THAT(parse_error(with_spec(
                 R"({"volumeMounts": [{"name": "v", "mountPath": "/x", "readOnly": "true"}]})")),
             StartsWith(at("spec.volumeMounts[0].readOnly")));
}

TEST_CASE("a volume mount's subPath must be a string", "[policy][volume-mounts]") {
  CHECK_THAT(parse_error(with_spec(
                 R"({"volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": 1}]})")),
             StartsWith(at("spec.volumeMounts[0].subPath")));
}

TEST_CASE("a volume mount rejects unknown keys", "[policy][volume-mounts]") {
  const auto message = parse_error(
      with_spec(R"({"volumeMounts": [{"name": "v", "mountPath": "/x", "readonly": true}]})"));
  CHECK(message ==
        at("spec.volumeMounts[0]") + "unknown field \"readonly\"; did you mean \"readOnly\"?");
}

TEST_CASE("a volume mount using worldSize must be scoped to training roles",
          "[policy][volume-mounts]") {
  const auto message = parse_error(
      with_spec(R"({"volumeMounts": [{"name": "v", "mountPath": "/x/${worldSize}"}]})"));
  CHECK_THAT(message, StartsWith(at("spec.volumeMounts[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  CHECK(parse_ok(with_spec(R"({"volumeMounts": [{"name": "v", "mountPath": "/x/${worldSize}",
                                                  "roles": ["master", "worker"]}]})"))
            .volume_mounts.size() == 1);
}

// annotations

TEST_CASE("an annotation with a value renders the value", "[policy][annotations]") {
  const auto p = parse_ok(
      with_spec(R"({"annotations": [{"name": "trainenv.io/coordinator", "value": "${job}-0"}]})"));
  REQUIRE(p.annotations.size() == 1);
  CHECK(p.annotations[0].name == "trainenv.io/coordinator");
  REQUIRE(p.annotations[0].value.has_value());
  CHECK_FALSE(p.annotations[0].line.has_value());
  CHECK_FALSE(p.annotations[0].line_count.has_value());
  CHECK(render_ok(*p.annotations[0].value) == "j-0");
}

TEST_CASE("an annotation with lines keeps its count and per-line text", "[policy][annotations]") {
  const auto p = parse_ok(with_spec(R"({"annotations": [{"name": "trainenv.io/hostfile",
    "roles": ["launcher"],
    "lines": {"count": "${numNodes}", "text": "${job}-node-0-${i}.${job} slots=${slots}"}}]})"));
  REQUIRE(p.annotations.size() == 1);
  const auto& a = p.annotations[0];
  CHECK_FALSE(a.value.has_value());
  REQUIRE(a.line_count.has_value());
  REQUIRE(a.line.has_value());
  CHECK(render_ok(*a.line_count) == "3");
  CHECK(a.line->uses(variable::line));
  auto values = pod_values();
  values.set(variable::line, "2");
  CHECK(render_ok(*a.line, values) == "j-node-0-2.j slots=4");
}

TEST_CASE("an annotation's lines count may be an integer", "[policy][annotations]") {
  const auto p = parse_ok(
      with_spec(R"({"annotations": [{"name": "a", "lines": {"count": 2, "text": "h-${i}"}}]})"));
  REQUIRE(p.annotations[0].line_count.has_value());
  CHECK(render_ok(*p.annotations[0].line_count) == "2");
}

TEST_CASE("an annotation needs exactly one of value or lines", "[policy][annotations]") {
  for (const char* spec :
       {R"({"annotations": [{"name": "a"}]})",
        R"({"annotations": [{"name": "a", "value": "x", "lines": {"count": 1, "text": "y"}}]})"}) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at("spec.annotations[0]")));
    CHECK_THAT(message, Contains("exactly one of value or lines"));
  }
}

TEST_CASE("an annotation needs a name", "[policy][annotations]") {
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"value": "x"}]})")),
             StartsWith(at("spec.annotations[0].name") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": 1, "value": "x"}]})")),
             StartsWith(at("spec.annotations[0].name")));
}

TEST_CASE("valid annotation keys are accepted", "[policy][annotations]") {
  const std::vector<std::string> keys = {"hostfile", "trainenv.io/hostfile", "a.b-c/Name_1.x",
                                         std::string(63, 'a'), "x/" + std::string(63, 'B')};
  for (const auto& key : keys) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    CHECK(parse_ok(doc).annotations.size() == 1);
  }
}

TEST_CASE("an invalid annotation key is rejected", "[policy][annotations]") {
  const std::vector<std::string> keys = {"",
                                         "a b",
                                         "/x",
                                         "x/",
                                         "a/b/c",
                                         "Trainenv.io/x",
                                         "t_x.io/y",
                                         "a:b",
                                         std::string(64, 'a'),
                                         "x/" + std::string(64, 'a'),
                                         std::string(254, 'a') + "/x"};
  for (const auto& key : keys) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.annotations[0].name")));
    CHECK_THAT(message, Contains("not a valid annotation key"));
  }
}

// Regression (fixed): Kubernetes' qualified names must begin and end with an alphanumeric character
// and the prefix must be a DNS subdomain; is_annotation_key checks only the character set, so the
// apiserver rejects every pod this policy mutates. Inputs: "trainenv.io/-x", "trainenv.io/x.",
// ".io/x", "a..b/x".
TEST_CASE("an annotation key Kubernetes would reject is rejected", "[policy][annotations]") {
  for (const char* key : {"trainenv.io/-x", "trainenv.io/x.", "-hostfile", ".io/x", "a..b/x"}) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
  }
}

TEST_CASE("an annotation's lines need count and text", "[policy][annotations]") {
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": {"text": "x"}}]})")),
             StartsWith(at("spec.annotations[0].lines.count") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": {"count": 1}}]})")),
             StartsWith(at("spec.annotations[0].lines.text") + "missing"));
  CHECK_THAT(
      parse_error(with_spec(
          R"({"annotations": [{"name": "a", "lines": {"count": 1, "text": "x", "sep": ","}}]})")),
      StartsWith(at("spec.annotations[0].lines") + "unknown field \"sep\""));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": "x"}]})")),
             StartsWith(at("spec.annotations[0].lines")));
  CHECK_THAT(parse_error(with_spec(
                 R"({"annotations": [{"name": "a", "lines": {"count": -1, "text": "x"}}]})")),
             StartsWith(at("spec.annotations[0].lines.count")));
}

TEST_CASE("${i} in an annotation's lines count is rejected", "[policy][annotations]") {
  const auto message = parse_error(
      with_spec(R"({"annotations": [{"name": "a", "lines": {"count": "${i}", "text": "x"}}]})"));
  CHECK_THAT(message, StartsWith(at("spec.annotations[0].lines.count")));
  CHECK_THAT(message, Contains("may use only"));
}

TEST_CASE("${i} anywhere but an annotation's lines.text is rejected at that item",
          "[policy][annotations]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"env": [{"name": "A", "value": "host-${i}"}]})", "spec.env[0]"},
      {R"({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x${i}"}}}]})",
       "spec.env[0]"},
      {R"({"env": [{"name": "A", "value": "1", "when": "i > 0"}]})", "spec.env[0]"},
      {R"({"ports": [{"containerPort": "${8000 + i}"}]})", "spec.ports[0]"},
      {R"({"args": {"items": [{"value": "--i=${i}"}]}})", "spec.args.items[0]"},
      {R"({"volumes": [{"name": "v", "secret": {"secretName": "s${i}"}}]})", "spec.volumes[0]"},
      {R"({"volumeMounts": [{"name": "v", "mountPath": "/x/${i}"}]})", "spec.volumeMounts[0]"},
      {R"({"annotations": [{"name": "a", "value": "${i}"}]})", "spec.annotations[0]"},
      {R"({"annotations": [{"name": "a", "lines": {"count": 2, "text": "${i}"},
                            "when": "i < 1"}]})",
       "spec.annotations[0]"}};
  for (const auto& [spec, field] : cases) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at(field)));
    CHECK_THAT(message, Contains("${i}"));
  }
}

TEST_CASE("an annotation using rank must be scoped to training roles", "[policy][annotations]") {
  for (const char* spec :
       {R"({"annotations": [{"name": "a", "value": "${rank}"}]})",
        R"({"annotations": [{"name": "a", "lines": {"count": "${worldSize}", "text": "h${i}"}}]})",
        R"({"annotations": [{"name": "a", "lines": {"count": 1, "text": "${rank}-${i}"},
                              "roles": ["launcher"]}]})"}) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at("spec.annotations[0]")));
    CHECK_THAT(message, Contains("roles: [training]"));
  }
  CHECK(parse_ok(with_spec(R"({"annotations": [{"name": "a", "roles": ["training"],
          "lines": {"count": "${worldSize}", "text": "${rank}-${i}"}}]})"))
            .annotations.size() == 1);
}

// Regression (fixed): lines.count must render to a whole number, yet a literal that is no number,
// or a text variable, is accepted at load and fails only at admission ("asks for \"abc\" lines").
// Inputs: lines: {count: "abc", text: "x"}; lines: {count: "${job}", text: "x"}.
TEST_CASE("an annotation's lines count that can never be a number is rejected at load",
          "[policy][annotations]") {
  for (const char* count : {"abc", "${job}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["annotations"] =
        json::array({{{"name", "a"}, {"lines", {{"count", count}, {"text", "x"}}}}});
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
    if (!p.ok()) CHECK_THAT(p.message(), StartsWith(at("spec.annotations[0].lines.count")));
  }
}
