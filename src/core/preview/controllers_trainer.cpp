// Kubeflow Trainer's controller as preview --job models it: the JobSet its plugins make of a
// TrainJob on its runtime (docs/upstream-controllers.md cites the lines). And the helpers the
// controllers' models share (controllers_detail.hpp).
#include <algorithm>
#include <set>

#include "controllers_detail.hpp"
#include "trainenv/core/job/resources.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core::controllers_detail {

using nlohmann::json;

std::string text_at(const json& object, std::initializer_list<const char*> path,
                    const std::string& fallback) {
  const json* at = &object;
  for (const auto* key : path) {
    at = member(*at, key);
    if (at == nullptr) return fallback;
  }
  return at->is_string() ? at->get<std::string>() : fallback;
}

std::optional<std::int64_t> int_at(const json& object, std::initializer_list<const char*> path) {
  const json* at = &object;
  for (const auto* key : path) {
    at = member(*at, key);
    if (at == nullptr) return std::nullopt;
  }
  if (!at->is_number_integer()) return std::nullopt;
  return at->get<std::int64_t>();
}

// A mutable member that is an object, made so when absent or not one.
json& object_member(json& parent, const char* key) {
  auto& m = parent[key];
  if (!m.is_object()) m = json::object();
  return m;
}

// What every created object shares: the controller reference to its owner.
json controller_ref(const json& owner) {
  return {{"apiVersion", text_at(owner, {"apiVersion"})},
          {"kind", text_at(owner, {"kind"})},
          {"name", text_at(owner, {"metadata", "name"})},
          {"uid", text_at(owner, {"metadata", "uid"})},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

// A headless Service whose name is the pods' subdomain: the one that gives them DNS names.
json headless_service(const std::string& name,
                      const std::pair<std::string_view, std::string>& selector, const json& owner,
                      bool publish_not_ready) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", name},
            {"namespace", text_at(owner, {"metadata", "namespace"})},
            {"ownerReferences", json::array({controller_ref(owner)})}}},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", publish_not_ready},
            {"selector", {{std::string(selector.first), selector.second}}}}}};
}

namespace {

// --- Kubeflow Trainer ---------------------------------------------------------------------

const std::string* step_of(const json& replicated_job) {
  return object_label(member(replicated_job, "template"), keys::ancestor_step);
}

// The container Trainer's plugins write into: the one named node in a replicatedJob's pods.
json* node_container(json& replicated_job) {
  json* at = &replicated_job;
  for (const auto* key : {"template", "spec", "template", "spec", "containers"}) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  if (!at->is_array()) return nullptr;
  for (auto& c : *at) {
    if (c.is_object() && c.value("name", "") == "node") return &c;
  }
  return nullptr;
}

void upsert_env(json& container, const std::string& name, json entry) {
  auto& env = container["env"];
  if (!env.is_array()) env = json::array();
  entry["name"] = name;
  for (auto& e : env) {
    if (e.value("name", "") == name) {
      e = std::move(entry);
      return;
    }
  }
  env.push_back(std::move(entry));
}

void upsert_named(json& list_holder, const char* key, const json& item, const char* by = "name") {
  auto& list = list_holder[key];
  if (!list.is_array()) list = json::array();
  for (auto& existing : list) {
    if (existing.value(by, json()) == item[by]) {
      existing = item;
      return;
    }
  }
  list.push_back(item);
}

json value_env(const std::string& value) {
  return {{"value", value}};
}

json index_env() {
  return {
      {"valueFrom",
       {{"fieldRef",
         {{"fieldPath", "metadata.annotations['" + std::string(keys::completion_index) + "']"}}}}}};
}

// The GPUs `resources` asks for (Trainer's GetNumGPUPerNode); 0 when none, or unreadable.
std::int64_t gpus_of(const json& resources) {
  const auto n = gpu_count(json{{"resources", resources}});
  return n ? *n : 0;
}

// Kubeflow Trainer (pkg/runtime/framework/plugins: jobset, torch, jax, xgboost, mpi): the
// runtime's JobSet template with the TrainJob's node count, image and resources, and what its
// plugins write into the trainer's `node` container; the MPI hostfile as its ConfigMap.
class trainer_plugins {
 public:
  trainer_plugins(const json& tj, const json& runtime)
      : tj_(tj),
        name_(text_at(tj, {"metadata", "name"})),
        ml_policy_(object_at(runtime, {"spec", "mlPolicy"})),
        trainer_(object_at(tj, {"spec", "trainer"})),
        mpi_(ml_policy_.value("mpi", json())) {}

