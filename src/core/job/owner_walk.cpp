#include "trainenv/core/job/owner_walk.hpp"

#include <cstdint>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// What could not be read, in the words a message uses: "JobSet team-a/bert: forbidden (403):
// <the API's words>".
std::string failed(const owner_fetch& f) {
  std::string out = f.ref.display() + ": " + std::string(failure_name(*f.failure));
  if (!f.detail.empty()) out += ": " + f.detail.substr(0, 160);
  return out;
}

// An owner that could not be read, as an error whose code says whose fault it is.
error cannot_read(const owner_fetch& f) {
  return error{failed(f), failure_code(*f.failure)};
}

const std::string* object_label(const json& object, std::string_view key) {
  const auto* metadata = member(object, "metadata");
  const auto* labels = metadata != nullptr ? member(*metadata, "labels") : nullptr;
  return labels != nullptr ? string_member(*labels, key) : nullptr;
}

std::string_view namespace_of(const pod_view& pod) {
  const auto* ns = pod.namespace_name();
  return ns != nullptr ? std::string_view(*ns) : std::string_view();
}

bool is_batch_job(const owner_ref& ref) {
  return ref.kind == "Job" && ref.group() == "batch";
}

// The JobSet a pod belongs to, from the labels JobSet puts on every pod: no need to read the
// Job first. The uid label makes it as safe as the Job's ownerReference.
std::optional<owner_ref> jobset_from_labels(const pod_view& pod, const owner_kind_set& kinds) {
  const auto* name = pod.label(keys::jobset_name);
  const auto* uid = pod.label(keys::jobset_uid);
  if (name == nullptr || uid == nullptr || name->empty() || uid->empty()) return std::nullopt;
  for (const auto& kind : kinds.all()) {
    if (kind.kind == "JobSet" && kind.group == "jobset.x-k8s.io" && kind.roles) {
      return owner_ref{kind.group + "/" + kind.versions.front(), kind.kind,
                       std::string(namespace_of(pod)), std::string(*name), std::string(*uid)};
    }
  }
  return std::nullopt;
}

// The controller of a fetched object, read once per object: the cache hands the same object to
// every pod of a job.
std::shared_ptr<const std::optional<owner_ref>> controller_of_fetched(const owner_fetch& f,
                                                                      std::string_view ns) {
  return f.fetched->derived<std::optional<owner_ref>>(
      "controller\n" + std::string(ns), [&] { return controller_of(f.object(), ns); });
}

// The counts an owner object of a known kind gives, once it is fetched.
owner_step<result<std::optional<owner_counts>>> counts_of(const owner_ref& ref,
                                                          const owner_kind& kind,
                                                          std::string_view role,
                                                          const owner_values& owners) {
  const auto* f = owners.find(ref);
  if (f == nullptr) return ref;
  if (f->failure) return result<std::optional<owner_counts>>(cannot_read(*f));
  // Read once per object and kind; a kind that is one role (a batch Job) names it by the pod's.
  const bool own = kind.roles->kind == role_layout::shape::own;
  const auto roles = f->fetched->derived<result<std::vector<role_pods>>>(
      "roles\n" + std::to_string(kind.id) + "\n" + kind.name + "\n" + ref.display() + "\n" +
          std::string(own ? role : std::string_view()),
      [&] { return read_roles(kind, f->object(), ref, role); });
  if (!*roles) return result<std::optional<owner_counts>>(error{roles->message(), roles->code()});
  owner_counts out;
  out.roles = roles->value();
  out.every_role = kind.roles->kind != role_layout::shape::own;
  out.owner = ref.display();
  out.ref = ref;
  out.kind = &kind;
  out.object = &f->object();
  out.name = ref.name;
  out.coordinator = read_coordinator(kind, f->object());
  return result<std::optional<owner_counts>>(std::optional<owner_counts>(std::move(out)));
}

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

