// Property tests over generated jobs (docs/contract.md §2.2, §5): random JobSets, Indexed Jobs,
// Volcano Jobs and TrainJobs on each of Trainer's runtime shapes, for every shipped policy, laid
// out as their controllers would create them and decided pod by pod. The oracle is the whole-job
// check of `preview --job`: distinct node ranks and RANKs 0..N-1, one master that is node rank
// 0's own DNS name, one world size and number of nodes, a hostfile of exactly the workers, and no
// pod denied — except where the layout gives the policy no node to train on, where every pod
// must be denied with a message saying so. TRAINENV_PROPERTY_SEED repeats a run; a failure
// prints its seed and the job.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "owner_files.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/job_preview.hpp"

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

json pod_template(generator& g, const std::string& policy, bool torchtune) {
  json container = {{"name", "node"}, {"image", "example.com/train:1"}};
  container["command"] = torchtune ? json({"tune", "run"}) : json({"python", "train.py"});
  if (g.chance(50))
    container["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(g.between(1, 8))}}}};
  json metadata = {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}};
  if (!policy.empty()) metadata["annotations"] = {{"trainenv.io/policy", policy}};
  return {{"metadata", metadata},
          {"spec", {{"restartPolicy", "OnFailure"}, {"containers", json::array({container})}}}};
}

// A JobSet of 1-4 replicatedJobs named among master/worker/node/workers/trainer/launcher, 1-4
// Jobs of 1-8 pods each, with or without a subdomain of its own.
json random_jobset(generator& g, const std::string& policy) {
  json js = {
      {"apiVersion", "jobset.x-k8s.io/v1alpha2"},
      {"kind", "JobSet"},
      {"metadata", {{"name", "js" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
      {"spec", {{"replicatedJobs", json::array()}}}};
  if (g.chance(50))
    js["spec"]["network"] = {{"subdomain", "svc-" + std::to_string(g.between(0, 9))}};
  const auto names =
      g.distinct({"master", "worker", "node", "workers", "trainer", "launcher"}, g.between(1, 4));
  for (const auto& name : names) {
    const int parallelism = name == "launcher" ? 1 : g.between(1, 8);
    json rj = {{"name", name},
               {"template",
                {{"spec",
                  {{"parallelism", parallelism},
                   {"completions", parallelism},
                   {"template", pod_template(g, policy, policy == "torchtune")}}}}}};
    const int replicas = name == "launcher" ? 1 : g.between(1, 4);
    if (replicas != 1 || g.chance(50)) rj["replicas"] = replicas;  // absent: JobSet's default 1
    js["spec"]["replicatedJobs"].push_back(std::move(rj));
  }
  return js;
}

json random_indexed_job(generator& g, const std::string& policy) {
  const int pods = g.between(1, 8);
  auto tmpl = pod_template(g, policy, policy == "torchtune");
  tmpl["spec"]["subdomain"] = "pretrain-svc";
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", "pretrain"}, {"namespace", "team-a"}}},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", pods},
            {"parallelism", pods},
            {"template", tmpl}}}};
}