  result<json> jobset(const json& runtime, uid_source& uids, created_job& out) {
    const auto* tmpl = find_path(runtime, {"spec", "template"});
    if (tmpl == nullptr || !tmpl->is_object())
      return error{"trainenv: the runtime of TrainJob " + name_ + " has no spec.template"};
    json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"}, {"kind", "JobSet"}};
    json metadata = tmpl->value("metadata", json::object());
    metadata["name"] = name_;
    metadata["namespace"] = text_at(tj_, {"metadata", "namespace"});
    metadata["uid"] = uids.next("jobset", name_);
    metadata["ownerReferences"] = json::array({controller_ref(tj_)});
    js["metadata"] = std::move(metadata);
    js["spec"] = tmpl->value("spec", json::object());
    auto& jobs = js["spec"]["replicatedJobs"];
    if (!jobs.is_array()) return error{"trainenv: the runtime's template has no replicatedJobs"};
    out.launcher_is_node = launcher_node();
    for (auto& rj : jobs) size_and_fill(rj);
    const auto gpus = trainer_gpus(jobs);
    const auto subdomain = text_at(js, {"spec", "network", "subdomain"}, name_);
    for (auto& rj : jobs) framework_env(rj, gpus);
    if (mpi_.is_object()) out.objects.push_back(mpi(jobs, gpus, subdomain, uids));
    return js;
  }

 private:
  static json object_at(const json& object, std::initializer_list<const char*> path) {
    const json* at = &object;
    for (const auto* key : path) {
      at = member(*at, key);
      if (at == nullptr) return json::object();
    }
    return at->is_object() ? *at : json::object();
  }
  [[nodiscard]] bool launcher_node() const {
    return mpi_.is_object() && mpi_.value("runLauncherAsNode", false);
  }
  static bool is_trainer(const json& rj) {
    const auto* step = step_of(rj);
    return step != nullptr && *step == "trainer";
  }

  // The jobset plugin's counts (the trainer's numNodes, labelled Jobs forced to one replica),
  // the framework plugins' (torch/jax/xgboost: the trainer's; MPI: the node Job's, one less when
  // the launcher is a node), and the TrainJob's image, command, env and resources.
  void size_and_fill(json& rj) const {
    const bool trainer = is_trainer(rj);
    if (step_of(rj) != nullptr) rj["replicas"] = 1;
    auto count = int_at(rj, {"template", "spec", "parallelism"}).value_or(1);
    if (trainer) count = std::max<std::int64_t>(int_at(ml_policy_, {"numNodes"}).value_or(1), 1);
    const auto tj_nodes = int_at(trainer_, {"numNodes"});
    const bool mpi_node = mpi_.is_object() && rj.value("name", "") == "node";
    if (!mpi_.is_object() && trainer && tj_nodes) count = *tj_nodes;
    if (mpi_node && tj_nodes)
      count = launcher_node() ? std::max<std::int64_t>(*tj_nodes - 1, 1) : *tj_nodes;
    auto& spec = rj["template"]["spec"];
    spec["parallelism"] = count;
    spec["completions"] = count;
    json* c = node_container(rj);
    if (c == nullptr || !(trainer || (launcher_node() && mpi_node))) return;
    // builder.go: the image, command and args go to the trainer's Job only; a node Job beside a
    // launcher that is a node gets the env and resources, and keeps its own command (sshd).
    for (const auto* key : {"image", "command", "args"})
      if (trainer && trainer_.contains(key)) (*c)[key] = trainer_[key];
    // MergeResourceRequirements (v2.3): the TrainJob's requests and limits over the runtime's.
    if (const auto* resources = member(trainer_, "resourcesPerNode"); resources != nullptr) {
      auto& merged = object_member(*c, "resources");
      for (const auto* part : {"requests", "limits"}) {
        const auto* given = member(*resources, part);
        if (given == nullptr || !given->is_object()) continue;
        auto& into = object_member(merged, part);
        for (const auto& [k, v] : given->items()) into[k] = v;
      }
    }
    for (const auto& e : trainer_.value("env", json::array()))
      upsert_env(*c, e.value("name", ""), e);
  }

