#include "trainenv/core/job/owner_walk.hpp"

#include <cstdint>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// What could not be read, in the words a message uses: "JobSet team-a/bert: forbidden (403):
// <the API's words>". Gone and recreated read alike, in the walk's own words: an answer to a
// guessed uid must tell neither which names exist nor the object's real uid (docs/security.md).
std::string failed(const owner_fetch& f) {
  if (*f.failure == lookup_failure::not_found || *f.failure == lookup_failure::uid_mismatch) {
    return f.ref.display() + ": not found" +
           (f.ref.uid.empty() ? std::string() : " with uid " + quote(f.ref.uid)) +
           " (deleted, or recreated under another uid)";
  }
  std::string out = f.ref.display() + ": " + std::string(failure_name(*f.failure));
  if (!f.detail.empty()) out += ": " + f.detail.substr(0, 160);
  return out;
}

// An owner that could not be read, as an error whose code says whose fault it is.
error cannot_read(const owner_fetch& f) {
  return error{failed(f), failure_code(*f.failure)};
}

std::string_view namespace_of(const pod_view& pod) {
  const auto* ns = pod.namespace_name();
  return ns != nullptr ? std::string_view(*ns) : std::string_view();
}

bool is_batch_job(const owner_ref& ref) {
  return ref.kind == "Job" && ref.group() == "batch";
}

// Where a kind stands in the order a pod's labels are read (read_pod_label).
int label_rank(const owner_kind& kind) {
  if (!kind.roles) return 1;
  return kind.roles->kind == role_layout::shape::own ? 2 : 0;
}

// Each kind, in the order a pod's labels are read, until `visit` returns true.
template <class Visit>
void in_label_order(const owner_kind_set& kinds, Visit visit) {
  for (int rank = 0; rank <= 2; ++rank) {
    for (const auto& k : kinds.all()) {
      if (label_rank(k) == rank && visit(k)) return;
    }
  }
}

const std::string_view* label_value(const pod_view& pod, std::string_view key,
                                    std::string_view& from) {
  if (key.empty()) return nullptr;
  if (const auto* v = pod.label(key); v != nullptr && !v->empty()) {
    from = "label";
    return v;
  }
  const auto* v = pod.annotation(key);
  from = "annotation";
  return v != nullptr && !v->empty() ? v : nullptr;
}

// The owner a pod's controller names on it (its job and uid labels: JobSet's on every pod), read
// directly instead of through the pod's Job. The uid makes it as safe as an ownerReference.
std::optional<owner_ref> owner_from_labels(const pod_view& pod, const owner_kind_set& kinds) {
  std::optional<owner_ref> out;
  in_label_order(kinds, [&](const owner_kind& k) {
    if (k.labels.uid.empty() || !k.roles) return false;
    const auto* name = pod.label(k.labels.job);
    const auto* uid = pod.label(k.labels.uid);
    if (name == nullptr || uid == nullptr || name->empty() || uid->empty()) return false;
    out = owner_ref{k.group.empty() ? k.versions.front() : k.group + "/" + k.versions.front(),
                    k.kind, std::string(namespace_of(pod)), std::string(*name), std::string(*uid)};
    return true;
  });
  return out;
}

// The counts an owner object of a known kind gives, once it is fetched.
owner_step<result<std::optional<owner_counts>>> counts_of(const owner_ref& ref,
                                                          const owner_kind& kind,
                                                          std::string_view role,
                                                          const owner_values& owners) {
  const auto* f = owners.find(ref);
  if (f == nullptr) return ref;
  if (f->failure) return result<std::optional<owner_counts>>(cannot_read(*f));
  // As read with the object; else (an object read as no kind) read now.
  const auto* reading = f->fetched->reading(kind);
  std::optional<owner_reading> read_now;
  if (reading == nullptr) reading = &read_now.emplace(read_owner(f->object(), kind, ref));
  const auto& roles = *reading->roles;
  if (!roles) return result<std::optional<owner_counts>>(error{roles.message(), roles.code()});
  owner_counts out;
  out.roles = roles.value();
  // A kind that is one role (a batch Job) gives the pod's own.
  if (kind.roles->kind == role_layout::shape::own) out.roles.front().role = role;
  out.every_role = kind.roles->kind != role_layout::shape::own;
  out.owner = ref.display();
  out.ref = ref;
  out.kind = &kind;
  out.object = &f->object();
  out.name = ref.name;
  out.coordinator = reading->coordinator;
  return result<std::optional<owner_counts>>(std::optional<owner_counts>(std::move(out)));
}

}  // namespace

