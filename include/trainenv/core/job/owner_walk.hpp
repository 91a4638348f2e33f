// Walking a pod's owners one object at a time (docs/contract.md §1, §2.1): each step answers
// from the objects fetched so far, or names the next object to fetch. Pure: the shell fetches
// it (API, cache, or --owners file), adds it (or why it failed) to the owner_values, and asks
// again. Failures come back as values, so that the rules of what fails open (recognising) and
// what fails closed (sizing, the framework) stay here.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// A step's answer, or the object it needs first.
template <class T>
using owner_step = std::variant<T, owner_ref>;

template <class T>
[[nodiscard]] const owner_ref* needed(const owner_step<T>& step) {
  return std::get_if<owner_ref>(&step);
}

// Why the shell may not read `ref` for a pod of namespace `ns`, or nothing (docs/contract.md §5:
// reads are bound to the request): its name must be a DNS subdomain; a namespaced kind is read
// only in `ns`, a DNS label; a cluster-scoped one only when named by a TrainJob's runtimeRef; and
// a reference without a uid reads nothing but a runtimeRef's object. The error's code is 400 and
// its message names the reference and the form expected.
[[nodiscard]] std::optional<error> unreadable_reference(const owner_ref& ref,
                                                        const owner_kind_set& kinds,
                                                        std::string_view ns);

// Whether a pod is a training pod: its own ancestor-step label, or (Kubeflow Trainer's layout)
// its controlling Job's.
struct recognition {
  enum class verdict : std::uint8_t {
    training,      // the pod carries the label
    through_job,   // its Job carries it
    not_training,  // neither does
    unknown,       // a JobSet pod whose Job could not be read: passes, with a warning
  };
  verdict kind = verdict::not_training;
  std::string reason;  // not_training, unknown: why, for the answer's message or warning
  const owner_fetch* job = nullptr;  // through_job: the Job, inside the owner_values
};
[[nodiscard]] owner_step<recognition> recognise(const pod_view& pod, const owner_values& owners);

// What a pod's TrainJob and its runtime say (docs/contract.md §1, §2.1), for a pod recognised
// through its Job: Pod -> Job -> JobSet -> TrainJob -> spec.runtimeRef -> (Cluster)TrainingRuntime.
// Put together for each pod from what was read with the two objects (owner_reading).
using trainer_settings_ptr = std::shared_ptr<const trainer_settings>;
// Null when the chain ends early: a JobSet no TrainJob owns.
[[nodiscard]] owner_step<result<trainer_settings_ptr>> trainer_runtime(const pod_view& pod,
                                                                       const owner_fetch& job,
                                                                       const owner_values& owners,
                                                                       const owner_kind_set& kinds);

// The kind of the pod's controlling owner when its own operator wires its pods (Kubeflow's v1
// PyTorchJob, MPIJob, ...): such a pod passes unchanged, and no object is read.
[[nodiscard]] const owner_kind* wired_owner(const pod_view& pod, const owner_kind_set& kinds);

// A label its controller writes on a pod (owner_kind::labels), read from the pod: the first kind
// whose label of that meaning the pod carries (a label, else an annotation of that key), kinds
// that lay out every role (a JobSet) before those without roles (a TrainJob) and those that are
// one role (a Job), as a JobSet's pods carry their Job's labels too. `value` is null when the
// pod carries none.
struct pod_label {
  const std::string_view* value = nullptr;
  std::string_view from;  // "label" or "annotation"
  std::string_view key;
  const owner_kind* kind = nullptr;
};
using pod_label_field = std::string pod_labels::*;
[[nodiscard]] pod_label read_pod_label(const pod_view& pod, const owner_kind_set& kinds,
                                       pod_label_field field);
// Every kind's label of that meaning, for a message: "label a, label b or label c".
[[nodiscard]] std::string pod_label_names(const owner_kind_set& kinds, pod_label_field field);

// The kind of job the pod's labels say it belongs to, when its owners are not read: the first
// kind with roles whose job label the pod carries, in read_pod_label's order. `job` receives
// that label's value (the job's name).
[[nodiscard]] const owner_kind* kind_by_labels(const pod_view& pod, const owner_kind_set& kinds,
                                               const std::string_view** job);

// The kind whose default policy the pod takes (docs/contract.md §1): its controlling owner's, else
// the one its labels name.
[[nodiscard]] const owner_kind* pod_owner_kind(const pod_view& pod, const owner_kind_set& kinds);

// Whether the pod has a controlling owner at all (a bare pod has none to ask).
[[nodiscard]] bool has_controller(const pod_view& pod);

// The pod counts its owners give, and the object that gave them. nullopt: a bare pod, with no
// controlling owner to ask. An error carries the status code of the failure (failure_code).
[[nodiscard]] owner_step<result<std::optional<owner_counts>>> counts_from_owners(
    const pod_view& pod, std::string_view role, const owner_values& owners,
    const owner_kind_set& kinds);

// An annotation the job gives the pod: the pod's own, else that of the first owner the walk read
// that has it, and where it was found ("the pod", "JobSet team-a/bert").
struct job_annotation {
  std::string value;
  std::string where;

  // "annotation trainenv.io/elastic of JobSet team-a/bert", for messages.
  [[nodiscard]] std::string describe(std::string_view key) const;
};
[[nodiscard]] std::optional<job_annotation> find_job_annotation(const pod_view& pod,
                                                                const owner_values& owners,
                                                                std::string_view key);

}  // namespace trainenv::core
