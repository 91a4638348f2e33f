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

#include "trainenv/core/owners.hpp"
#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/result.hpp"

namespace trainenv::core {

// A step's answer, or the object it needs first.
template <class T>
using owner_step = std::variant<T, owner_ref>;

template <class T>
[[nodiscard]] const owner_ref* needed(const owner_step<T>& step) {
  return std::get_if<owner_ref>(&step);
}

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
  const nlohmann::json* job = nullptr;  // through_job: the Job, inside the owner_values
};
[[nodiscard]] owner_step<recognition> recognise(const pod_view& pod, const owner_values& owners);

// The framework named by the runtime of the pod's TrainJob (Pod -> Job -> JobSet -> TrainJob ->
// spec.runtimeRef -> (Cluster)TrainingRuntime's framework label), for a pod recognised through
// its Job. No framework (and no error) when the chain ends early: a JobSet that no TrainJob owns.
struct runtime_framework {
  std::optional<std::string> framework;
  std::string source;  // "label trainer.kubeflow.org/framework of ClusterTrainingRuntime x"
};
[[nodiscard]] owner_step<result<runtime_framework>> framework_from_runtime(
    const pod_view& pod, const nlohmann::json& job, const owner_values& owners,
    const owner_kind_set& kinds);

// The pod counts its owners give. nullopt: a bare pod, with no controlling owner to ask.
[[nodiscard]] owner_step<result<std::optional<owner_counts>>> counts_from_owners(
    const pod_view& pod, std::string_view role, const owner_values& owners,
    const owner_kind_set& kinds);

}  // namespace trainenv::core
