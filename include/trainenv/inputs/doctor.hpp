// `trainenv doctor`'s edges: the live job read out of a `kubectl get -o json` dump (--from), and
// the diagnosis shown as a table a person reads at a glance or as JSON extending preview --job's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/diagnose/doctor.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::inputs {

// What `trainenv doctor KIND/NAME` names: the kind as the API spells it, its API group, the
// version doctor reads it in, a name.
struct doctor_target {
  std::string kind;         // "TrainJob", "JobSet", "Job", "Pod"
  std::string group;        // "trainer.kubeflow.org", "jobset.x-k8s.io", "batch", ..., ""
  std::string api_version;  // "trainer.kubeflow.org/v1alpha1", ..., "v1"
  std::string name;
};

// "jobset/bert" (also trainjob, job, vcjob, pod, and their plurals); an error says which kinds.
[[nodiscard]] core::result<doctor_target> parse_doctor_target(std::string_view text);

// The job `target` names among `objects` (a --from dump's, or what server/live_job_reader read), in
// `namespace_name` (empty: any): a pod stands for its top owner; its pods are those whose
// controller chain reaches it; Services, EndpointSlices and events are the namespace's; Kueue
// Workloads and Volcano PodGroups those owned by it; every other object is an owner the layout may
// need. An error (exit 2) when the job is not among them; `source` names where they came from ("the
// --from file").
[[nodiscard]] core::result<core::live_job> live_job_from(const std::vector<nlohmann::json>& objects,
                                                         const doctor_target& target,
                                                         std::string_view namespace_name,
                                                         std::string_view source);

// The diagnosis as `-o json` prints it: preview --job's JSON of the live job's layout, with
// "doctor": {"healthy", "layoutPods", "livePods", "world", "master", "service", "rows",
// "findings", "notChecked"}.
[[nodiscard]] nlohmann::json to_json(const core::diagnosis& d);

// The same as a table: a header line (the job, its policy, world size live against the
// layout's, the master or endpoint, the Service), one row per pod, then the findings with their
// pods, evidence and fix, and the verdict.
[[nodiscard]] std::string to_table(const core::diagnosis& d);

}  // namespace trainenv::inputs