// The env names the user gives the trainer: the TrainJob's spec.trainer.env and the runtime's
// node container's.
std::vector<std::string> trainer_env_names(const json* trainer, const json& runtime) {
  std::vector<std::string> names;
  const auto collect = [&names](const json* env) {
    if (env == nullptr || !env->is_array()) return;
    for (const auto& e : *env) {
      if (const auto* name = string_member(e, "name")) names.push_back(*name);
    }
  };
  collect(trainer != nullptr ? member(*trainer, "env") : nullptr);
  const auto* jobs = find_path(runtime, {"spec", "template", "spec", "replicatedJobs"});
  if (jobs == nullptr || !jobs->is_array()) return names;
  for (const auto& rj : *jobs) {
    const auto* containers = find_path(rj, {"template", "spec", "template", "spec", "containers"});
    if (containers == nullptr || !containers->is_array()) continue;
    for (const auto& c : *containers) {
      const auto* name = string_member(c, "name");
      if (name != nullptr && *name == "node") collect(member(c, "env"));
    }
  }
  return names;
}

// Kubeflow Trainer's API (trainer.kubeflow.org/v1alpha1): the runtime's framework label and
// spec.mlPolicy, and the TrainJob's spec.trainer.numProcPerNode, which overrides the runtime's.
trainer_settings read_trainer_settings(const json& trainjob, const json& runtime,
                                       const std::string& runtime_name,
                                       const std::string& trainjob_name) {
  trainer_settings out;
  out.runtime = runtime_name;
  if (const auto* framework = object_label(runtime, keys::framework)) {
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
  if (const auto* uid = find_path(trainjob, {"metadata", "uid"});
      uid != nullptr && uid->is_string())
    out.trainjob_uid = uid->get<std::string>();
  out.trainjob_api_version = string_or_empty(trainjob, "apiVersion");
  out.trainjob_kind = string_or_empty(trainjob, "kind");
  const auto* trainer = find_path(trainjob, {"spec", "trainer"});
  out.user_env = trainer_env_names(trainer, runtime);
  if (auto n = int_or_string(trainer, "numProcPerNode")) {
    out.num_proc_per_node = std::move(n);
    out.nproc_source = "spec.trainer.numProcPerNode of " + trainjob_name;
  } else if (auto from_mpi = int_or_string(mpi, "numProcPerNode")) {
    out.num_proc_per_node = std::move(from_mpi);
    out.nproc_source = "spec.mlPolicy.mpi.numProcPerNode of " + runtime_name;
    out.nproc_one_means_gpus = *out.num_proc_per_node == "1";
  } else if (auto from_torch = int_or_string(torch, "numProcPerNode")) {
    out.num_proc_per_node = std::move(from_torch);
    out.nproc_source = "spec.mlPolicy.torch.numProcPerNode of " + runtime_name;
  }
  return out;
}

}  // namespace

owner_step<recognition> recognise(const pod_view& pod, const owner_values& owners) {
  const auto* step = pod.label(keys::ancestor_step);
  if (step != nullptr) {
    if (*step == "trainer") return recognition{recognition::verdict::training, {}, nullptr};
    return recognition{
        recognition::verdict::not_training,
        "not a training pod: label " + std::string(keys::ancestor_step) + " is " + quote(*step),
        nullptr};
  }
  const auto not_training = [](std::string why) {
    return recognition{recognition::verdict::not_training, std::move(why), nullptr};
  };
  if (pod.label(keys::jobset_name) == nullptr) {
    return not_training("not a training pod: no label " + std::string(keys::ancestor_step));
  }
  const auto& job = pod.controller();
  if (!job || !is_batch_job(*job)) {
    return not_training("not a training pod: a JobSet pod without label " +
                        std::string(keys::ancestor_step) + " and no controlling Job");
  }
  const auto* f = owners.find(*job);
  if (f == nullptr) return *job;
  if (f->failure) {
    return recognition{recognition::verdict::unknown,
                       "trainenv: could not read " + failed(*f) +
                           "; cannot tell whether this JobSet pod is a training pod, so it "
                           "passed unchanged (set label " +
                           std::string(keys::ancestor_step) + ": trainer on the pod template)",
                       nullptr};
  }
  const auto* job_step = object_label(f->object(), keys::ancestor_step);
  if (job_step == nullptr || *job_step != "trainer") {
    return not_training("not a training pod: neither the pod nor its " + job->display() +
                        " has label " + std::string(keys::ancestor_step) + ": trainer");
  }
  return recognition{recognition::verdict::through_job, {}, f};
}

