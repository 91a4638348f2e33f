#include "trainenv/core/policy/trainer_settings.hpp"

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// A whole number or a string at `key` of `object`, as text ("4", "auto"); nullopt otherwise.
std::optional<std::string> int_or_string(const json* object, std::string_view key) {
  const auto* value = object != nullptr ? member(*object, key) : nullptr;
  if (value == nullptr) return std::nullopt;
  if (value->is_number_integer()) return std::to_string(value->get<std::int64_t>());
  if (value->is_string() && !value->get_ref<const std::string&>().empty())
    return value->get<std::string>();
  return std::nullopt;
}

// mlPolicy.torch.elasticPolicy: the bounds and restarts, each when given.
void read_elastic_policy(const json* torch, trainer_settings& out) {
  const json* elastic = torch != nullptr ? member(*torch, "elasticPolicy") : nullptr;
  const auto whole = [&](std::string_view key) -> std::optional<std::int64_t> {
    const auto* n = elastic != nullptr ? member(*elastic, key) : nullptr;
    if (n == nullptr || !n->is_number_integer()) return std::nullopt;
    return n->get<std::int64_t>();
  };
  out.elastic_min = whole("minNodes");
  out.elastic_max = whole("maxNodes");
  out.elastic_max_restarts = whole("maxRestarts");
}

// The names an env list sets, appended to `names`.
void collect_env_names(const json* env, std::vector<std::string>& names) {
  if (env == nullptr || !env->is_array()) return;
  for (const auto& e : *env) {
    if (const auto* name = string_member(e, "name")) names.push_back(*name);
  }
}

// The env names the runtime's node container sets (the user's, as the TrainJob's are).
std::vector<std::string> node_env_names(const json& runtime) {
  std::vector<std::string> names;
  const auto* jobs = find_path(runtime, {"spec", "template", "spec", "replicatedJobs"});
  if (jobs == nullptr || !jobs->is_array()) return names;
  for (const auto& rj : *jobs) {
    const auto* containers = find_path(rj, {"template", "spec", "template", "spec", "containers"});
    if (containers == nullptr || !containers->is_array()) continue;
    for (const auto& c : *containers) {
      const auto* name = string_member(c, "name");
      if (name != nullptr && *name == "node") collect_env_names(member(c, "env"), names);
    }
  }
  return names;
}

}  // namespace

// The runtime's framework label and spec.mlPolicy (whose numProcPerNode the TrainJob's
// overrides, in join_trainer_settings).
trainer_settings read_runtime_settings(const json& runtime, const std::string& runtime_name) {
  trainer_settings out;
  out.runtime = runtime_name;
  if (const auto* framework = object_label(&runtime, keys::framework)) {
    out.framework = *framework;
    out.framework_source = "label " + std::string(keys::framework) + " of " + runtime_name;
  }
  const auto* ml_policy = find_path(runtime, {"spec", "mlPolicy"});
  const json* mpi = ml_policy != nullptr ? member(*ml_policy, "mpi") : nullptr;
  const json* torch = ml_policy != nullptr ? member(*ml_policy, "torch") : nullptr;
  if (ml_policy != nullptr && ml_policy->is_object()) {
    for (const auto* source : {"torch", "mpi", "jax", "xgboost", "flux"}) {
      if (member(*ml_policy, source) == nullptr) continue;
      out.ml_policy = source;
      out.ml_policy_source = "spec.mlPolicy." + std::string(source) + " of " + runtime_name;
      break;
    }
  }
  if (mpi != nullptr && mpi->is_object()) {
    // Trainer's MPI implementations and the policies that speak them (OpenMPI is the default).
    const auto* implementation = string_member(*mpi, "mpiImplementation");
    const std::string name = implementation != nullptr ? *implementation : "";
    out.ml_policy = name == "Intel" ? "intel-mpi" : name == "MPICH" ? "mpich" : "mpi";
    if (const auto* run = member(*mpi, "runLauncherAsNode"); run != nullptr && run->is_boolean())
      out.run_launcher_as_node = run->get<bool>();
    if (const auto* path = string_member(*mpi, "sshAuthMountPath");
        path != nullptr && !path->empty())
      out.ssh_auth_mount_path = *path;
  }
  read_elastic_policy(torch, out);
  out.user_env = node_env_names(runtime);
  if (auto from_mpi = int_or_string(mpi, "numProcPerNode")) {
    out.num_proc_per_node = std::move(from_mpi);
    out.nproc_source = "spec.mlPolicy.mpi.numProcPerNode of " + runtime_name;
    out.nproc_one_means_gpus = *out.num_proc_per_node == "1";
  } else if (auto from_torch = int_or_string(torch, "numProcPerNode")) {
    out.num_proc_per_node = std::move(from_torch);
    out.nproc_source = "spec.mlPolicy.torch.numProcPerNode of " + runtime_name;
  }
  return out;
}

trainjob_settings read_trainjob_settings(const json& trainjob, const std::string& trainjob_name) {
  trainjob_settings out;
  if (const auto* uid = find_path(trainjob, {"metadata", "uid"});
      uid != nullptr && uid->is_string())
    out.uid = uid->get<std::string>();
  out.api_version = string_or_empty(trainjob, "apiVersion");
  out.kind = string_or_empty(trainjob, "kind");
  const auto* trainer = find_path(trainjob, {"spec", "trainer"});
  collect_env_names(trainer != nullptr ? member(*trainer, "env") : nullptr, out.env);
  if (auto n = int_or_string(trainer, "numProcPerNode")) {
    out.num_proc_per_node = std::move(n);
    out.nproc_source = "spec.trainer.numProcPerNode of " + trainjob_name;
  }
  return out;
}

trainer_settings join_trainer_settings(const trainer_settings& runtime,
                                       const trainjob_settings& trainjob) {
  trainer_settings out = runtime;
  out.trainjob_uid = trainjob.uid;
  out.trainjob_api_version = trainjob.api_version;
  out.trainjob_kind = trainjob.kind;
  out.user_env = trainjob.env;
  out.user_env.insert(out.user_env.end(), runtime.user_env.begin(), runtime.user_env.end());
  if (trainjob.num_proc_per_node) {
    out.num_proc_per_node = trainjob.num_proc_per_node;
    out.nproc_source = trainjob.nproc_source;
    out.nproc_one_means_gpus = false;
  }
  return out;
}

}  // namespace trainenv::core
