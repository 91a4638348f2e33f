// The job's layout as a value (core/job/layout.hpp): roles in node order, which are out of the
// world, which train and which are nodes, node ranks with the coordinator first, and each pod's
// DNS name by its controller's rule (docs/contract.md §2.2).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "owner_kind_support.hpp"
#include "trainenv/core/job/layout.hpp"

namespace layout_tests {

using namespace trainenv::core;
using nlohmann::json;

owner_kind layout_kind(const std::string& name, const std::string& spec) {
  return trainenv::test::owner_kind_from_spec(name, spec);
}

const owner_kind& jobset_kind() {
  static const owner_kind kind = layout_kind("jobset", R"({"apiGroup": "jobset.x-k8s.io",
      "versions": ["v1alpha2"], "kind": "JobSet", "resource": "jobsets",
      "roles": {"list": "spec.replicatedJobs", "name": "name", "replicas": "replicas",
                "jobSpec": "template.spec", "podTemplate": "template.spec.template"},
      "naming": {"hostname": "${job}-${role}-${jobIndex}-${index}",
                 "subdomain": "spec.network.subdomain", "subdomainDefault": "${job}",
                 "templateSubdomain": "overridden",
                 "dnsHostnames": "spec.network.enableDNSHostnames"},
                 "podLabels": {"job": "jobset.sigs.k8s.io/jobset-name", "uid": "jobset.sigs.k8s.io/jobset-uid", "role": "jobset.sigs.k8s.io/replicatedjob-name", "jobIndex": "jobset.sigs.k8s.io/job-index", "jobs": "jobset.sigs.k8s.io/replicatedjob-replicas"}})");
  return kind;
}

layout_role role(const std::string& name, std::int64_t pods, std::size_t owner_order,
                 std::string step = {}, std::int64_t jobs = 1) {
  layout_role r;
  r.name = name;
  r.entry = name;
  r.pods = pods;
  r.jobs = jobs;
  r.owner_order = owner_order;
  r.step = std::move(step);
  return r;
}

std::vector<std::string> names_of_roles(const job_layout& l) {
  std::vector<std::string> out;
  for (const auto& r : l.roles) out.push_back(r.name);
  return out;
}

std::vector<std::string> node_names(const job_layout& l) {
  std::vector<std::string> out;
  for (const auto i : l.nodes) out.push_back(l.roles[i].name);
  return out;
}

policy unit_policy() {
  policy p;
  p.name = "unit";
  return p;  // trains master, worker and node
}

// A JobSet's layout as its owner gives it: a launcher, an initializer, node and worker roles.
job_layout owner_layout() {
  job_layout l;
  l.source = "JobSet team-a/bert";
  l.roles = {role("launcher", 1, 0), role("dataset-initializer", 1, 1, "dataset-initializer"),
             role("node", 2, 2, "trainer"), role("worker", 3, 3, "trainer")};
  return l;
}

TEST_CASE("layout: roles in node order, initializers and the launcher out of the world",
          "[layout]") {
  auto l = owner_layout();
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  // master, worker, node lead; the others follow in the owner's order.
  CHECK(names_of_roles(l) ==
        std::vector<std::string>{"worker", "node", "launcher", "dataset-initializer"});
  CHECK(node_names(l) == std::vector<std::string>{"worker", "node"});
  CHECK(l.node_count() == 5);
  CHECK(l.training_pods() == 5);
  CHECK(l.no_nodes.empty());
  const auto& init = *l.find("dataset-initializer");
  CHECK_FALSE(init.training);
  CHECK(init.outside ==
        "its templates are step \"dataset-initializer\" (label "
        "trainer.kubeflow.org/trainjob-ancestor-step)");
  const auto& launcher = *l.find("launcher");
  CHECK_FALSE(launcher.training);
  CHECK_FALSE(launcher.node);
  CHECK(launcher.outside.empty());  // in the world, but not a node
  CHECK(l.find("nobody") == nullptr);
  CHECK_FALSE(l.index_of("nobody"));
  // Node ranks: worker's pods first, then node's; none for a role that is not a node.
  CHECK(l.node_rank(*l.index_of("worker"), 0) == 0);
  CHECK(l.node_rank(*l.index_of("worker"), 2) == 2);
  CHECK(l.node_rank(*l.index_of("node"), 0) == 3);
  CHECK(l.node_rank(*l.index_of("node"), 1) == 4);
  CHECK_FALSE(l.node_rank(*l.index_of("launcher"), 0));
}

