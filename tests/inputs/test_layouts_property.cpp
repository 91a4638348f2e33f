// Property tests over generated jobs (docs/contract.md §2.2, §3, §5): random JobSets, Indexed
// Jobs, Volcano Jobs and TrainJobs on each of Trainer's runtime shapes, for every shipped policy,
// laid out as their controllers would create them and decided pod by pod. The jobs are written
// the way users write them: side roles beside the trainers (unlabelled, opted out, or finished
// before training through dependsOn Complete), pools of workers, a coordinator, DNS hostnames
// off with and without a template subdomain, Volcano with and without its svc plugin, a sidecar
// listed before the trainer. The oracle is the whole-job check of `preview --job` (distinct node
// ranks and RANKs 0..N-1, one master that is node rank 0's own DNS name, one world size, a
// hostfile of exactly the workers, every pod named what its layout calls it, every pod the world
// counts a training pod) and a world drawn here, apart from the engine, from what the generator
// chose: the pods with a rank are exactly the world's, the coordinator in the world is rank 0.
// Where the world is empty, or a role of it has no DNS name, the pods must be refused saying so.
// Every admitted pod is then fed back with a proxy put in front of its containers (a service
// mesh's reinvocation): nothing more is added. TRAINENV_PROPERTY_SEED repeats a run; a failure
// prints its seed and the job.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "owner_files.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/job/elastic.hpp"
#include "trainenv/core/preview/job_preview.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

class generator {
 public:
  explicit generator(std::uint64_t seed) : rng_(seed) {}

  int between(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  bool chance(int percent) { return between(1, 100) <= percent; }
  template <class T>
  T pick(const std::vector<T>& from) {
    return from[static_cast<std::size_t>(between(0, static_cast<int>(from.size()) - 1))];
  }
  // `count` distinct names from `from`, in a random order.
  std::vector<std::string> distinct(std::vector<std::string> from, int count) {
    std::shuffle(from.begin(), from.end(), rng_);
    from.resize(static_cast<std::size_t>(count));
    return from;
  }

 private:
  std::mt19937_64 rng_;
};

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& p : test::shipped_policies().all()) out.push_back(p.name);
    return out;
  }();
  return names;
}

// What the generator chose for one role: the oracle reads these, never the engine's layout.
struct role_plan {
  std::string name;
  int jobs = 1;
  int pods_per_job = 1;
  bool labelled = true;       // its pod template carries the ancestor label: a training pod
  bool opted_out = false;     // trainenv.io/inject: "false" on its pod template
  bool prerequisite = false;  // another role dependsOn it with status Complete
  bool named = true;          // its pods get DNS names from their controller
  // Unlabelled, it runs the trainers' own program: the mistake preview --job reports.
  bool unlabelled_trainer = false;

  [[nodiscard]] int pods() const { return jobs * pods_per_job; }
};

struct coordinator_plan {
  std::string role;
  int job = 0;
  int pod = 0;
};

struct job_plan {
  json job;
  std::vector<role_plan> roles;
  std::optional<coordinator_plan> coordinator;
  bool trainjob = false;
  std::string elastic;  // trainenv.io/elastic on the job, if any ("2:8", or a bad form)
  bool elastic_valid = false;
};

// Sometimes an elastic job (docs/contract.md §2.3): bounds on the owner, now and then a bad form.
void maybe_elastic(generator& g, job_plan& plan) {
  if (!g.chance(15)) return;
  if (g.chance(15)) {
    plan.elastic = g.pick<std::string>({"8:2", "0:4", "a:b", "4", ":3"});
  } else {
    const int min = g.between(1, 4);
    plan.elastic = std::to_string(min) + ":" + std::to_string(min + g.between(0, 6));
    plan.elastic_valid = true;
  }
  plan.job["metadata"]["annotations"]["trainenv.io/elastic"] = plan.elastic;
}

