// The diff (core/decide/diff.hpp): what a policy wants against what the pod has, as a JSON Patch
// and its typed summary (docs/contract.md §4). Every patch is applied with nlohmann's json::patch
// and fed back in: the second round must add nothing.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "trainenv/core/decide/diff.hpp"

namespace diff_tests {

using namespace trainenv::core;
using nlohmann::json;

json pod_with(json container, json spec_extra = json::object()) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "ns"}}},
              {"spec", {{"containers", json::array({std::move(container)})}}}};
  for (const auto& [k, v] : spec_extra.items()) pod["spec"][k] = v;
  return pod;
}

env_want literal(std::string name, std::string value) {
  return env_want{std::move(name), std::move(value), std::nullopt};
}

container_wants target(std::vector<env_want> env) {
  container_wants c;
  c.env = std::move(env);
  return c;
}

decision diff_of(const json& pod, const wants& w) {
  const pod_view view(pod);
  return build_patch(view, w, "test-policy");
}

// The pod with `d`'s patch applied by nlohmann's applier.
json applied(const json& pod, const decision& d) {
  return d.patch_text.empty() ? pod : pod.patch(d.patch());
}

// Applies the patch and checks that the same wants change nothing more.
json apply_idempotent(const json& pod, const wants& w) {
  const auto first = diff_of(pod, w);
  const json after = applied(pod, first);
  const auto second = diff_of(after, w);
  INFO("second patch: " << second.patch_text);
  CHECK(second.patch_text.empty());
  CHECK(second.patch_ops == 0);
  CHECK(second.warnings.empty());
  CHECK(second.injected.empty());
  return after;
}

std::vector<std::string> env_names(const json& container) {
  std::vector<std::string> out;
  for (const auto& e : container.value("env", json::array())) out.push_back(e["name"]);
  return out;
}

TEST_CASE("diff: an env entry the pod has with the wanted value is not added again", "[diff]") {
  const json pod = pod_with({{"name", "node"},
                             {"env", json::array({{{"name", "MASTER_PORT"}, {"value", "29500"}},
                                                  {{"name", "OTHER"}, {"value", "x"}}})}});
  wants w;
  w.containers.push_back(target({literal("MASTER_PORT", "29500"), literal("WORLD_SIZE", "4")}));
  const auto d = diff_of(pod, w);
  CHECK(d.policy == "test-policy");
  CHECK(d.allowed);
  CHECK(d.warnings.empty());
  CHECK(d.injected.env == std::vector<std::string>{"WORLD_SIZE"});
  // Appended to the existing list, one "/-" each: the user's entries stay where they were.
  CHECK(d.patch() == json::parse(R"([{"op": "add", "path": "/spec/containers/0/env/-",
                                      "value": {"name": "WORLD_SIZE", "value": "4"}}])"));
  CHECK(d.patch_ops == 1);
  const json after = apply_idempotent(pod, w);
  CHECK(env_names(after["spec"]["containers"][0]) ==
        std::vector<std::string>{"MASTER_PORT", "OTHER", "WORLD_SIZE"});
}