TEST_CASE("layout: unlabelled roles beside labelled trainers, opted-out and prerequisite roles",
          "[layout]") {
  auto l = owner_layout();
  l.roles.push_back(role("evaluator", 1, 4));
  auto opted = role("metrics", 1, 5, "trainer");
  opted.opted_out = true;
  l.roles.push_back(opted);
  auto first = role("prepare", 1, 6, "trainer");
  first.completes_before = "node";
  l.roles.push_back(first);
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  CHECK(l.find("evaluator")->outside ==
        "its templates do not carry label trainer.kubeflow.org/trainjob-ancestor-step: trainer, "
        "which other roles' do");
  CHECK(l.find("metrics")->outside ==
        "its pod template opts out (annotation trainenv.io/inject: \"false\")");
  CHECK(l.find("prepare")->outside ==
        "it completes before role \"node\" starts (dependsOn, status Complete)");
  CHECK(node_names(l) == std::vector<std::string>{"worker", "node"});

  // Sketched by annotations (not the owner's): only the policy's training roles train.
  job_layout sketch;
  sketch.roles = {role("evaluator", 1, 0), role("node", 2, 1)};
  settle_roles(sketch, unit_policy(), world_rules{}, std::nullopt);
  CHECK(node_names(sketch) == std::vector<std::string>{"node"});
  CHECK(sketch.find("evaluator")->outside.empty());
  CHECK_FALSE(sketch.find("evaluator")->training);
}

TEST_CASE("layout: the coordinator is node rank 0 and the others follow in node order",
          "[layout]") {
  auto l = owner_layout();
  settle_roles(l, unit_policy(), world_rules{true, false}, coordinator_pod{"node", 0, 1});
  const auto node = *l.index_of("node");
  const auto worker = *l.index_of("worker");
  REQUIRE(l.coordinator);
  CHECK(*l.coordinator == std::pair<std::size_t, std::int64_t>(node, 1));
  CHECK(l.coordinator_note.empty());
  CHECK(l.node_rank(node, 1) == 0);
  CHECK(l.node_rank(worker, 0) == 1);
  CHECK(l.node_rank(worker, 2) == 3);
  CHECK(l.node_rank(node, 0) == 4);
  // Every rank once.
  std::vector<std::int64_t> ranks;
  for (std::int64_t i = 0; i < 3; ++i) ranks.push_back(*l.node_rank(worker, i));
  for (std::int64_t i = 0; i < 2; ++i) ranks.push_back(*l.node_rank(node, i));
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<std::int64_t>{0, 1, 2, 3, 4});

  // One that is not in the world, or no such pod: a note, and the first node is the master.
  settle_roles(l, unit_policy(), world_rules{true, false},
               coordinator_pod{"dataset-initializer", 0, 0});
  CHECK_FALSE(l.coordinator);
  CHECK(l.coordinator_note ==
        "trainenv: the coordinator \"dataset-initializer\" Job 0 pod 0 is not in the world (its "
        "templates are step \"dataset-initializer\" (label "
        "trainer.kubeflow.org/trainjob-ancestor-step)); the master is the first node");
  CHECK(l.node_rank(worker, 0) == 0);
  settle_roles(l, unit_policy(), world_rules{true, false}, coordinator_pod{"node", 0, 5});
  CHECK(l.coordinator_note ==
        "trainenv: the coordinator \"node\" Job 0 pod 5 is not in the world "
        "(no such pod); the master is the first node");
  settle_roles(l, unit_policy(), world_rules{true, false}, coordinator_pod{"ghost", 0, 0});
  CHECK(l.coordinator_note ==
        "trainenv: the coordinator \"ghost\" Job 0 pod 0 is not a role of "
        "JobSet team-a/bert; the master is the first node");
}