// A pod template as users write it: the trainer container named node or pytorch, sometimes after
// a service mesh's proxy, with or without Trainer's ancestor label and a policy annotation. A
// side role runs its own program (`side`: TensorBoard, an evaluation script), never the
// trainers': one that did would be the mistake preview --job reports (an unlabelled trainer).
json pod_template(generator& g, const std::string& policy, bool torchtune, bool labelled,
                  bool opted_out, const json& side = nullptr) {
  json trainer = {{"name", g.chance(70) ? "node" : "pytorch"}, {"image", "example.com/train:1"}};
  trainer["command"] = !side.is_null() ? side
                       : torchtune     ? json({"tune", "run"})
                                       : json({"python", "train.py"});
  json node_selector;
  if (g.chance(50)) {
    trainer["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(g.between(1, 8))}}}};
  } else if (g.chance(40)) {
    // An accelerator of policies/accelerators.yaml, sometimes on a named instance type.
    const auto& known = test::shipped_policies().accelerators();
    const auto& a =
        known[static_cast<std::size_t>(g.between(0, static_cast<int>(known.size()) - 1))];
    trainer["resources"] = {
        {g.chance(50) ? "limits" : "requests", {{a.resource, std::to_string(g.between(1, 16))}}}};
    if (!a.by_instance_type.empty() && g.chance(75)) {
      const auto type = g.chance(80) ? a
                                           .by_instance_type[static_cast<std::size_t>(g.between(
                                               0, static_cast<int>(a.by_instance_type.size()) - 1))]
                                           .first
                                     : std::string("m5.large");
      node_selector = {{"node.kubernetes.io/instance-type", type}};
    }
  }
  json containers = json::array({trainer});
  if (g.chance(30)) {
    containers.insert(containers.begin(),
                      json{{"name", "istio-proxy"}, {"image", "istio/proxyv2:1.22"}});
  }
  json metadata = json::object();
  if (labelled) metadata["labels"] = {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}};
  if (!policy.empty()) metadata["annotations"]["trainenv.io/policy"] = policy;
  if (opted_out) metadata["annotations"]["trainenv.io/inject"] = "false";
  json spec = {{"restartPolicy", "OnFailure"}, {"containers", containers}};
  if (!node_selector.is_null()) spec["nodeSelector"] = node_selector;
  return {{"metadata", metadata}, {"spec", spec}};
}

