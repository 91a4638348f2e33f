// core/policy.hpp, volumes and volumeMounts: whole v1.Volume and v1.VolumeMount values,
// checked member by member and written out as the apiserver defaults them.
#include <catch2/catch.hpp>

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

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
  // The runtime's sshAuthMountPath is one: the MPI policies mount their SSH keys there.
  json doc = minimal_doc();
  doc["spec"]["volumeMounts"] =
      json::array({{{"name", "v"}, {"mountPath", "${sshAuthMountPath}"}}});
  CHECK(parse_policy(doc, source).ok());
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
