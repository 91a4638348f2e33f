// Owner objects as values: references, API paths, and the role counts read from each layout.
#include <catch2/catch.hpp>

#include <vector>

#include "trainenv/core/policy/owners.hpp"

namespace {

using namespace trainenv::core;
using nlohmann::json;

role_layout jobset_layout() {
  role_layout l;
  l.kind = role_layout::shape::list;
  l.entries = {"spec", "replicatedJobs"};
  l.name_member = "name";
  l.replicas_member = "replicas";
  l.job_spec = {"template", "spec"};
  l.pod_template = {"template", "spec", "template"};
  return l;
}

owner_kind kind_of(std::string group, std::string kind, std::string resource, role_layout roles) {
  owner_kind k;
  k.group = std::move(group);
  k.kind = std::move(kind);
  k.resource = std::move(resource);
  k.roles = std::move(roles);
  return k;
}

json replicated_job(const std::string& name, int replicas, int parallelism, int completions) {
  return {{"name", name},
          {"replicas", replicas},
          {"template",
           {{"spec",
             {{"parallelism", parallelism},
              {"completions", completions},
              {"template", {{"spec", {{"containers", json::array({{{"name", name}}})}}}}}}}}}};
}

const owner_ref jobset_ref{"jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "bert", "u-1"};

}  // namespace

TEST_CASE("controller_of reads the controlling ownerReference", "[owners]") {
  const auto pod = json::parse(R"({"metadata": {"ownerReferences": [
      {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"},
      {"apiVersion": "batch/v1", "kind": "Job", "name": "bert-node-0", "uid": "44a4",
       "controller": true, "blockOwnerDeletion": true}]}})");
  const auto ref = controller_of(pod, "team-a");
  REQUIRE(ref);
  CHECK(*ref == owner_ref{"batch/v1", "Job", "team-a", "bert-node-0", "44a4"});
  CHECK(ref->group() == "batch");
  CHECK(ref->display() == "Job team-a/bert-node-0");
}

TEST_CASE("controller_of finds nothing without a controller or with a partial reference",
          "[owners]") {
  CHECK_FALSE(controller_of(json::object(), "ns"));
  CHECK_FALSE(controller_of(json::parse(R"({"metadata": {"ownerReferences": [
      {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]}})"),
                            "ns"));
  CHECK_FALSE(controller_of(json::parse(R"({"metadata": {"ownerReferences": [
      {"apiVersion": "batch/v1", "kind": "Job", "controller": true, "uid": "u"}]}})"),
                            "ns"));
  CHECK_FALSE(controller_of(json::parse(R"({"metadata": {"ownerReferences": "Job"}})"), "ns"));
  // A controller without a uid is still the pod's controller, with an empty uid, which the walk
  // refuses to read (core::unreadable_reference): never taken for an ownerless pod.
  const auto no_uid = controller_of(json::parse(R"({"metadata": {"ownerReferences": [
      {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": true}]}})"),
                                    "ns");
  REQUIRE(no_uid);
  CHECK(no_uid->uid.empty());
}

TEST_CASE("api_path builds the GET path of namespaced, cluster-scoped and core objects",
          "[owners]") {
  auto job = kind_of("batch", "Job", "jobs", {});
  CHECK(job.api_path({"batch/v1", "Job", "team-a", "bert-node-0", "u"}) ==
        "/apis/batch/v1/namespaces/team-a/jobs/bert-node-0");
  auto runtime =
      kind_of("trainer.kubeflow.org", "ClusterTrainingRuntime", "clustertrainingruntimes", {});
  runtime.cluster_scoped = true;
  CHECK(runtime.api_path({"trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "",
                          "torch-distributed", ""}) ==
        "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed");
  auto pod = kind_of("", "Pod", "pods", {});
  CHECK(pod.api_path({"v1", "Pod", "ns", "p", ""}) == "/api/v1/namespaces/ns/pods/p");
}