  // torch.go: the TrainJob's numProcPerNode, else "auto" on a node with GPUs, else its CPUs
  // (max(1, ceil(cpu)), requests before limits) from the node's resources.
  [[nodiscard]] std::string torch_nproc(const json& container) const {
    if (const auto n = int_at(trainer_, {"numProcPerNode"})) return std::to_string(*n);
    // Counted from the TrainJob's resourcesPerNode alone when it gives them (torch.go), not
    // from the container's merged resources.
    const auto* per_node = member(trainer_, "resourcesPerNode");
    auto resolved = per_node != nullptr
                        ? resolve_nproc(nproc_setting{}, json{{"resources", *per_node}})
                        : resolve_nproc(nproc_setting{}, container);
    return resolved ? resolved->text() : std::string("auto");
  }

  // The GPUs of one node, for the plugins' rules: the TrainJob's resourcesPerNode, else the
  // trainer's (MPI: the node Job's) container.
  std::int64_t trainer_gpus(json& jobs) const {
    if (const auto* resources = member(trainer_, "resourcesPerNode")) return gpus_of(*resources);
    for (auto& rj : jobs) {
      const json* c = node_container(rj);
      const bool counted = mpi_.is_object() ? rj.value("name", "") == "node" : is_trainer(rj);
      if (c != nullptr && counted) return gpus_of(c->value("resources", json::object()));
    }
    return 0;
  }

  // The torch, jax and xgboost plugins' env in the trainer's container, with Trainer's master
  // (<trainjob>-node-0-0.<trainjob>, whatever the layout) and port 29500.
  void framework_env(json& rj, std::int64_t gpus) const {
    json* c = node_container(rj);
    if (c == nullptr || !is_trainer(rj)) return;
    const auto count = rj["template"]["spec"]["parallelism"].get<std::int64_t>();
    const std::string master = name_ + "-node-0-0." + name_;
    if (ml_policy_.contains("torch")) {
      upsert_env(*c, "PET_NNODES", value_env(std::to_string(count)));
      upsert_env(*c, "PET_NPROC_PER_NODE", value_env(torch_nproc(*c)));
      upsert_env(*c, "PET_NODE_RANK", index_env());
      if (c->value("command", json()) != json::array({"tune", "run"})) {
        upsert_env(*c, "PET_MASTER_ADDR", value_env(master));
        upsert_env(*c, "PET_MASTER_PORT", value_env("29500"));
      }
    } else if (ml_policy_.contains("jax")) {
      upsert_env(*c, "JAX_NUM_PROCESSES", value_env(std::to_string(count)));
      upsert_env(*c, "JAX_PROCESS_ID", index_env());
      upsert_env(*c, "JAX_COORDINATOR_ADDRESS", value_env(master + ":29500"));
    } else if (ml_policy_.contains("xgboost")) {
      upsert_env(*c, "DMLC_TRACKER_URI", value_env(master));
      upsert_env(*c, "DMLC_TRACKER_PORT", value_env("29500"));
      upsert_env(*c, "DMLC_TASK_ID", index_env());
      upsert_env(*c, "DMLC_NUM_WORKER",
                 value_env(std::to_string(count * std::max<std::int64_t>(gpus, 1))));
    } else {
      return;
    }
    upsert_named(*c, "ports", {{"containerPort", 29500}}, "containerPort");
  }