TEST_CASE("layout: a launcher run as a node is last in node order, first in its hostfile",
          "[layout]") {
  job_layout l;
  l.source = "JobSet team-a/mpi";
  l.launcher_is_node = true;
  l.roles = {role("launcher", 1, 0), role("node", 4, 1, {}, 2)};
  auto p = unit_policy();
  p.every_role_trains = true;
  p.training_roles.clear();
  settle_roles(l, p, world_rules{true, false}, std::nullopt);
  CHECK(node_names(l) == std::vector<std::string>{"node", "launcher"});
  CHECK(l.node_count() == 5);
  CHECK(l.node_rank(*l.index_of("launcher"), 0) == 4);

  set_naming(l, jobset_kind(), nullptr, "mpi", nullptr, false);
  CHECK(l.subdomain == "mpi");  // a bare pod's: the default
  const auto groups = l.host_groups();
  REQUIRE(groups);
  REQUIRE(groups->size() == 2);
  // The owner's order: the launcher's line first, as Trainer's MPI plugin writes it.
  CHECK((*groups)[0].name(0) == "mpi-launcher-0-0.mpi");
  CHECK((*groups)[1].pods() == 4);
  CHECK((*groups)[1].name(3) == "mpi-node-1-1.mpi");
  CHECK(l.launcher_subdomain().value() == "mpi");
}

TEST_CASE("layout: names by JobSet's rule, from the owner's subdomain or its default", "[layout]") {
  job_layout l;
  l.source = "JobSet team-a/bert";
  l.roles = {role("node", 4, 0, {}, 2)};
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  const json owner = json::parse(R"({"metadata": {"name": "bert"},
                                     "spec": {"network": {"subdomain": "svc"}}})");
  set_naming(l, jobset_kind(), &owner, "bert", nullptr, true);
  CHECK(l.naming_kind == "JobSet");
  CHECK(l.unnamed.empty());
  CHECK(l.subdomain == "svc");
  const auto group = l.names_of(0);
  REQUIRE(group);
  CHECK(group->prefix == "bert-node-");
  CHECK(group->jobs == 2);
  CHECK(group->middle == "-");
  CHECK(group->pods_per_job == 2);
  CHECK(group->suffix == ".svc");
  // Job-major: position 3 is Job 1's pod 1.
  CHECK(l.dns_name(0, 0).value() == "bert-node-0-0.svc");
  CHECK(l.dns_name(0, 2).value() == "bert-node-1-0.svc");
  CHECK(l.dns_name(0, 3).value() == "bert-node-1-1.svc");
  CHECK(l.rank0_name().value() == "bert-node-0-0.svc");
  CHECK(l.master().value() == "bert-node-0-0.svc");

  // No subdomain on the owner: the default, the JobSet's name.
  const json plain = json::parse(R"({"metadata": {"name": "bert"}, "spec": {}})");
  job_layout d = l;
  d.subdomain.clear();
  set_naming(d, jobset_kind(), &plain, "bert", nullptr, true);
  CHECK(d.dns_name(0, 1).value() == "bert-node-0-1.bert");

  // A role whose Job count only its unread owner knows: named only within its first Job.
  job_layout partial = l;
  partial.roles[0].jobs_known = false;
  CHECK(partial.dns_name(0, 1).value() == "bert-node-0-1.svc");
  const auto past = partial.dns_name(0, 2);
  REQUIRE_FALSE(past);
  CHECK(past.message() ==
        "trainenv: the pods of role \"node\" past its first Job have names only "
        "JobSet team-a/bert's owner can tell");
  const auto groups = partial.host_groups();
  REQUIRE_FALSE(groups);
  CHECK(groups.message() ==
        "trainenv: role \"node\" runs 4 pods in Jobs whose count only JobSet "
        "team-a/bert's owner can tell");
}