TEST_CASE("job_spec_pods is min(parallelism, completions) with Kubernetes' defaults", "[owners]") {
  CHECK(*job_spec_pods(json::object(), "spec") == 1);
  CHECK(*job_spec_pods({{"parallelism", 3}, {"completions", 3}}, "spec") == 3);
  CHECK(*job_spec_pods({{"parallelism", 4}, {"completions", 2}}, "spec") == 2);
  CHECK(*job_spec_pods({{"parallelism", 5}}, "spec") == 5);
  CHECK(*job_spec_pods({{"completions", 4}}, "spec") == 1);
  CHECK(*job_spec_pods({{"parallelism", 0}, {"completions", 4}}, "spec") == 0);
  const auto bad = job_spec_pods({{"parallelism", "3"}}, "Job team-a/x spec");
  REQUIRE_FALSE(bad);
  CHECK(bad.message() ==
        "Job team-a/x spec.parallelism is \"3\"; expected a whole number from 0 to 1000000");
  CHECK_FALSE(job_spec_pods({{"completions", -1}}, "spec"));
  CHECK_FALSE(job_spec_pods(json::array(), "spec"));
}

TEST_CASE("a JobSet gives every replicatedJob: replicas times the pods of one Job", "[owners]") {
  const json jobset = {
      {"spec",
       {{"replicatedJobs", json::array({replicated_job("dataset-initializer", 1, 1, 1),
                                        replicated_job("node", 2, 3, 3)})}}}};
  const auto roles = read_roles(kind_of("jobset.x-k8s.io", "JobSet", "jobsets", jobset_layout()),
                                jobset, jobset_ref, "node");
  REQUIRE(roles);
  REQUIRE(roles->size() == 2);
  CHECK((*roles)[0].role == "dataset-initializer");
  CHECK((*roles)[0].pods == 1);
  CHECK((*roles)[1].role == "node");
  CHECK((*roles)[1].pods == 6);
  CHECK((*roles)[1].pods_per_job == 3);
  CHECK((*roles)[1].source == "JobSet team-a/bert spec.replicatedJobs[node]");
  REQUIRE((*roles)[1].pod_template != nullptr);
  CHECK((*(*roles)[1].pod_template)["spec"]["containers"][0]["name"] == "node");
}

TEST_CASE("a Volcano Job gives its tasks' replicas", "[owners]") {
  role_layout tasks;
  tasks.kind = role_layout::shape::list;
  tasks.entries = {"spec", "tasks"};
  tasks.name_member = "name";
  tasks.replicas_member = "replicas";
  tasks.pod_template = {"template"};
  const json job = json::parse(R"({"spec": {"tasks": [
      {"name": "master", "replicas": 1, "template": {}},
      {"name": "worker", "replicas": 2, "template": {}},
      {"name": "evaluator", "template": {}}]}})");
  const auto roles = read_roles(kind_of("batch.volcano.sh", "Job", "jobs", tasks), job,
                                {"batch.volcano.sh/v1alpha1", "Job", "team-a", "mnist", "u"}, "x");
  REQUIRE(roles);
  REQUIRE(roles->size() == 3);
  CHECK((*roles)[1].role == "worker");
  CHECK((*roles)[1].pods == 2);
  CHECK((*roles)[2].pods == 1);  // replicas absent: one
  CHECK((*roles)[0].source == "Job team-a/mnist spec.tasks[master]");
}

TEST_CASE("a replica-spec mapping names roles by its keys, lower-cased", "[owners]") {
  role_layout specs;
  specs.kind = role_layout::shape::map;
  specs.entries = {"spec", "pytorchReplicaSpecs"};
  specs.replicas_member = "replicas";
  specs.pod_template = {"template"};
  const json job = json::parse(R"({"spec": {"pytorchReplicaSpecs": {
      "Master": {"replicas": 1, "template": {}}, "Worker": {"replicas": 3, "template": {}}}}})");
  const auto roles = read_roles(kind_of("kubeflow.org", "PyTorchJob", "pytorchjobs", specs), job,
                                {"kubeflow.org/v1", "PyTorchJob", "ns", "p", "u"}, "x");
  REQUIRE(roles);
  REQUIRE(roles->size() == 2);
  CHECK((*roles)[0].role == "master");
  CHECK((*roles)[1].role == "worker");
  CHECK((*roles)[1].pods == 3);
  CHECK((*roles)[1].source == "PyTorchJob ns/p spec.pytorchReplicaSpecs.Worker");
}