  // The MPI plugin: SSH keys on the node and launcher pods at sshAuthMountPath, the hostfile
  // ConfigMap (its nodes' endpoints with the slots) mounted at /etc/mpi on the launcher with the
  // OMPI_MCA_* env. Returns the ConfigMap.
  json mpi(json& jobs, std::int64_t gpus, const std::string& subdomain, uid_source& uids) const {
    std::int64_t slots = int_at(mpi_, {"numProcPerNode"}).value_or(1);
    if (const auto n = int_at(trainer_, {"numProcPerNode"})) {
      slots = *n;
    } else if (slots == 1 && gpus > 1) {
      slots = gpus;
    }
    std::string hostfile;
    for (const auto& rj : jobs) {
      const auto rj_name = rj.value("name", "");
      if (rj_name != "node" && !(launcher_node() && rj_name == "launcher")) continue;
      const auto replicas = int_at(rj, {"replicas"}).value_or(1);
      const auto count = rj["template"]["spec"]["parallelism"].get<std::int64_t>();
      for (std::int64_t r = 0; r < replicas; ++r) {
        for (std::int64_t p = 0; p < count; ++p) {
          hostfile += name_ + "-" + rj_name + "-" + std::to_string(r) + "-" + std::to_string(p) +
                      "." + subdomain + " slots=" + std::to_string(slots) + "\n";
        }
      }
    }
    for (auto& rj : jobs) mpi_mounts(rj, slots);
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata",
             {{"name", name_ + "-mpi-hostfile"},
              {"namespace", text_at(tj_, {"metadata", "namespace"})},
              {"uid", uids.next("configmap", name_)},
              {"ownerReferences", json::array({controller_ref(tj_)})}}},
            {"data", {{"hostfile", hostfile}}}};
  }

  void mpi_mounts(json& rj, std::int64_t slots) const {
    const auto rj_name = rj.value("name", "");
    if (rj_name != "node" && rj_name != "launcher") return;
    auto& pod_spec = rj["template"]["spec"]["template"]["spec"];
    upsert_named(pod_spec, "volumes",
                 {{"name", "mpi-ssh-auth"},
                  {"secret",
                   {{"secretName", name_ + "-mpi-ssh-auth"},
                    {"defaultMode", 0400},
                    {"items",
                     {{{"key", "ssh-privatekey"}, {"path", "id_rsa"}, {"mode", 0640}},
                      {{"key", "ssh-publickey"}, {"path", "id_rsa.pub"}, {"mode", 0644}},
                      {{"key", "ssh-publickey"}, {"path", "authorized_keys"}, {"mode", 0644}}}}}}});
    json* c = node_container(rj);
    if (c == nullptr) return;
    upsert_named(*c, "volumeMounts",
                 {{"name", "mpi-ssh-auth"},
                  {"mountPath", text_at(mpi_, {"sshAuthMountPath"}, "/root/.ssh")}});
    if (rj_name != "launcher") return;
    upsert_named(pod_spec, "volumes",
                 {{"name", "mpi-hostfile"},
                  {"configMap",
                   {{"name", name_ + "-mpi-hostfile"},
                    {"items", {{{"key", "hostfile"}, {"path", "hostfile"}, {"mode", 0444}}}}}}});
    upsert_named(*c, "volumeMounts", {{"name", "mpi-hostfile"}, {"mountPath", "/etc/mpi"}});
    upsert_env(*c, "OMPI_MCA_orte_default_hostfile", value_env("/etc/mpi/hostfile"));
    upsert_env(*c, "OMPI_MCA_orte_keep_fqdn_hostnames", value_env("true"));
    upsert_env(*c, "OMPI_MCA_orte_set_default_slots", value_env(std::to_string(slots)));
    upsert_env(*c, "OMPI_MCA_plm_rsh_args", value_env("-o ConnectionAttempts=10"));
  }

  const json& tj_;
  std::string name_;
  json ml_policy_;
  json trainer_;
  json mpi_;
};

// The runtime a TrainJob names (spec.runtimeRef; Trainer's defaults for group and kind).
}  // namespace

result<json> trainer_jobset(const json& trainjob, const json& runtime, uid_source& uids,
                            created_job& out) {
  return trainer_plugins(trainjob, runtime).jobset(runtime, uids, out);
}

}  // namespace trainenv::core::controllers_detail
