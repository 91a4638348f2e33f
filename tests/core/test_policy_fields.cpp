// core/policy.hpp, the field checks: each validation error names the source file and the
// field (docs/contract.md §5 check-policies); unknown fields suggest the nearest known name.
#include <catch2/catch.hpp>

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

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
                       "masterPort, numNodes, nprocPerNode, replicas, sshAuthMountPath, sshSecret");
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