TEST_CASE("a plain Job gives the pod's own role its pods", "[owners]") {
  role_layout own;
  own.job_spec = {"spec"};
  own.pod_template = {"spec", "template"};
  const json job = {
      {"spec", {{"parallelism", 4}, {"completions", 4}, {"template", json::object()}}}};
  const auto roles = read_roles(kind_of("batch", "Job", "jobs", own), job,
                                {"batch/v1", "Job", "ns", "train", "u"}, "worker");
  REQUIRE(roles);
  REQUIRE(roles->size() == 1);
  CHECK((*roles)[0].role == "worker");
  CHECK((*roles)[0].pods == 4);
  CHECK((*roles)[0].source == "Job ns/train spec");
}

TEST_CASE("malformed owner objects are refused with the place named", "[owners]") {
  const auto jobset_kind = kind_of("jobset.x-k8s.io", "JobSet", "jobsets", jobset_layout());
  const auto read = [&](const json& object) {
    return read_roles(jobset_kind, object, jobset_ref, "node");
  };
  CHECK(read(json::object()).message() == "JobSet team-a/bert has no list spec.replicatedJobs");
  CHECK(read({{"spec", {{"replicatedJobs", json::array({json::object()})}}}}).message() ==
        "JobSet team-a/bert spec.replicatedJobs[0] has no name");
  auto bad_replicas = replicated_job("node", 1, 1, 1);
  bad_replicas["replicas"] = "two";
  CHECK(read({{"spec", {{"replicatedJobs", json::array({bad_replicas})}}}}).message() ==
        "JobSet team-a/bert spec.replicatedJobs[node].replicas is \"two\"; expected a whole "
        "number from 0 to 1000000");
  CHECK(read({{"spec",
               {{"replicatedJobs", json::array({replicated_job("node", 1, 1, 1),
                                                replicated_job("node", 1, 1, 1)})}}}})
            .message() == "JobSet team-a/bert names role \"node\" twice");
  // 1,000 Jobs of 2,000 pods: over the bound, refused rather than believed.
  CHECK_FALSE(read(
      {{"spec", {{"replicatedJobs", json::array({replicated_job("node", 1000, 2000, 2000)})}}}}));
  auto no_template = replicated_job("node", 1, 1, 1);
  no_template.erase("template");
  CHECK(read({{"spec", {{"replicatedJobs", json::array({no_template})}}}}).message() ==
        "JobSet team-a/bert spec.replicatedJobs[node] has no template.spec");
  auto trainjob = kind_of("trainer.kubeflow.org", "TrainJob", "trainjobs", {});
  trainjob.roles.reset();
  CHECK(read_roles(trainjob, json::object(),
                   {"trainer.kubeflow.org/v1alpha1", "TrainJob", "team-a", "bert", "u"}, "node")
            .message() == "TrainJob team-a/bert gives no pod counts");
}

TEST_CASE("an OwnerKind document parses into its layout", "[owners]") {
  const auto kind = parse_owner_kind(json::parse(R"({
      "apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind", "metadata": {"name": "jobset"},
      "spec": {"apiGroup": "jobset.x-k8s.io", "versions": ["v1alpha2"], "kind": "JobSet",
               "resource": "jobsets",
               "roles": {"list": "spec.replicatedJobs", "name": "name", "replicas": "replicas",
                         "jobSpec": "template.spec", "podTemplate": "template.spec.template"}}})"),
                                     "owners.yaml");
  REQUIRE(kind);
  CHECK(kind->name == "jobset");
  CHECK(kind->group == "jobset.x-k8s.io");
  CHECK(kind->versions == std::vector<std::string>{"v1alpha2"});
  REQUIRE(kind->roles);
  CHECK(kind->roles->kind == role_layout::shape::list);
  CHECK(kind->roles->entries == member_path{"spec", "replicatedJobs"});
  CHECK(kind->roles->job_spec == member_path{"template", "spec"});
  CHECK(kind->roles->pod_template == member_path{"template", "spec", "template"});
  CHECK_FALSE(kind->cluster_scoped);

  const auto own = parse_owner_kind(json::parse(R"({
      "apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind", "metadata": {"name": "job"},
      "spec": {"apiGroup": "batch", "versions": ["v1"], "kind": "Job", "resource": "jobs",
               "roles": {"own": {"jobSpec": "spec", "podTemplate": "spec.template"}}}})"),
                                    "owners.yaml");
  REQUIRE(own);
  CHECK(own->roles->kind == role_layout::shape::own);
  CHECK(own->roles->job_spec == member_path{"spec"});
}