TEST_CASE("diff: a container without env gets the whole list in one operation", "[diff]") {
  const json pod = pod_with({{"name", "node"}});
  wants w;
  auto from =
      env_want{"NODE_RANK", "", json{{"fieldRef", {{"fieldPath", "metadata.labels['rank']"}}}}};
  w.containers.push_back(target({literal("A", "1"), from}));
  const auto d = diff_of(pod, w);
  REQUIRE(d.patch_ops == 1);
  const auto op = d.patch()[0];
  CHECK(op["op"] == "add");
  CHECK(op["path"] == "/spec/containers/0/env");
  CHECK(op["value"] == json::parse(R"([{"name": "A", "value": "1"},
      {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['rank']"}}}])"));
  CHECK(d.injected.env == std::vector<std::string>{"A", "NODE_RANK"});
  apply_idempotent(pod, w);
}

TEST_CASE("diff: a user-set env entry that differs is kept, with a warning", "[diff]") {
  const json pod =
      pod_with({{"name", "node"}, {"env", json::array({{{"name", "RANK"}, {"value", "7"}}})}});
  wants w;
  w.containers.push_back(target({literal("RANK", "3")}));
  const auto d = diff_of(pod, w);
  CHECK(d.patch_text.empty());
  CHECK(d.patch_ops == 0);
  CHECK_FALSE(d.mutated());
  CHECK(d.verdict() == outcome::allowed);
  CHECK(d.injected.env.empty());
  CHECK(d.warnings ==
        std::vector<std::string>{"trainenv: kept user-set RANK=7 in container \"node\""});

  // A fieldRef with or without the apiVersion the apiserver defaults (v1) says the same thing.
  const auto field_ref = [](bool with_version) {
    json ref = {{"fieldPath", "metadata.name"}};
    if (with_version) ref["apiVersion"] = "v1";
    return json{{"fieldRef", ref}};
  };
  for (const bool pod_has_version : {false, true}) {
    for (const bool policy_has_version : {false, true}) {
      INFO("pod: " << pod_has_version << ", policy: " << policy_has_version);
      const json user = pod_with(
          {{"name", "node"},
           {"env", json::array({{{"name", "POD"}, {"valueFrom", field_ref(pod_has_version)}}})}});
      wants ref;
      ref.containers.push_back(target({env_want{"POD", "", field_ref(policy_has_version)}}));
      const auto quiet = diff_of(user, ref);
      CHECK(quiet.patch_text.empty());
      CHECK(quiet.warnings.empty());
    }
  }
  // Another field is a disagreement.
  const json other = pod_with(
      {{"name", "node"},
       {"env", json::array({{{"name", "POD"},
                             {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}}})}});
  wants ref;
  ref.containers.push_back(target({env_want{"POD", "", field_ref(false)}}));
  CHECK(diff_of(other, ref).warnings ==
        std::vector<std::string>{"trainenv: kept user-set POD (valueFrom) in container \"node\""});
}

TEST_CASE("diff: a controller's env entry that disagrees is replaced in place", "[diff]") {
  controller_writes trainer;
  trainer.writer = "Kubeflow Trainer";
  trainer.env = {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"};
  const json pod =
      pod_with({{"name", "node"},
                {"env", json::array({{{"name", "USER"}, {"value", "u"}},
                                     {{"name", "PET_NNODES"}, {"value", "2"}},
                                     {{"name", "PET_MASTER_ADDR"}, {"value", "t-node-0-0.t"}}})}});
  wants w;
  auto c = target({literal("PET_NNODES", "4"), literal("PET_MASTER_ADDR", "t-node-0-0.t")});
  c.written = {{1, "PET_NNODES", false}, {2, "PET_MASTER_ADDR", false}};
  w.containers.push_back(c);
  w.writer = &trainer;
  w.owned_env = {"PET_NNODES", "PET_MASTER_ADDR"};
  w.decided_by = "JobSet ns/t";
  const auto d = diff_of(pod, w);
  // PET_MASTER_ADDR agrees: left alone. PET_NNODES is replaced at its own index, not appended.
  CHECK(d.patch() == json::parse(R"([{"op": "replace", "path": "/spec/containers/0/env/1",
                                      "value": {"name": "PET_NNODES", "value": "4"}}])"));
  CHECK(d.injected.env == std::vector<std::string>{"PET_NNODES"});
  CHECK(d.injected.removed_env.empty());
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0] ==
        "trainenv: replaced PET_NNODES=2 with 4 in container \"node\" (Kubeflow Trainer's; "
        "JobSet ns/t)");
  const json after = applied(pod, d);
  CHECK(after["spec"]["containers"][0]["env"][1] == json{{"name", "PET_NNODES"}, {"value", "4"}});
  CHECK(env_names(after["spec"]["containers"][0]) ==
        std::vector<std::string>{"USER", "PET_NNODES", "PET_MASTER_ADDR"});
  // Fed back (the controller's entries are where they were): nothing more to do.
  const auto again = diff_of(after, w);
  CHECK(again.patch_text.empty());
  CHECK(again.warnings.empty());
}

