// core/policy.hpp: policy documents, their validation messages (which name the file and the
// field), and the policy set's selection rules (SPEC §1, §3, §5 check-policies).
#include <catch2/catch.hpp>

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
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.framework: "));
  CHECK_THAT(message, Contains("did you mean \"frameworks\"?"));
}

TEST_CASE("an unknown env item key is rejected with a did-you-mean suggestion", "[policy]") {
  const auto message = parse_error(with_env({{"name", "A"}, {"valeu", "1"}}));
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.env[0].valeu: "));
  CHECK_THAT(message, Contains("did you mean \"value\"?"));
}

TEST_CASE("an unknown key far from any known one lists the known fields", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"completelyDifferent", 1}};
  const auto message = parse_error(doc);
  CHECK_THAT(message, StartsWith(std::string(source) + ": spec.defaults.completelyDifferent: "));
  CHECK_THAT(message, Contains("masterPort") && Contains("numNodes") && Contains("nprocPerNode"));
  CHECK_THAT(message, !Contains("did you mean"));
}

TEST_CASE("an unknown top-level key is rejected", "[policy]") {
  json doc = minimal_doc();
  doc["status"] = json::object();
  CHECK_THAT(parse_error(doc), StartsWith(std::string(source) + ": document.status: "));
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
// yields Pods the apiserver cannot decode or validate (SPEC §4: the patched Pod must be a valid
// v1.Pod). Inputs: valueFrom: {secretKeyRef: "token"}, valueFrom: {configMapKeyRef: {}}.
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