TEST_CASE("a bad OwnerKind document is refused naming the field", "[owners]") {
  const auto parse = [](const std::string& spec) {
    return parse_owner_kind(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
        "kind": "OwnerKind", "metadata": {"name": "x"}, "spec": )" +
                                        spec + "}"),
                            "o.yaml");
  };
  const std::string head = R"("versions": ["v1"], "kind": "Job", "resource": "jobs")";
  CHECK(parse("{" + head + R"(, "rolez": {}})").message() ==
        "o.yaml: spec: unknown field \"rolez\"; did you mean \"roles\"?");
  CHECK(parse(R"({"kind": "Job", "resource": "jobs", "framework": true})").message() ==
        "o.yaml: spec.versions: must be a non-empty list, e.g. [v1]");
  CHECK(parse("{" + head + "}").message() ==
        "o.yaml: spec: gives nothing: add roles (where the pod counts sit), runtimeRef or "
        "framework: true");
  CHECK(parse("{" + head + R"(, "roles": {"list": "spec.tasks", "map": "spec.x"}})").message() ==
        "o.yaml: spec.roles: needs exactly one of own, list or map");
  CHECK(parse("{" + head + R"(, "roles": {"list": "spec.tasks", "podTemplate": "template"}})")
            .message() == "o.yaml: spec.roles.name: missing");
  CHECK(parse("{" + head + R"(, "roles": {"list": "spec.tasks", "name": "name"}})").message() ==
        "o.yaml: spec.roles.podTemplate: missing: where the role's pod template sits, e.g. "
        "template");
  CHECK(parse("{" + head + R"(, "roles": {"own": {"jobSpec": "spec"}, "name": "n"}})").message() ==
        "o.yaml: spec.roles: with own, the fields go inside own");
  CHECK(parse(R"({"versions": ["v1"], "kind": "Job", "resource": "Jobs", "framework": true})")
            .message() ==
        "o.yaml: spec.resource: \"Jobs\" is not a resource name; write the plural, lower-case, "
        "e.g. jobs");
  CHECK(parse_owner_kind(json::parse(R"({"apiVersion": "v1", "kind": "OwnerKind"})"), "o.yaml")
            .message() == "o.yaml: apiVersion: must be trainenv.io/v1alpha1");
}

TEST_CASE("the kind set finds a kind by group, version and kind, and refuses a double claim",
          "[owners]") {
  std::vector<owner_kind> kinds = {kind_of("batch", "Job", "jobs", {}),
                                   kind_of("batch.volcano.sh", "Job", "jobs", {})};
  kinds[0].versions = {"v1"};
  kinds[1].versions = {"v1alpha1"};
  const auto set = owner_kind_set::build(kinds);
  REQUIRE(set);
  CHECK(set->find("batch/v1", "Job") == &set->all()[0]);
  CHECK(set->find("batch.volcano.sh/v1alpha1", "Job") == &set->all()[1]);
  CHECK(set->find("batch/v2", "Job") == nullptr);
  CHECK(set->find("v1", "Job") == nullptr);
  kinds.push_back(kinds[0]);
  kinds.back().name = "again";
  CHECK_FALSE(owner_kind_set::build(kinds));
}