TEST_CASE("layout: DNS hostnames off leave only the templates' subdomains", "[layout]") {
  job_layout l;
  l.source = "JobSet team-a/bert";
  l.roles = {role("node", 2, 0)};
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  const json owner = json::parse(R"({"metadata": {"name": "bert"},
      "spec": {"network": {"enableDNSHostnames": false, "subdomain": "ignored"}}})");
  set_naming(l, jobset_kind(), &owner, "bert", nullptr, true);
  CHECK(l.templates_only == "JobSet bert sets spec.network.enableDNSHostnames: false");
  const auto none = l.dns_name(0, 0);
  REQUIRE_FALSE(none);
  CHECK(none.message() ==
        "trainenv: the pods of role \"node\" of JobSet bert have no DNS names: "
        "JobSet bert sets spec.network.enableDNSHostnames: false, and the "
        "role's pod template sets no spec.subdomain; set one, with a headless "
        "Service of that name");
  CHECK(l.master().message() == none.message());  // two pods: no localhost
  const json tmpl = json::parse(R"({"spec": {"subdomain": "mine"}})");
  l.roles[0].pod_template = &tmpl;
  CHECK(l.dns_name(0, 1).value() == "bert-node-0-1.mine");
}

TEST_CASE("layout: a subdomain that is no DNS label names no pod", "[layout]") {
  // It would go into every host name and the pods' DNS search domain (issue 37: an owner's
  // garbage subdomain was written into MASTER_ADDR).
  job_layout l;
  l.source = "JobSet team-a/bert";
  l.roles = {role("node", 2, 0)};
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  const json owner = json::parse(R"({"metadata": {"name": "bert"},
                                     "spec": {"network": {"subdomain": "svc\nx"}}})");
  set_naming(l, jobset_kind(), &owner, "bert", nullptr, true);
  const auto bad = l.subdomain_of(0);
  REQUIRE_FALSE(bad);
  CHECK(bad.message() ==
        "trainenv: the pods of role \"node\" would have the subdomain \"svc\\nx\", not a DNS "
        "label (at most 63 of a-z, 0-9 and '-')");
  CHECK(l.dns_name(0, 1).message() == bad.message());
  CHECK(l.master().message() == bad.message());
  CHECK(l.host_groups().message() == bad.message());

  // From the role's pod template (DNS hostnames off): the same check; 64 letters are too many.
  const json off = json::parse(R"({"metadata": {"name": "bert"},
      "spec": {"network": {"enableDNSHostnames": false}}})");
  job_layout t = l;
  t.subdomain.clear();
  set_naming(t, jobset_kind(), &off, "bert", nullptr, true);
  const json tmpl = {{"spec", {{"subdomain", std::string(64, 'a')}}}};
  t.roles[0].pod_template = &tmpl;
  REQUIRE_FALSE(t.dns_name(0, 0));
  const json fine = {{"spec", {{"subdomain", std::string(63, 'a')}}}};
  t.roles[0].pod_template = &fine;
  CHECK(t.dns_name(0, 0).value() == "bert-node-0-0." + std::string(63, 'a'));
}