TEST_CASE("diff: controller entries the policy does not want are removed from the last down",
          "[diff]") {
  controller_writes volcano;
  volcano.writer = "Volcano's pytorch plugin";
  volcano.env = {"MASTER_ADDR", "WORLD_SIZE", "RANK"};
  volcano.keep = {"MASTER_ADDR"};
  const json pod = pod_with({{"name", "node"},
                             {"env", json::array({{{"name", "RANK"}, {"value", "1"}},
                                                  {{"name", "MASTER_ADDR"}, {"value", "m"}},
                                                  {{"name", "WORLD_SIZE"}, {"value", "9"}},
                                                  {{"name", "RANK"}, {"value", "5"}}})}});
  wants w;
  auto c = target({});
  // RANK at 0 is the template's; the one at 3 the plugin's duplicate. WORLD_SIZE the plugin's.
  c.written = {{1, "MASTER_ADDR", false}, {2, "WORLD_SIZE", false}, {3, "RANK", true}};
  w.containers.push_back(c);
  w.writer = &volcano;
  w.owned_env = {"MASTER_ADDR", "WORLD_SIZE", "RANK"};
  w.removed_because = "role \"launcher\" does not train";
  const auto d = diff_of(pod, w);
  // MASTER_ADDR is kept (keep), WORLD_SIZE unwanted, the duplicate RANK removed: indexes high to
  // low so that each names the entry read.
  CHECK(d.patch() == json::parse(R"([{"op": "remove", "path": "/spec/containers/0/env/3"},
                                      {"op": "remove", "path": "/spec/containers/0/env/2"}])"));
  CHECK(d.injected.removed_env == std::vector<std::string>{"WORLD_SIZE", "RANK"});
  CHECK(d.warnings == std::vector<std::string>{
                          "trainenv: removed WORLD_SIZE=9 (Volcano's pytorch plugin's) in "
                          "container \"node\": role \"launcher\" does not train",
                          "trainenv: removed RANK=5 (Volcano's pytorch plugin's) in container "
                          "\"node\": the template sets it"});
  const json after = applied(pod, d);
  CHECK(after["spec"]["containers"][0]["env"] ==
        json::parse(R"([{"name": "RANK", "value": "1"}, {"name": "MASTER_ADDR", "value": "m"}])"));
}