TEST_CASE("owner values find fetched objects and keep a uid mismatch as a failure", "[owners]") {
  owner_values values;
  values.add({"batch/v1", "Job", "ns", "a", "uid-a"},
             json::parse(R"({"metadata": {"name": "a", "uid": "uid-a"}})"));
  values.add({"batch/v1", "Job", "ns", "b", "uid-b"},
             json::parse(R"({"metadata": {"name": "b", "uid": "uid-new"}})"));
  values.add_failure({"jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "s", "u"},
                     lookup_failure::forbidden, "jobsets is forbidden");
  const auto* a = values.find({"batch/v1", "Job", "ns", "a", "uid-a"});
  REQUIRE(a != nullptr);
  CHECK_FALSE(a->failure);
  const auto* b = values.find({"batch/v1", "Job", "ns", "b", "uid-b"});
  REQUIRE(b != nullptr);
  REQUIRE(b->failure);
  CHECK(*b->failure == lookup_failure::uid_mismatch);
  CHECK(b->detail == "its metadata.uid is not the reference's");
  const auto* s = values.find({"jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "s", "u"});
  REQUIRE(s != nullptr);
  CHECK(*s->failure == lookup_failure::forbidden);
  CHECK(values.find({"batch/v1", "Job", "other", "a", ""}) == nullptr);
  CHECK(failure_name(lookup_failure::forbidden) == "forbidden (403)");
}

TEST_CASE("owner values take an object at hand as if it had been fetched", "[owners]") {
  std::vector<std::string> asked;
  const auto job = std::make_shared<const owner_object>(
      json::parse(R"({"metadata": {"name": "a", "uid": "uid-a"}})"));
  owner_values values([&](const owner_ref& ref) -> std::shared_ptr<const owner_object> {
    asked.push_back(ref.name);
    return ref.name == "a" || ref.name == "stale" ? job : nullptr;
  });
  const owner_ref a{"batch/v1", "Job", "ns", "a", "uid-a"};
  const auto* found = values.find(a);
  REQUIRE(found != nullptr);
  CHECK_FALSE(found->failure);
  CHECK(found->fetched == job);    // shared, not copied
  CHECK(values.find(a) == found);  // recorded: asked once
  CHECK(values.all().size() == 1);
  // Not at hand: the walk must name it, and the shell fetches it.
  CHECK(values.find({"batch/v1", "Job", "ns", "b", "uid-b"}) == nullptr);
  CHECK(values.all().size() == 1);
  // At hand but another uid: the same uid check as add().
  const auto* stale = values.find({"batch/v1", "Job", "ns", "stale", "uid-stale"});
  REQUIRE(stale != nullptr);
  REQUIRE(stale->failure);
  CHECK(*stale->failure == lookup_failure::uid_mismatch);
  CHECK(asked == std::vector<std::string>{"a", "b", "stale"});
}

TEST_CASE("an OwnerKind's naming, replicas default, default policy and wiredBy parse",
          "[owners][naming]") {
  const auto kind = parse_owner_kind(json::parse(R"({
      "apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind", "metadata": {"name": "vc"},
      "spec": {"apiGroup": "batch.volcano.sh", "versions": ["v1alpha1"], "kind": "Job",
               "resource": "jobs",
               "roles": {"list": "spec.tasks", "name": "name", "replicas": "replicas",
                         "replicasDefault": 0, "podTemplate": "template"},
               "naming": {"hostname": "${job}-${role}-${index}", "subdomainDefault": "${job}"},
                          "podLabels": {"job": "volcano.sh/job-name", "role": "volcano.sh/task-spec", "index": "volcano.sh/task-index"},
               "defaultPolicy": "volcano-pytorch"}})"),
                                     "owners.yaml");
  REQUIRE(kind);
  CHECK(kind->roles->replicas_default == 0);
  REQUIRE(kind->naming);
  CHECK(kind->naming->hostname.source() == "${job}-${role}-${index}");
  CHECK(kind->labels.job == "volcano.sh/job-name");
  CHECK(kind->labels.role == "volcano.sh/task-spec");
  CHECK(kind->labels.index == "volcano.sh/task-index");
  CHECK(kind->default_policy == "volcano-pytorch");
  // A task without replicas counts none (Volcano omits a zero).
  const auto roles = read_roles(*kind, json::parse(R"({"spec": {"tasks": [
      {"name": "master", "replicas": 1, "template": {}}, {"name": "standby", "template": {}}]}})"),
                                {"batch.volcano.sh/v1alpha1", "Job", "a", "b", "u"}, "x");
  REQUIRE(roles);
  CHECK((*roles)[1].pods == 0);

  const auto wired = parse_owner_kind(json::parse(R"({
      "apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind", "metadata": {"name": "tfjob"},
      "spec": {"apiGroup": "kubeflow.org", "versions": ["v1"], "kind": "TFJob",
               "wiredBy": "Kubeflow's training operator"}})"),
                                      "owners.yaml");
  REQUIRE(wired);
  CHECK(wired->wired_by == "Kubeflow's training operator");
  CHECK(wired->resource.empty());  // never read
}