owner_step<result<trainer_settings_ptr>> trainer_runtime(const pod_view& pod,
                                                         const owner_fetch& job,
                                                         const owner_values& owners,
                                                         const owner_kind_set& kinds) {
  using answer = result<trainer_settings_ptr>;
  const auto cannot = [](const std::string& why, int code = 400) {
    return answer(error{"trainenv: cannot read the pod's TrainJob and runtime: " + why +
                            "; set annotation " + std::string(keys::policy) + " (and the counts) " +
                            "on the pod template, or fix the access",
                        code});
  };
  const auto unreadable = [&](const owner_fetch& f) {
    return cannot("could not read " + failed(f), failure_code(*f.failure));
  };
  // Job -> JobSet (its controller) -> TrainJob (the JobSet's controller).
  const auto jobset_of_job = controller_of_fetched(job, namespace_of(pod));
  const auto& jobset = *jobset_of_job;
  if (!jobset || kinds.find(jobset->api_version, jobset->kind) == nullptr) {
    return answer(trainer_settings_ptr());
  }
  const auto* jobset_fetch = owners.find(*jobset);
  if (jobset_fetch == nullptr) return *jobset;
  if (jobset_fetch->failure) return unreadable(*jobset_fetch);
  const auto trainjob_of_jobset = controller_of_fetched(*jobset_fetch, namespace_of(pod));
  const auto& trainjob = *trainjob_of_jobset;
  const auto* trainjob_kind =
      trainjob ? kinds.find(trainjob->api_version, trainjob->kind) : nullptr;
  if (trainjob_kind == nullptr || trainjob_kind->runtime_ref.empty()) {
    return answer(trainer_settings_ptr());
  }
  const auto* trainjob_fetch = owners.find(*trainjob);
  if (trainjob_fetch == nullptr) return *trainjob;
  if (trainjob_fetch->failure) return unreadable(*trainjob_fetch);

  // spec.runtimeRef {apiGroup, kind, name}: Trainer defaults the group to its own and the kind
  // to ClusterTrainingRuntime.
  const auto* runtime_ref = find_path(trainjob_fetch->object(), trainjob_kind->runtime_ref);
  const auto* name = runtime_ref != nullptr ? string_member(*runtime_ref, "name") : nullptr;
  if (name == nullptr || name->empty()) {
    return cannot(trainjob->display() + " has no " + path_text(trainjob_kind->runtime_ref) +
                  ".name");
  }
  const auto* group = string_member(*runtime_ref, "apiGroup");
  const auto* kind = string_member(*runtime_ref, "kind");
  const std::string runtime_group = group != nullptr ? *group : std::string(trainjob->group());
  const std::string runtime_kind = kind != nullptr ? *kind : "ClusterTrainingRuntime";
  const owner_kind* runtime_kind_info = nullptr;
  for (const auto& k : kinds.all()) {
    if (k.group == runtime_group && k.kind == runtime_kind && k.gives_framework)
      runtime_kind_info = &k;
  }
  if (runtime_kind_info == nullptr) {
    return cannot(trainjob->display() + " names runtime " + runtime_kind + " " + *name +
                  ", not a known runtime kind");
  }
  const owner_ref runtime{
      runtime_group + "/" + runtime_kind_info->versions.front(),
      runtime_kind,
      runtime_kind_info->cluster_scoped ? std::string() : std::string(namespace_of(pod)),
      *name,
      {}};
  const auto* runtime_fetch = owners.find(runtime);
  if (runtime_fetch == nullptr) return runtime;
  if (runtime_fetch->failure) return unreadable(*runtime_fetch);
  // Kept with the TrainJob for this reading of its runtime, which the kept value holds so that
  // its address, in the key, is not another object's while the key is kept. The names in the
  // messages are the TrainJob's own and the runtime's, which that reading is of.
  struct settings_read {
    std::shared_ptr<const owner_object> runtime;
    trainer_settings settings;
  };
  const auto read = trainjob_fetch->fetched->derived<settings_read>(
      "trainer\n" + std::to_string(reinterpret_cast<std::uintptr_t>(runtime_fetch->fetched.get())),
      [&] {
        return settings_read{
            runtime_fetch->fetched,
            read_trainer_settings(trainjob_fetch->object(), runtime_fetch->object(),
                                  runtime.display(), trainjob->display())};
      });
  // The settings alone, kept alive by what holds them.
  return answer(trainer_settings_ptr(read, &read->settings));
}