std::optional<error> unreadable_reference(const owner_ref& ref, const owner_kind_set& kinds,
                                          std::string_view ns) {
  const auto refused = [&](const std::string& why) {
    return error{"trainenv: owner reference " + ref.kind + " " + quote(ref.name) + ": " + why +
                     "; trainenv reads nothing for it",
                 400};
  };
  if (!is_dns_subdomain(ref.name)) return refused("its name is not a DNS subdomain");
  if (ref.uid.empty() && !ref.by_name)
    return refused("its uid is empty (an ownerReference must carry the owner's uid)");
  const auto* kind = kinds.find(ref.api_version, ref.kind);
  if (kind != nullptr && kind->cluster_scoped) {
    if (!ref.by_name || !ref.namespace_name.empty())
      return refused("a cluster-scoped object is read only as a TrainJob's runtimeRef");
    return std::nullopt;
  }
  if (ns.empty()) return refused("the pod has no namespace to read it in");
  if (!is_dns_label(ns)) return refused("the namespace " + quote(ns) + " is not a DNS label");
  if (ref.namespace_name != ns)
    return refused("it is read only in the pod's namespace " + quote(ns));
  return std::nullopt;
}

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
  const auto* job_step = object_label(&f->object(), keys::ancestor_step);
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
  std::optional<owner_ref> read_now;
  const auto& jobset = job.fetched->controller(namespace_of(pod), read_now);
  if (!jobset || kinds.find(jobset->api_version, jobset->kind) == nullptr) {
    return answer(trainer_settings_ptr());
  }
  const auto* jobset_fetch = owners.find(*jobset);
  if (jobset_fetch == nullptr) return *jobset;
  if (jobset_fetch->failure) return unreadable(*jobset_fetch);
  std::optional<owner_ref> trainjob_read_now;
  const auto& trainjob = jobset_fetch->fetched->controller(namespace_of(pod), trainjob_read_now);
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
      {},
      true};
  const auto* runtime_fetch = owners.find(runtime);
  if (runtime_fetch == nullptr) return runtime;
  if (runtime_fetch->failure) return unreadable(*runtime_fetch);
  // Each as read with its object (else read now), put together for this pod.
  const auto* trainjob_read = trainjob_fetch->fetched->reading(*trainjob_kind);
  const auto* runtime_read = runtime_fetch->fetched->reading(*runtime_kind_info);
  std::optional<trainer_settings> runtime_now;
  const auto& runtime_said =
      runtime_read != nullptr
          ? *runtime_read->runtime
          : runtime_now.emplace(read_runtime_settings(runtime_fetch->object(), runtime.display()));
  std::optional<trainjob_settings> trainjob_now;
  const auto& trainjob_said = trainjob_read != nullptr
                                  ? *trainjob_read->trainjob
                                  : trainjob_now.emplace(read_trainjob_settings(
                                        trainjob_fetch->object(), trainjob->display()));
  return answer(
      std::make_shared<const trainer_settings>(join_trainer_settings(runtime_said, trainjob_said)));
}

const owner_kind* wired_owner(const pod_view& pod, const owner_kind_set& kinds) {
  const auto& owner = pod.controller();
  if (!owner) return nullptr;
  const auto* kind = kinds.find(owner->api_version, owner->kind);
  return kind != nullptr && !kind->wired_by.empty() ? kind : nullptr;
}

pod_label read_pod_label(const pod_view& pod, const owner_kind_set& kinds, pod_label_field field) {
  pod_label out;
  in_label_order(kinds, [&](const owner_kind& k) {
    const auto& key = k.labels.*field;
    out.value = label_value(pod, key, out.from);
    if (out.value == nullptr) return false;
    out.key = key;
    out.kind = &k;
    return true;
  });
  return out;
}

std::string pod_label_names(const owner_kind_set& kinds, pod_label_field field) {
  std::vector<std::string> names;
  in_label_order(kinds, [&](const owner_kind& k) {
    const auto& key = k.labels.*field;
    if (!key.empty() && std::find(names.begin(), names.end(), key) == names.end())
      names.push_back(key);
    return false;
  });
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string("label ") + names[i];
  }
  return out.empty() ? std::string("no label (no owner kind names one)") : out;
}

const owner_kind* kind_by_labels(const pod_view& pod, const owner_kind_set& kinds,
                                 const std::string_view** job) {
  const owner_kind* found = nullptr;
  in_label_order(kinds, [&](const owner_kind& k) {
    if (!k.roles) return false;
    std::string_view from;
    const auto* name = label_value(pod, k.labels.job, from);
    if (name == nullptr) return false;
    *job = name;
    found = &k;
    return true;
  });
  return found;
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
  if (const auto named = owner_from_labels(pod, kinds)) {
    return counts_of(*named, *kinds.find(named->api_version, named->kind), role, owners);
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
  std::optional<owner_ref> read_now;
  if (const auto& parent = job->fetched->controller(namespace_of(pod), read_now)) {
    const auto* parent_kind = kinds.find(parent->api_version, parent->kind);
    if (parent_kind != nullptr && parent_kind->roles &&
        parent_kind->roles->kind != role_layout::shape::own) {
      return counts_of(*parent, *parent_kind, role, owners);
    }
  }
  return counts_of(*owner, *kind, role, owners);
}

std::string job_annotation::describe(std::string_view key) const {
  return "annotation " + std::string(key) + " of " + where;
}

std::optional<job_annotation> find_job_annotation(const pod_view& pod, const owner_values& owners,
                                                  std::string_view key) {
  if (const auto* own = pod.annotation(key)) return job_annotation{std::string(*own), "the pod"};
  for (const auto& f : owners.all()) {
    if (!f.fetched) continue;
    if (const auto* value = object_annotation(&f.object(), key))
      return job_annotation{*value, f.ref.display()};
  }
  return std::nullopt;
}

}  // namespace trainenv::core