TEST_CASE("a list entry without a name takes nameDefault over its position", "[owners]") {
  // Volcano's admission names a task without a name "default<i>" (its mutateSpec), and the
  // controller names its pods with it: tj-default0-0, tj-default1-0, ...
  const auto parse = [](const std::string& roles) {
    return parse_owner_kind(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
        "kind": "OwnerKind", "metadata": {"name": "vc"}, "spec": {"apiGroup": "batch.volcano.sh",
        "versions": ["v1alpha1"], "kind": "Job", "resource": "jobs", "roles": )" +
                                        roles + "}}"),
                            "o.yaml");
  };
  const auto kind = parse(R"({"list": "spec.tasks", "name": "name", "nameDefault":
      "default${index}", "replicas": "replicas", "replicasDefault": 0, "podTemplate": "template"})");
  REQUIRE(kind);
  const owner_ref ref{"batch.volcano.sh/v1alpha1", "Job", "team-a", "tj", "u"};
  const auto roles = read_roles(*kind, json::parse(R"({"spec": {"tasks": [
      {"replicas": 1, "template": {}}, {"name": "worker", "replicas": 2, "template": {}},
      {"name": "", "replicas": 3, "template": {}}]}})"),
                                ref, "x");
  REQUIRE(roles);
  REQUIRE(roles->size() == 3);
  CHECK((*roles)[0].role == "default0");
  CHECK((*roles)[0].source == "Job team-a/tj spec.tasks[default0]");
  CHECK((*roles)[1].role == "worker");
  CHECK((*roles)[2].role == "default2");
  CHECK((*roles)[2].pods == 3);
  // A default that collides with a named entry is the same role twice, as Volcano's own
  // validation refuses it.
  CHECK(read_roles(*kind, json::parse(R"({"spec": {"tasks": [{"replicas": 1, "template": {}},
      {"name": "default0", "replicas": 1, "template": {}}]}})"),
                   ref, "x")
            .message() == "Job team-a/tj names role \"default0\" twice");

  // Without nameDefault an unnamed entry is refused, naming it.
  const auto strict = parse(R"({"list": "spec.tasks", "name": "name", "podTemplate": "template"})");
  REQUIRE(strict);
  CHECK(read_roles(*strict, json::parse(R"({"spec": {"tasks": [{"template": {}}]}})"), ref, "x")
            .message() == "Job team-a/tj spec.tasks[0] has no name");

  // It must use ${index} and nothing else, and only with list.
  CHECK(parse(R"({"list": "spec.tasks", "name": "name", "nameDefault": "default",
      "podTemplate": "template"})")
            .message() ==
        "o.yaml: spec.roles.nameDefault: must use ${index} and nothing else (e.g. "
        "\"default${index}\")");
  CHECK(parse(R"({"list": "spec.tasks", "name": "name", "nameDefault": "${job}-${index}",
      "podTemplate": "template"})")
            .message() ==
        "o.yaml: spec.roles.nameDefault: must use ${index} and nothing else (e.g. "
        "\"default${index}\")");
  CHECK(parse(R"({"map": "spec.replicaSpecs", "nameDefault": "r${index}",
      "podTemplate": "template"})")
            .message() ==
        "o.yaml: spec.roles.nameDefault: not used with map: the keys name the roles");
}