const owner_kind* wired_owner(const pod_view& pod, const owner_kind_set& kinds) {
  const auto& owner = pod.controller();
  if (!owner) return nullptr;
  const auto* kind = kinds.find(owner->api_version, owner->kind);
  return kind != nullptr && !kind->wired_by.empty() ? kind : nullptr;
}

const owner_kind* kind_by_labels(const pod_view& pod, const owner_kind_set& kinds,
                                 const std::string_view** job) {
  const owner_kind* single = nullptr;
  for (const auto& k : kinds.all()) {
    if (!k.naming || k.naming->job_label.empty() || !k.roles) continue;
    const auto* name = pod.label(k.naming->job_label);
    if (name == nullptr || name->empty()) name = pod.annotation(k.naming->job_label);
    if (name == nullptr || name->empty()) continue;
    if (k.roles->kind != role_layout::shape::own) {
      *job = name;
      return &k;
    }
    if (single == nullptr) {
      single = &k;
      *job = name;
    }
  }
  return single;
}

const owner_kind* pod_owner_kind(const pod_view& pod, const owner_kind_set& kinds) {
  if (const auto& owner = pod.controller()) {
    if (const auto* kind = kinds.find(owner->api_version, owner->kind)) return kind;
  }
  const std::string_view* job = nullptr;
  return kind_by_labels(pod, kinds, &job);
}

bool has_controller(const pod_view& pod) {
  return pod.controller().has_value();
}

owner_step<result<std::optional<owner_counts>>> counts_from_owners(const pod_view& pod,
                                                                   std::string_view role,
                                                                   const owner_values& owners,
                                                                   const owner_kind_set& kinds) {
  using answer = result<std::optional<owner_counts>>;
  // A JobSet pod: its JobSet knows every role, and its labels name it.
  if (const auto jobset = jobset_from_labels(pod, kinds)) {
    return counts_of(*jobset, *kinds.find(jobset->api_version, jobset->kind), role, owners);
  }
  const auto& owner = pod.controller();
  if (!owner) return answer(std::optional<owner_counts>());  // a bare pod: the policy's defaults
  const auto* kind = kinds.find(owner->api_version, owner->kind);
  if (kind == nullptr || !kind->roles) {
    return answer(error{owner->display() + " (" + owner->api_version +
                        ") is not an owner kind trainenv knows how to read"});
  }
  if (kind->roles->kind != role_layout::shape::own) return counts_of(*owner, *kind, role, owners);

  // A Job: when a kind that knows every role owns it (a JobSet without the pod labels), ask
  // that one; else the Job itself gives the pod's own role.
  const auto* job = owners.find(*owner);
  if (job == nullptr) return *owner;
  if (job->failure) return answer(cannot_read(*job));
  const auto parent_of_job = controller_of_fetched(*job, namespace_of(pod));
  if (const auto& parent = *parent_of_job) {
    const auto* parent_kind = kinds.find(parent->api_version, parent->kind);
    if (parent_kind != nullptr && parent_kind->roles &&
        parent_kind->roles->kind != role_layout::shape::own) {
      return counts_of(*parent, *parent_kind, role, owners);
    }
  }
  return counts_of(*owner, *kind, role, owners);
}

}  // namespace trainenv::core