TEST_CASE("layout: pods without names, and a world of one that needs none", "[layout]") {
  const auto trainjob = layout_kind("trainjob", R"({"apiGroup": "trainer.kubeflow.org",
      "versions": ["v1alpha1"], "kind": "TrainJob", "resource": "trainjobs",
      "runtimeRef": "spec.runtimeRef"})");
  job_layout one;
  one.roles = {role("node", 1, 0)};
  settle_roles(one, unit_policy(), world_rules{}, std::nullopt);
  set_naming(one, trainjob, nullptr, "t", nullptr, true);
  CHECK(one.unnamed ==
        "trainenv: trainenv has no naming rule for the pods of a TrainJob (owner "
        "kind \"trainjob\" has no naming)");
  CHECK_FALSE(one.rank0_name());
  CHECK(one.master().value() == "localhost");

  job_layout two = one;
  two.roles[0].pods = 2;
  CHECK(two.master().message() == one.unnamed);

  // A JobSet pod whose owner was not read and that has no subdomain: JobSet named none.
  job_layout unread;
  unread.roles = {role("node", 2, 0)};
  settle_roles(unread, unit_policy(), world_rules{}, std::nullopt);
  set_naming(unread, jobset_kind(), nullptr, "bert", nullptr, true);
  CHECK(unread.unnamed ==
        "trainenv: the pod has no spec.subdomain, so its JobSet bert names no "
        "pod");
  // With the subdomain the controller wrote into the pod: that one.
  job_layout told;
  told.roles = unread.roles;
  const std::string_view subdomain = "written";
  set_naming(told, jobset_kind(), nullptr, "bert", &subdomain, true);
  CHECK(told.unnamed.empty());
  CHECK(told.dns_name(0, 1).value() == "bert-node-0-1.written");

  // Volcano's svc plugin names pods only when the job has one of its plugins.
  const auto volcano = layout_kind("volcano-job", R"({"apiGroup": "batch.volcano.sh",
      "versions": ["v1alpha1"], "kind": "Job", "resource": "jobs",
      "roles": {"list": "spec.tasks", "name": "name", "replicas": "replicas",
                "podTemplate": "template"},
      "naming": {"hostname": "${job}-${role}-${index}", "subdomainDefault": "${job}",
                 "templateSubdomain": "first",
                 "requiresAny": ["spec.plugins.svc", "spec.plugins.pytorch"]},
                 "podLabels": {"job": "volcano.sh/job-name", "role": "volcano.sh/task-spec", "index": "volcano.sh/task-index"}})");
  job_layout vj;
  vj.roles = {role("worker", 2, 0)};
  settle_roles(vj, unit_policy(), world_rules{true, false}, std::nullopt);
  const json without = json::parse(R"({"spec": {"plugins": {"env": []}}})");
  set_naming(vj, volcano, &without, "v", nullptr, true);
  CHECK(vj.unnamed ==
        "trainenv: the pods of Job v have no DNS names: it sets none of "
        "spec.plugins.svc, spec.plugins.pytorch (the controller names its pods only "
        "with one of them)");
  job_layout with_svc;
  with_svc.roles = vj.roles;
  const json with = json::parse(R"({"spec": {"plugins": {"svc": []}}})");
  set_naming(with_svc, volcano, &with, "v", nullptr, true);
  CHECK(with_svc.dns_name(0, 1).value() == "v-worker-1.v");
}

TEST_CASE("layout: a job with no pod in a node role says so, and host_group names", "[layout]") {
  job_layout l;
  l.source = "JobSet team-a/idle";
  l.roles = {role("launcher", 1, 0), role("node", 0, 1)};
  settle_roles(l, unit_policy(), world_rules{true, false}, std::nullopt);
  CHECK(l.node_count() == 0);
  CHECK(l.no_nodes ==
        "trainenv: JobSet team-a/idle runs no pod in a node role (it has "
        "node=0, launcher=1; policy \"unit\" trains every role in the world): the "
        "job has nothing to train on, and no master");
  CHECK(l.rank0_name().message() == l.no_nodes);

  host_group numbered{"a-", 3, "-", 2, ".s"};
  CHECK(numbered.pods() == 6);
  CHECK(numbered.name(0) == "a-0-0.s");
  CHECK(numbered.name(5) == "a-2-1.s");
  host_group single{"b-", std::nullopt, "", 3, ".t"};
  CHECK(single.pods() == 3);
  CHECK(single.name(2) == "b-2.t");
}

}  // namespace layout_tests