TEST_CASE("a template's trainenv.io/role names the entry's role, its pods keep the entry's name",
          "[owners]") {
  // Volcano's own MPI examples call their tasks mpimaster and mpiworker; the user labels the
  // launcher's template, as SPEC §2.2 says, and its pods are still <job>-mpimaster-<i>.
  const auto kind = parse_owner_kind(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
      "kind": "OwnerKind", "metadata": {"name": "vc"}, "spec": {"apiGroup": "batch.volcano.sh",
      "versions": ["v1alpha1"], "kind": "Job", "resource": "jobs", "roles": {"list": "spec.tasks",
      "name": "name", "replicas": "replicas", "podTemplate": "template"}}})"),
                                     "o.yaml");
  REQUIRE(kind);
  const owner_ref ref{"batch.volcano.sh/v1alpha1", "Job", "team-a", "lm", "u"};
  const auto task = [](const std::string& name, const std::string& role, const std::string& map) {
    json t = {{"name", name}, {"replicas", 2}, {"template", json::object()}};
    if (!role.empty()) t["template"]["metadata"][map]["trainenv.io/role"] = role;
    return t;
  };
  const auto read = [&](const json& tasks) {
    return read_roles(*kind, json{{"spec", {{"tasks", tasks}}}}, ref, "x");
  };
  const auto roles =
      read(json::array({task("mpimaster", "launcher", "labels"), task("mpiworker", "", ""),
                        task("ps", "server", "annotations")}));
  REQUIRE(roles);
  CHECK((*roles)[0].role == "launcher");
  CHECK((*roles)[0].entry == "mpimaster");
  CHECK((*roles)[1].role == "mpiworker");
  CHECK((*roles)[1].entry == "mpiworker");
  CHECK((*roles)[2].role == "server");  // an annotation names it too
  // Two templates that play one role: a violation naming both.
  CHECK(
      read(json::array({task("a", "worker", "labels"), task("b", "worker", "labels")})).message() ==
      "Job team-a/lm: \"a\" and \"b\" both play role \"worker\" (by trainenv.io/role on their "
      "templates or a job plugin's flags); give each its own");
  CHECK(read(json::array({task("a", "worker", "labels"), task("worker", "", "")})).message() ==
        "Job team-a/lm: \"a\" and \"worker\" both play role \"worker\" (by trainenv.io/role on "
        "their templates or a job plugin's flags); give each its own");
  // A role is a DNS label: it names hosts and messages.
  CHECK(read(json::array({task("a", "Launcher!", "labels")})).message() ==
        "Job team-a/lm spec.tasks[a] template's trainenv.io/role is \"Launcher!\"; a role is a "
        "DNS label (at most 63 of a-z, 0-9 and '-')");
}

TEST_CASE("a naming rule must end with the index and name a Job at most once", "[owners][naming]") {
  const auto parse = [](const std::string& naming) {
    return parse_owner_kind(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
        "kind": "OwnerKind", "metadata": {"name": "x"}, "spec": {"versions": ["v1"],
        "kind": "Job", "resource": "jobs", "roles": {"own": {"podTemplate": "spec.template"}},
        "naming": )" + naming + "}}"),
                            "o.yaml");
  };
  CHECK(parse(R"({"hostname": "${job}-${index}"})").ok());
  CHECK_THAT(parse(R"({"hostname": "${index}-${job}"})").message(),
             Catch::StartsWith("o.yaml: spec.naming.hostname: must end with ${index}"));
  CHECK_THAT(parse(R"({"hostname": "${job}-${jobIndex}-${jobIndex}-${index}"})").message(),
             Catch::StartsWith("o.yaml: spec.naming.hostname: must end with ${index}"));
  CHECK_THAT(parse(R"({"hostname": "${job}-${numNodes}-${index}"})").message(),
             Catch::Contains("may use only ${job}, ${role}, ${jobIndex} and ${index}"));
  CHECK_THAT(parse(R"({"hostname": "${job}-${index}", "subdomainDefault": "${role}"})").message(),
             Catch::Contains("spec.naming.subdomainDefault: may use only ${job}"));
  CHECK_THAT(parse(R"({"hostname": "${job}-${index}", "bogus": 1})").message(),
             Catch::Contains("spec.naming: unknown field \"bogus\""));
}