// A JobSet of 1-4 replicatedJobs: trainers (master, worker, node, workers, trainer, driver,
// pools), a launcher, side roles (tensorboard, evaluator, unlabelled or opted out) and an
// initializer the trainers depend on until it is Complete; sometimes a coordinator, a subdomain
// of its own, or DNS hostnames off with a template subdomain on some roles.
job_plan random_jobset(generator& g, const std::string& policy) {
  job_plan plan;
  auto& js = plan.job;
  js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
        {"kind", "JobSet"},
        {"metadata", {{"name", "js" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
        {"spec", {{"replicatedJobs", json::array()}}}};
  const bool dns_off = g.chance(15);
  if (dns_off) {
    js["spec"]["network"] = {{"enableDNSHostnames", false}};
  } else if (g.chance(50)) {
    js["spec"]["network"] = {{"subdomain", "svc-" + std::to_string(g.between(0, 9))}};
  }
  auto names = g.distinct({"master", "worker", "node", "workers", "trainer", "launcher", "driver",
                           "worker-a100", "worker-h100", "tensorboard", "evaluator"},
                          g.between(1, 4));
  if (g.chance(20)) names.insert(names.begin(), "initializer");  // first: others depend on it
  for (const auto& name : names) {
    role_plan role;
    role.name = name;
    role.pods_per_job = name == "launcher" ? 1 : g.between(1, 6);
    role.jobs = name == "launcher" || name == "initializer" ? 1 : g.between(1, 3);
    const bool side = name == "tensorboard" || name == "evaluator";
    role.labelled = !side || g.chance(30);
    role.opted_out = name != "initializer" && g.chance(8);
    role.prerequisite = name == "initializer";
    const bool own_subdomain = g.chance(50);
    role.named = !dns_off || own_subdomain;
    // Now and then a side role without the label runs the trainers' program: a trainer someone
    // forgot to label.
    role.unlabelled_trainer = side && !role.labelled && !role.opted_out && g.chance(25);
    const json program = !side || role.unlabelled_trainer ? json()
                         : name == "tensorboard"          ? json({"tensorboard", "--logdir=/logs"})
                                                          : json({"python", "evaluate.py"});
    auto tmpl =
        pod_template(g, policy, policy == "torchtune", role.labelled, role.opted_out, program);
    if (own_subdomain) tmpl["spec"]["subdomain"] = "own-" + name;
    json rj = {{"name", name},
               {"template",
                {{"spec",
                  {{"parallelism", role.pods_per_job},
                   {"completions", role.pods_per_job},
                   {"template", tmpl}}}}}};
    if (role.jobs != 1 || g.chance(50)) rj["replicas"] = role.jobs;  // absent: JobSet's 1
    if (name != "initializer" && names.front() == "initializer")
      rj["dependsOn"] = json::array({{{"name", "initializer"}, {"status", "Complete"}}});
    js["spec"]["replicatedJobs"].push_back(std::move(rj));
    plan.roles.push_back(role);
  }
  if (g.chance(30)) {
    const auto& role =
        plan.roles[static_cast<std::size_t>(g.between(0, static_cast<int>(plan.roles.size()) - 1))];
    plan.coordinator = {role.name, g.between(0, role.jobs - 1),
                        g.between(0, role.pods_per_job - 1)};
    js["spec"]["coordinator"] = {{"replicatedJob", plan.coordinator->role},
                                 {"jobIndex", plan.coordinator->job},
                                 {"podIndex", plan.coordinator->pod}};
  }
  maybe_elastic(g, plan);
  return plan;
}

job_plan random_indexed_job(generator& g, const std::string& policy) {
  job_plan plan;
  role_plan role;
  role.name = "node";
  role.pods_per_job = g.between(1, 8);
  auto tmpl = pod_template(g, policy, policy == "torchtune", true, false);
  tmpl["spec"]["subdomain"] = "pretrain-svc";
  plan.job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "pretrain"}, {"namespace", "team-a"}}},
              {"spec",
               {{"completionMode", "Indexed"},
                {"completions", role.pods_per_job},
                {"parallelism", role.pods_per_job},
                {"template", tmpl}}}};
  plan.roles.push_back(role);
  return plan;
}

