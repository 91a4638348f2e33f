// What the controllers create for a job a user applies (docs/contract.md §5, `preview --job`):
// Kubeflow Trainer turns a TrainJob and its runtime into a JobSet (with what its plugins write
// into the pod templates, and the MPI hostfile ConfigMap), JobSet into Jobs, the Job controller
// into pods, Volcano into pods. Each step is written from that controller's own code (docs/
// upstream-controllers.md), independently of the naming rules trainenv reads as data, so that a
// preview checks one against the other. Pure: objects in, objects out.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// One pod as its controller creates it, before admission.
// (clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.)
struct created_pod {  // NOLINT(bugprone-exception-escape)
  std::string name;   // its name, or its generateName without the trailing '-' ("bert-node-0-1")
  std::string role;   // its replicatedJob or task
  std::string step;   // Trainer's ancestor-step label on its Job's template, if any
  // Its role is another's dependsOn with status Complete: it has finished before that one starts.
  bool prerequisite = false;
  // Its controller leaves it out of the job: a Volcano task its mpi plugin's flags do not name,
  // which MPI_HOST does not list.
  bool left_out = false;
  nlohmann::json pod;
};

struct created_job {
  std::string kind;  // "TrainJob", "JobSet", "Job", "Volcano Job"
  std::string name;
  std::string namespace_name;
  // Every object made on the way, the applied one first (with a uid), then JobSets, Jobs and
  // ConfigMaps: what the pods' owner lookups find.
  std::vector<nlohmann::json> objects;
  std::vector<created_pod> pods;
  // Whether its launcher is a node (hostfile checks): a TrainJob's runtime says
  // runLauncherAsNode, a hand-written job trainenv.io/run-launcher-as-node on its template.
  bool launcher_is_node = false;
  std::vector<std::string> notes;  // what the preview should tell ("no svc plugin: no DNS names")
};

// The objects `job` names that must come from elsewhere before it can be laid out: a TrainJob's
// runtime.
[[nodiscard]] std::vector<owner_ref> job_needs(const nlohmann::json& job);

// Which release of a controller to model, where releases differ in what they write.
struct controller_model {
  // Volcano before PR #4281 (v1.12): its pytorch plugin counts every task in WORLD_SIZE.
  bool volcano_counts_every_task = false;
};

// How much of a job a preview lays out: each pod is decided, and every object made (pods, Jobs,
// Services) is held, so the cost grows with their number and their size, not with the job's
// text (a 9 KB JobSet can ask for 30,000 Jobs). `bytes` counts the text of the templates each
// object is made from.
struct preview_bounds {
  std::size_t pods = 20'000;
  std::size_t objects = 40'000;
  std::size_t bytes = std::size_t{1} << 30;
};
// The command line's (trainenv preview --job): 20,000 pods took 1.6 s and 470 MB.
inline constexpr preview_bounds cli_preview_bounds{};

// Lays out `job` (a TrainJob, JobSet, batch/v1 Job or Volcano Job) as its controllers would;
// `given` holds what job_needs named. An error names what is missing or not understood, or the
// bound a job passes.
[[nodiscard]] result<created_job> create_job(const nlohmann::json& job_object,
                                             const std::vector<nlohmann::json>& given,
                                             const preview_bounds& bounds = cli_preview_bounds,
                                             const controller_model& model = {});

}  // namespace trainenv::core