TEST_CASE("diff: ports, mounts, volumes, args, annotations and DNS searches apply and settle",
          "[diff]") {
  const json pod =
      pod_with({{"name", "node"},
                {"command", {"torchrun"}},
                {"args", {"--nproc_per_node=8", "train.py"}},
                {"ports", json::array({{{"containerPort", 8080}}})}},
               {{"volumes", json::array({{{"name", "data"}, {"emptyDir", json::object()}}})}});
  wants w;
  auto c = target({literal("A", "1")});
  c.ports = {json{{"containerPort", 8080}, {"protocol", "TCP"}},  // the pod's, TCP by default
             json{{"containerPort", 29500}, {"protocol", "TCP"}, {"name", "master"}}};
  c.mounts = {json{{"name", "hostfile"}, {"mountPath", "/etc/mpi"}}};
  c.args = {"--nproc-per-node=4", "--max-restarts=3"};
  w.containers.push_back(c);
  w.volumes = {json{{"name", "hostfile"}, {"emptyDir", json::object()}},
               json{{"name", "unmounted"}, {"emptyDir", json::object()}}};
  w.annotations = {{"trainenv.io/injected", "test-policy"}};
  w.dns_searches = {"job.ns.svc.cluster.local", "job.ns.svc.cluster.local"};
  const auto d = diff_of(pod, w);
  CHECK(d.injected.ports == std::vector<std::int64_t>{29500});
  CHECK(d.injected.mounts == std::vector<std::string>{"/etc/mpi"});
  // --nproc_per_node=8 is the same flag as --nproc-per-node: kept, with a warning.
  CHECK(d.injected.args == std::vector<std::string>{"--max-restarts=3"});
  // A volume nothing mounts is not added.
  CHECK(d.injected.volumes == std::vector<std::string>{"hostfile"});
  CHECK(d.injected.annotations == std::vector<std::string>{"trainenv.io/injected"});
  CHECK(d.injected.dns_searches == std::vector<std::string>{"job.ns.svc.cluster.local"});
  CHECK(d.warnings == std::vector<std::string>{
                          "trainenv: kept user-set arg --nproc_per_node=8 in container \"node\""});
  const json after = applied(pod, d);
  const auto& container = after["spec"]["containers"][0];
  CHECK(container["ports"].size() == 2);
  CHECK(container["args"] == json({"--nproc_per_node=8", "train.py", "--max-restarts=3"}));
  CHECK(after["spec"]["volumes"].size() == 2);
  CHECK(after["spec"]["dnsConfig"] == json{{"searches", {"job.ns.svc.cluster.local"}}});
  CHECK(after["metadata"]["annotations"] == json{{"trainenv.io/injected", "test-policy"}});

  // Fed back: the user's arg warning stays (it is still the user's), nothing else.
  const auto again = diff_of(after, w);
  CHECK(again.patch_text.empty());
  CHECK(again.warnings == d.warnings);
}

TEST_CASE("diff: a user's port of another number under the wanted name is kept", "[diff]") {
  const json pod =
      pod_with({{"name", "trainer"},
                {"ports", json::array({{{"containerPort", 1234}, {"name", "master"}}})},
                {"env", json::array()}},
               json::object());
  wants w;
  auto c = target({});
  c.ports = {json{{"containerPort", 29500}, {"protocol", "TCP"}, {"name", "master"}}};
  w.containers.push_back(c);
  w.annotations = json::object();
  const auto d = diff_of(pod, w);
  CHECK(d.patch_text.empty());
  CHECK(d.injected.ports.empty());
  CHECK(d.warnings ==
        std::vector<std::string>{"trainenv: kept user-set port 1234 (wanted 29500) in container "
                                 "\"trainer\""});
}

TEST_CASE("diff: an annotation the pod sets otherwise is kept, others added member by member",
          "[diff]") {
  json pod = pod_with({{"name", "node"}});
  pod["metadata"]["annotations"] = {{"a/b", "mine"}};
  wants w;
  w.containers.push_back(target({}));
  w.annotations = {{"a/b", "theirs"}, {"c~d", "new"}};
  const auto d = diff_of(pod, w);
  // Each key escaped as a JSON pointer token: '/' as ~1, '~' as ~0.
  CHECK(d.patch() ==
        json::parse(R"([{"op": "add", "path": "/metadata/annotations/c~0d", "value": "new"}])"));
  CHECK(d.warnings == std::vector<std::string>{"trainenv: kept user-set annotation a/b=mine"});
  const json after = applied(pod, d);
  CHECK(after["metadata"]["annotations"] == json{{"a/b", "mine"}, {"c~d", "new"}});
}

TEST_CASE("make_warning keeps warnings printable, one line and at most 120 characters", "[diff]") {
  CHECK(make_warning("plain text") == "plain text");
  CHECK(make_warning("two\nlines\tand\x7f") == "two?lines?and?");
  CHECK(make_warning("caf\xc3\xa9") == "caf??");
  CHECK(make_warning(std::string(120, 'x')) == std::string(120, 'x'));
  const auto cut = make_warning(std::string(121, 'y'));
  CHECK(cut.size() == 120);
  CHECK(cut == std::string(117, 'y') + "...");
}

}  // namespace diff_tests