// A Volcano Job of 1-4 tasks with 0-8 replicas each (a zero omitted, as Volcano writes it), with
// its svc plugin, the pytorch plugin (which turns svc on) or neither; a task's template sometimes
// with a subdomain of its own; with or without a policy annotation (without: volcano-pytorch).
job_plan random_volcano(generator& g, const std::string& policy) {
  job_plan plan;
  auto& vj = plan.job;
  vj = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
        {"kind", "Job"},
        {"metadata", {{"name", "vc" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
        {"spec", {{"tasks", json::array()}}}};
  const int plugins = g.between(1, 10);
  const bool svc = plugins <= 8;
  if (plugins <= 6) {
    vj["spec"]["plugins"] = {{"svc", json::array()}, {"env", json::array()}};
  } else if (svc) {
    vj["spec"]["plugins"] = {{"pytorch", json::array({"--master=master", "--worker=worker"})}};
  } else if (plugins == 9) {
    vj["spec"]["plugins"] = {{"env", json::array()}};
  }
  for (const auto& name :
       g.distinct({"master", "worker", "ps", "evaluator", "launcher", "node"}, g.between(1, 4))) {
    role_plan role;
    role.name = name;
    role.pods_per_job = name == "master" || name == "launcher" ? g.between(0, 1) : g.between(0, 8);
    role.named = svc;
    auto tmpl = pod_template(g, policy, false, true, false);
    if (svc && g.chance(15)) tmpl["spec"]["subdomain"] = vj["metadata"]["name"];
    json task = {{"name", name}, {"template", tmpl}};
    if (role.pods_per_job != 0) task["replicas"] = role.pods_per_job;
    vj["spec"]["tasks"].push_back(std::move(task));
    plan.roles.push_back(role);
  }
  maybe_elastic(g, plan);
  return plan;
}

job_plan random_trainjob(generator& g) {
  job_plan plan;
  plan.trainjob = true;
  const auto runtime = g.pick<std::string>(
      {"torch-distributed", "deepspeed-distributed", "jax-distributed", "xgboost-distributed"});
  json trainer = {{"numNodes", g.between(1, 8)}};
  if (g.chance(60))
    trainer["resourcesPerNode"] = {
        {"limits", {{"nvidia.com/gpu", std::to_string(g.between(1, 8))}}}};
  if (g.chance(30)) trainer["numProcPerNode"] = g.between(1, 8);
  plan.job = {
      {"apiVersion", "trainer.kubeflow.org/v1alpha1"},
      {"kind", "TrainJob"},
      {"metadata", {{"name", "tj" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
      {"spec", {{"runtimeRef", {{"name", runtime}}}, {"trainer", trainer}}}};
  return plan;
}

// The world the contract draws for `plan` under `policy` (docs/contract.md §2.2), from what the
// generator chose: out are the launcher, opted-out roles and prerequisites that complete first;
// an MPI policy's world is every role left (its workers need no label); any other policy's is
// the labelled roles left (every role left when none is labelled), only master and worker for a
// strict one.
std::set<std::string> expected_world(const job_plan& plan, const core::policy& policy) {
  const bool some_labelled = std::any_of(plan.roles.begin(), plan.roles.end(),
                                         [](const role_plan& r) { return r.labelled; });
  std::set<std::string> world;
  for (const auto& r : plan.roles) {
    if (r.name == "launcher" || r.opted_out || r.prerequisite) continue;
    if (policy.every_role_trains) {
      world.insert(r.name);
      continue;
    }
    if (some_labelled && !r.labelled) continue;
    if (policy.strict_training_roles && !policy.is_training_role(r.name)) continue;
    world.insert(r.name);
  }
  return world;
}

struct run_counts {
  int accelerated = 0;  // pods told their processes per node from an accelerator
  int jobs = 0;
  int pods = 0;
  int denied_jobs = 0;
  int unnamed_jobs = 0;
  int coordinators = 0;
  int reinvoked = 0;
  int elastic_jobs = 0;
  int unlabelled_trainers = 0;  // jobs where a role trains without the label, reported
};

// An elastic job's bounds in a bad form are refused, naming the annotation, by every pod that
// reads them (those whose owners are read); no pod gets elastic values from them.
void check_bad_bounds(const core::job_preview& preview) {
  for (const auto& p : preview.pods) {
    if (p.d.policy.empty()) continue;
    if (!p.d.allowed) {
      CHECK_THAT(p.d.message, Catch::Contains("trainenv.io/elastic"));
    } else {
      CHECK_FALSE(p.bounds);
    }
  }
}

// A policy with an elastic mode (torch's, torchtune's) gives every pod of an elastic job the same
// bounds and rendezvous, and none a rank; any other wires it statically. True when the job was
// checked as an elastic one.
bool check_elastic(const job_plan& plan, const core::policy& pol, const core::job_preview& preview,
                   run_counts& counts) {
  if (plan.elastic.empty()) return false;
  const bool has_mode = (pol.variables_used & core::variable_bit(core::variable::elastic)) != 0;
  for (const auto& p : preview.pods) {
    if (p.d.policy.empty() || !p.d.allowed) continue;
    if (!has_mode) {
      CHECK_FALSE(p.bounds);
      continue;
    }
    CHECK_FALSE(p.node_rank);
    CHECK_FALSE(p.rank);
    CHECK(p.bounds == plan.elastic);
  }
  if (!has_mode) return false;
  ++counts.elastic_jobs;
  return true;
}

// The pods feed back in, each with a proxy put in front of its containers, as a service mesh's
// webhook would before trainenv is invoked again: nothing more is added, also by a policy that
// writes every container (the proxy is a known sidecar, docs/contract.md §3).
void check_reinvocation(const core::job_preview& preview, const std::vector<json>& runtimes,
                        run_counts& counts) {
  std::vector<json> objects = preview.job.objects;
  objects.insert(objects.end(), runtimes.begin(), runtimes.end());
  const auto& policies = test::shipped_policies();
  for (const auto& p : preview.pods) {
    if (!p.d.allowed || !p.d.mutated()) continue;
    json pod = p.admitted;
    pod["spec"]["containers"].insert(pod["spec"]["containers"].begin(),
                                     json{{"name", "linkerd-proxy"}, {"image", "linkerd/proxy"}});
    const auto again = core::decide(
        pod, policies, {}, [&](const core::owner_ref& ref, core::owner_values& owners) {
          if (const auto* object = core::find_object(objects, ref)) {
            owners.add(ref, *object);
          } else {
            owners.add_failure(ref, core::lookup_failure::not_found, "not part of the job");
          }
        });
    INFO("reinvoked " << p.created.name << ": " << again.message);
    REQUIRE(again.allowed);
    INFO("policy " << p.d.policy);
    CHECK(again.patch().empty());
    ++counts.reinvoked;
  }
}

// The processes per node policies/accelerators.yaml gives a container, worked out here from the
// list alone: its first listed accelerator with a count above 0 (requests before limits) times
// the processes per device, by the pod's instance type where the list keys it. nullopt: none.
std::optional<std::int64_t> listed_processes(const json& container, const json& spec) {
  const auto type = spec.contains("nodeSelector")
                        ? spec["nodeSelector"].value("node.kubernetes.io/instance-type", "")
                        : std::string();
  for (const auto& a : test::shipped_policies().accelerators()) {
    for (const char* where : {"requests", "limits"}) {
      const auto& resources = container.value("resources", json::object());
      const auto& list = resources.value(where, json::object());
      if (!list.contains(a.resource)) continue;
      const auto devices = std::stoll(list[a.resource].get<std::string>());
      if (devices == 0) continue;
      auto per_device = a.processes_per_device;
      for (const auto& [name, n] : a.by_instance_type) {
        if (name == type) per_device = n;
      }
      return devices * per_device;
    }
  }
  return std::nullopt;
}

// Every torch pod whose trainer container asks for an accelerator of the list is told that many
// processes per node (the policy's nprocPerNode is auto), in PET_NPROC_PER_NODE.
void check_accelerators(const core::job_preview& preview, run_counts& counts) {
  for (const auto& p : preview.pods) {
    if (!p.d.allowed || p.d.policy != "torch") continue;
    const auto& spec = p.admitted["spec"];
    for (const auto& c : spec["containers"]) {
      const auto expected = listed_processes(c, spec);
      if (!expected) continue;
      std::string told;
      for (const auto& e : c.value("env", json::array())) {
        if (e.value("name", "") == "PET_NPROC_PER_NODE") told = e.value("value", "");
      }
      INFO("pod " << p.created.name << " container " << c.value("name", ""));
      CHECK(told == std::to_string(*expected));
      ++counts.accelerated;
    }
  }
}

// A role the generator made an unlabelled trainer is reported, naming it, exactly when a labelled
// role other than a launcher runs the trainers' program beside it with pods; the report is taken
// off the problems, so that the job's other checks judge the rest as before.
void check_unlabelled_trainers(const job_plan& plan, core::job_preview& preview,
                               run_counts& counts) {
  const bool trainers = std::any_of(plan.roles.begin(), plan.roles.end(), [](const role_plan& r) {
    const bool side = r.name == "tensorboard" || r.name == "evaluator";
    return r.labelled && !side && r.name != "launcher" && r.pods() > 0;
  });
  // In an MPI job such a role's pods are hosts of the launcher's hostfile (every role but the
  // launcher is a worker there): they run sshd whatever their command, and are not reported.
  const auto hosts_only = [&](const std::string& role) {
    return std::all_of(preview.pods.begin(), preview.pods.end(),
                       [&](const auto& p) { return p.created.role != role || p.host_only; });
  };
  std::set<std::string> expected;
  for (const auto& r : plan.roles) {
    if (r.unlabelled_trainer && trainers && r.pods() > 0 && !hosts_only(r.name))
      expected.insert(r.name);
  }
  std::set<std::string> reported;
  auto& problems = preview.problems;
  for (auto it = problems.begin(); it != problems.end();) {
    const auto& m = it->message;
    if (m.rfind("role ", 0) != 0 || m.find(" as training role ") == std::string::npos) {
      ++it;
      continue;
    }
    reported.insert(m.substr(5, m.find(' ', 5) - 5));
    it = problems.erase(it);
  }
  CHECK(reported == expected);
  if (!expected.empty()) ++counts.unlabelled_trainers;
}

void check_one(const job_plan& plan, const std::string& policy, const std::vector<json>& runtimes,
               std::uint64_t seed, run_counts& counts) {
  const auto& job = plan.job;
  auto preview = core::preview_job(job, runtimes, test::shipped_policies());
  INFO("seed " << seed << " (TRAINENV_PROPERTY_SEED repeats it); policy "
               << (policy.empty() ? "(default)" : policy) << "; job:\n"
               << job.dump(2));
  REQUIRE(preview.ok());
  ++counts.jobs;
  counts.pods += static_cast<int>(preview->pods.size());
  std::string problems;
  for (const auto& p : preview->problems) problems += p.message + "\n";
  INFO("problems:\n" << problems);
  if (plan.trainjob) {
    CHECK(preview->ok());
    check_reinvocation(*preview, runtimes, counts);
    return;
  }
  check_accelerators(*preview, counts);
  check_unlabelled_trainers(plan, *preview, counts);
  // No policy named: a Volcano Job's pods get its kind's default, any other the default policy.
  const bool volcano = job["apiVersion"] == "batch.volcano.sh/v1alpha1";
  const auto effective = !policy.empty() ? policy : volcano ? "volcano-pytorch" : "torch";
  const auto& pol = *test::shipped_policies().by_name(effective);
  const auto world = expected_world(plan, pol);
  int world_pods = 0;
  bool world_unnamed = false;
  const role_plan* launcher = nullptr;
  const role_plan* first_in_world = nullptr;
  for (const auto& r : plan.roles) {
    if (r.name == "launcher") launcher = &r;
    if (world.count(r.name) == 0) continue;
    if (first_in_world == nullptr) first_in_world = &r;
    world_pods += r.pods();
    world_unnamed = world_unnamed || (!r.named && r.pods() > 0);
  }
  // Who needs names: a world of more than one pod (its master); an MPI launcher's hostfile, any
  // size; and for Hydra every pod the launcher's subdomain (else the first node's).
  // An elastic job may grow past one pod: its endpoint needs a name from the start.
  const bool may_grow = plan.elastic_valid &&
                        (pol.variables_used & core::variable_bit(core::variable::elastic)) != 0 &&
                        core::parse_bounds(plan.elastic)->second > 1;
  bool unnamed = world_unnamed && (world_pods > 1 || may_grow);
  if (pol.every_role_trains) {
    unnamed = world_unnamed;
    const auto* searched = launcher != nullptr ? launcher : first_in_world;
    if (!pol.dns_searches.empty() && searched != nullptr) unnamed = unnamed || !searched->named;
  }
  // volcano-pytorch leaves a job without a master alone, as Volcano's own plugin does.
  const auto master = std::find_if(plan.roles.begin(), plan.roles.end(),
                                   [](const role_plan& r) { return r.name == "master"; });
  const bool applies =
      effective != "volcano-pytorch" || (master != plan.roles.end() && master->pods() > 0);
  const bool any_training = std::any_of(preview->pods.begin(), preview->pods.end(),
                                        [](const auto& p) { return !p.d.policy.empty(); });
  if (!applies || !any_training) return;
  if (!plan.elastic.empty() && !plan.elastic_valid) {
    check_bad_bounds(*preview);
    return;
  }
  if (world_pods == 0) {
    // No node to train on: the layout cannot be named, and every training pod whose policy needs
    // it says so (of an MPI job, the launcher).
    ++counts.denied_jobs;
    for (const auto& p : preview->pods) {
      if (p.d.policy.empty() || (pol.every_role_trains && p.created.role != "launcher")) continue;
      CHECK_FALSE(p.d.allowed);
      CHECK_THAT(p.d.message, Catch::Contains("runs no pod in a node role"));
    }
    return;
  }
  if (unnamed) {
    // A role of the world has no DNS name: whoever needs it is refused saying so; no pod is
    // admitted with a master that is not a pod's name.
    ++counts.unnamed_jobs;
    for (const auto& p : preview->pods) {
      if (!p.d.allowed) CHECK_THAT(p.d.message, Catch::Contains("DNS names"));
    }
    for (const auto& problem : preview->problems) {
      CHECK_THAT(problem.message, !Catch::Contains("is not the DNS name of") &&
                                      !Catch::Contains("its layout calls it") &&
                                      !Catch::Contains("not a worker of the job"));
    }
    return;
  }
  CHECK(preview->ok());  // an elastic job's: one rendezvous, at a pod of the job
  if (check_elastic(plan, pol, *preview, counts)) {
    check_reinvocation(*preview, runtimes, counts);
    return;
  }
  // The world, drawn apart from the engine: its pods and only they have a rank.
  int ranked = 0;
  for (const auto& p : preview->pods) {
    const auto rank = p.node_rank ? p.node_rank : p.rank;
    if (!rank || pol.every_role_trains) continue;
    ++ranked;
    CHECK(world.count(p.created.role) == 1);
  }
  if (!pol.every_role_trains) CHECK(ranked == world_pods);
  if (plan.coordinator && !pol.every_role_trains) {
    ++counts.coordinators;
    const auto& c = *plan.coordinator;
    const auto* role = &*std::find_if(plan.roles.begin(), plan.roles.end(),
                                      [&](const role_plan& r) { return r.name == c.role; });
    const auto name = job["metadata"]["name"].get<std::string>() + "-" + c.role + "-" +
                      std::to_string(c.job) + "-" + std::to_string(c.pod);
    if (world.count(c.role) != 0 && role->pods() > 0) {
      for (const auto& p : preview->pods) {
        const auto rank = p.node_rank ? p.node_rank : p.rank;
        if (rank && *rank == 0) CHECK(p.created.name == name);
      }
    }
  }
  check_reinvocation(*preview, runtimes, counts);
}

}  // namespace

TEST_CASE("every generated layout, for every shipped policy, passes the whole-job checks",
          "[.property][layout]") {
  const auto seed = test::property_seed();
  generator g(seed);
  const auto runtimes = test::owner_file_at("examples/jobs/runtimes.yaml").objects();
  run_counts counts;
  const int rounds = test::property_rounds(150);  // x (3 x policies + 2) jobs
  for (int round = 0; round < rounds; ++round) {
    for (const auto& policy : policy_names()) {
      const auto annotated = policy == "torch" && g.chance(50) ? std::string() : policy;
      check_one(random_jobset(g, annotated), annotated, runtimes, seed, counts);
      check_one(random_indexed_job(g, annotated), annotated, runtimes, seed, counts);
      check_one(random_volcano(g, annotated), annotated, runtimes, seed, counts);
    }
    check_one(random_volcano(g, ""), "", runtimes, seed, counts);
    check_one(random_trainjob(g), "", runtimes, seed, counts);
  }
  UNSCOPED_INFO("seed " << seed << ": " << counts.jobs << " jobs, " << counts.pods << " pods");
  CHECK(counts.jobs >= rounds * 20);
  CHECK(counts.unnamed_jobs > 0);
  CHECK(counts.coordinators > 0);
  CHECK(counts.elastic_jobs > 0);
  CHECK(counts.accelerated > 0);
  CHECK(counts.unlabelled_trainers > 0);
  WARN("generated " << counts.jobs << " jobs of " << counts.pods << " pods (seed " << seed
                    << "): " << counts.denied_jobs << " with no node to train on, "
                    << counts.unnamed_jobs << " with a world role that has no DNS names, "
                    << counts.coordinators << " with a coordinator, " << counts.elastic_jobs
                    << " elastic; " << counts.reinvoked << " pods reinvoked behind a proxy; "
                    << counts.accelerated << " told their accelerators' processes; "
                    << counts.unlabelled_trainers << " with an unlabelled trainer reported");
}