// A Volcano Job of 1-4 tasks with 0-8 replicas each (a zero omitted, as Volcano writes it), with
// or without a policy annotation (without: the kind's default, volcano-pytorch).
json random_volcano(generator& g, const std::string& policy) {
  json vj = {
      {"apiVersion", "batch.volcano.sh/v1alpha1"},
      {"kind", "Job"},
      {"metadata", {{"name", "vc" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
      {"spec", {{"plugins", {{"svc", json::array()}}}, {"tasks", json::array()}}}};
  for (const auto& name :
       g.distinct({"master", "worker", "ps", "evaluator", "launcher", "node"}, g.between(1, 4))) {
    json task = {{"name", name}, {"template", pod_template(g, policy, false)}};
    if (const int replicas =
            name == "master" || name == "launcher" ? g.between(0, 1) : g.between(0, 8);
        replicas != 0)
      task["replicas"] = replicas;
    vj["spec"]["tasks"].push_back(std::move(task));
  }
  return vj;
}

json random_trainjob(generator& g) {
  const auto runtime = g.pick<std::string>(
      {"torch-distributed", "deepspeed-distributed", "jax-distributed", "xgboost-distributed"});
  json trainer = {{"numNodes", g.between(1, 8)}};
  if (g.chance(60))
    trainer["resourcesPerNode"] = {
        {"limits", {{"nvidia.com/gpu", std::to_string(g.between(1, 8))}}}};
  if (g.chance(30)) trainer["numProcPerNode"] = g.between(1, 8);
  return {
      {"apiVersion", "trainer.kubeflow.org/v1alpha1"},
      {"kind", "TrainJob"},
      {"metadata", {{"name", "tj" + std::to_string(g.between(0, 99))}, {"namespace", "team-a"}}},
      {"spec", {{"runtimeRef", {{"name", runtime}}}, {"trainer", trainer}}}};
}

// Whether `policy` has a node to train on in `job`: a role it trains runs a pod. The roles it
// trains are its own training roles that the job names (a task scaled to zero included), else,
// in a job whose roles it does not name, every role but the launcher.
bool has_nodes(const json& job, const std::string& policy) {
  const auto* p = test::shipped_policies().by_name(policy);
  std::map<std::string, int> pods;
  if (job["kind"] == "JobSet") {
    for (const auto& rj : job["spec"]["replicatedJobs"]) pods[rj["name"]] = 1;
  } else if (job["apiVersion"] == "batch.volcano.sh/v1alpha1") {
    for (const auto& t : job["spec"]["tasks"]) pods[t["name"]] = t.value("replicas", 0);
  } else {
    return true;
  }
  bool named = false;
  for (const auto& [role, count] : pods) named = named || p->is_training_role(role);
  if (p->every_role_trains) named = false;
  for (const auto& [role, count] : pods) {
    if ((named ? p->is_training_role(role) : role != "launcher") && count > 0) return true;
  }
  return false;
}

struct run_counts {
  int jobs = 0;
  int pods = 0;
  int denied_jobs = 0;
};

// The pods of `role` in `job`, or 0.
int role_pods(const json& job, const std::string& role) {
  if (job["kind"] == "JobSet") {
    for (const auto& rj : job["spec"]["replicatedJobs"]) {
      if (rj["name"] == role) return 1;
    }
  } else if (job["apiVersion"] == "batch.volcano.sh/v1alpha1") {
    for (const auto& t : job["spec"]["tasks"]) {
      if (t["name"] == role) return t.value("replicas", 0);
    }
  }
  return 0;
}

void check_one(const json& job, const std::string& policy, const std::vector<json>& runtimes,
               std::uint64_t seed, run_counts& counts) {
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
  // No policy named: a Volcano Job's pods get its kind's default, any other the default policy.
  const bool volcano = job["apiVersion"] == "batch.volcano.sh/v1alpha1";
  const auto effective = !policy.empty() ? policy : volcano ? "volcano-pytorch" : "torch";
  // volcano-pytorch leaves a job without a master alone, as Volcano's own plugin does.
  const bool applies = effective != "volcano-pytorch" || role_pods(job, "master") > 0;
  if (applies && job["kind"] != "TrainJob" && !has_nodes(job, effective)) {
    // No node to train on: the layout cannot be named, and every pod says so.
    ++counts.denied_jobs;
    for (const auto& p : preview->pods) {
      CHECK_FALSE(p.d.allowed);
      CHECK_THAT(p.d.message, Catch::Contains("runs no pod in a node role"));
    }
    return;
  }
  CHECK(preview->ok());
}

std::uint64_t seed_for_run() {
  if (const char* given = std::getenv("TRAINENV_PROPERTY_SEED"))
    return std::strtoull(given, nullptr, 10);
  return std::random_device{}();
}

}  // namespace

TEST_CASE("every generated layout, for every shipped policy, passes the whole-job checks",
          "[property][layout]") {
  const auto seed = seed_for_run();
  generator g(seed);
  const auto runtimes = test::owner_file_at("examples/jobs/runtimes.yaml").objects();
  run_counts counts;
  constexpr int rounds = 150;  // x 5 shapes x (policies) jobs
  for (int round = 0; round < rounds; ++round) {
    for (const auto& policy : policy_names()) {
      const auto annotated = policy == "torch" && g.chance(50) ? std::string() : policy;
      check_one(random_jobset(g, annotated), annotated, runtimes, seed, counts);
      check_one(random_indexed_job(g, annotated), annotated, runtimes, seed, counts);
      check_one(random_volcano(g, annotated), annotated, runtimes, seed, counts);
    }
    const auto volcano_default = random_volcano(g, "");
    check_one(volcano_default, "", runtimes, seed, counts);
    check_one(random_trainjob(g), "", runtimes, seed, counts);
  }
  UNSCOPED_INFO("seed " << seed << ": " << counts.jobs << " jobs, " << counts.pods << " pods, "
                        << counts.denied_jobs << " with no node to train on");
  CHECK(counts.jobs >= 1000);
  WARN("generated " << counts.jobs << " jobs of " << counts.pods << " pods (seed " << seed << ")");
}