TEST_CASE("an owner object read as a kind gives its reading for that kind and no other",
          "[owners][reading]") {
  const auto parse = [](const std::string& name, const std::string& spec) {
    auto kind = parse_owner_kind(json::parse(R"({"apiVersion": "trainenv.io/v1alpha1",
        "kind": "OwnerKind", "metadata": {"name": ")" +
                                             name + R"("}, "spec": )" + spec + "}"),
                                 "o.yaml");
    if (!kind) FAIL(kind.message());
    return *kind;
  };
  const auto jobset = parse("jobset", R"({"apiGroup": "jobset.x-k8s.io", "versions": ["v1alpha2"],
      "kind": "JobSet", "resource": "jobsets", "roles": {"list": "spec.replicatedJobs",
      "name": "name", "replicas": "replicas", "jobSpec": "template.spec",
      "podTemplate": "template.spec.template"}})");
  const auto other = parse("other", R"({"apiGroup": "jobset.x-k8s.io", "versions": ["v1alpha2"],
      "kind": "JobSet", "resource": "jobsets", "roles": {"list": "spec.replicatedJobs",
      "name": "name", "replicas": "count", "jobSpec": "template.spec",
      "podTemplate": "template.spec.template"}})");
  REQUIRE(jobset.id != other.id);
  const owner_ref ref{"jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "bert", "u"};
  const owner_object object(json::parse(R"({"metadata": {"name": "bert", "namespace": "ns",
      "uid": "u", "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1",
      "kind": "TrainJob", "name": "bert", "uid": "t", "controller": true}]},
      "spec": {"replicatedJobs": [{"name": "node", "replicas": 2,
               "template": {"spec": {"parallelism": 3, "completions": 3, "template": {}}}}]}})"),
                            jobset, ref);
  const auto* reading = object.reading(jobset);
  REQUIRE(reading != nullptr);
  REQUIRE(reading->roles);
  REQUIRE(*reading->roles);
  CHECK((*reading->roles)->front().pods == 6);
  CHECK((*reading->roles)->front().source == "JobSet ns/bert spec.replicatedJobs[node]");
  // A pod template pointer into the object the owner_object holds, not into a copy.
  CHECK((*reading->roles)->front().pod_template ==
        &object.json()["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]);
  CHECK_FALSE(reading->runtime);
  CHECK_FALSE(reading->trainjob);
  // Another kind for the same objects (reloaded with other fields), or one built by hand: none.
  CHECK(object.reading(other) == nullptr);
  owner_kind by_hand = jobset;
  by_hand.id = 0;
  CHECK(object.reading(by_hand) == nullptr);
  CHECK(owner_object(object.json()).reading(jobset) == nullptr);  // read as no kind

  // The controller: as read, in the object's namespace; read now in another.
  std::optional<owner_ref> scratch;
  const auto& controller = object.controller("ns", scratch);
  CHECK(&controller == &reading->controller);
  REQUIRE(controller);
  CHECK(controller->display() == "TrainJob ns/bert");
  const auto& elsewhere = object.controller("other", scratch);
  CHECK(&elsewhere == &scratch);
  REQUIRE(elsewhere);
  CHECK(elsewhere->namespace_name == "other");
}

TEST_CASE("owner values hold one entry per object, by group, kind, namespace and name",
          "[owners]") {
  // An object read anew under another version or uid replaces the one held, as find() would
  // have found that one: a walk never sees the older copy again.
  owner_values values;
  values.add({"jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "s", ""},
             json::parse(R"({"metadata": {"name": "s", "uid": "one"}})"));
  values.add({"jobset.x-k8s.io/v1", "JobSet", "ns", "s", ""},
             json::parse(R"({"metadata": {"name": "s", "uid": "two"}})"));
  REQUIRE(values.all().size() == 1);
  const auto* found = values.find({"jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "s", ""});
  REQUIRE(found != nullptr);
  CHECK(found->object()["metadata"]["uid"] == "two");
  values.add({"jobset.x-k8s.io/v1alpha2", "JobSet", "other", "s", ""}, json::object());
  CHECK(values.all().size() == 2);
}
