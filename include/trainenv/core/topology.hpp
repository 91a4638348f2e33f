// Where a pod stands in its job (docs/contract.md §2): job name, role, index, nodes, processes per
// node, replicas per role, rank and world size — all read from the Pod alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"
#include "trainenv/core/template.hpp"

namespace trainenv::core {

// The keys trainenv reads, in one place so messages and docs name them identically.
namespace keys {
inline constexpr std::string_view ancestor_step = "trainer.kubeflow.org/trainjob-ancestor-step";
inline constexpr std::string_view framework = "trainer.kubeflow.org/framework";
inline constexpr std::string_view trainjob_name = "trainer.kubeflow.org/trainjob-name";
inline constexpr std::string_view jobset_name = "jobset.sigs.k8s.io/jobset-name";
inline constexpr std::string_view jobset_uid = "jobset.sigs.k8s.io/jobset-uid";
inline constexpr std::string_view job_index = "jobset.sigs.k8s.io/job-index";
inline constexpr std::string_view replicated_job = "jobset.sigs.k8s.io/replicatedjob-name";
inline constexpr std::string_view completion_index = "batch.kubernetes.io/job-completion-index";
inline constexpr std::string_view volcano_job = "volcano.sh/job-name";
inline constexpr std::string_view volcano_task = "volcano.sh/task-spec";
inline constexpr std::string_view volcano_index = "volcano.sh/task-index";
inline constexpr std::string_view inject = "trainenv.io/inject";
inline constexpr std::string_view policy = "trainenv.io/policy";
inline constexpr std::string_view role = "trainenv.io/role";
inline constexpr std::string_view num_nodes = "trainenv.io/num-nodes";
inline constexpr std::string_view nproc_per_node = "trainenv.io/nproc-per-node";
inline constexpr std::string_view replicas = "trainenv.io/replicas";
inline constexpr std::string_view master_port = "trainenv.io/master-port";
inline constexpr std::string_view injected = "trainenv.io/injected";
}  // namespace keys

struct topology {
  std::string job;
  std::string namespace_name;
  std::string role;
  std::optional<std::int64_t> index;
  std::string index_unknown_reason;  // why `index` is empty
  std::int64_t num_nodes = 1;
  std::string nproc_per_node;  // resolved: a whole number, "auto" or "gpu"
  std::int64_t master_port = 0;
  std::optional<std::int64_t> gpus_per_node;  // the target container's GPU count
  std::string gpus_unknown_reason;            // why `gpus_per_node` is empty (a bad quantity)
  std::optional<std::int64_t> nproc_count;    // the processes-per-node setting, when a number
  std::vector<std::pair<std::string, std::int64_t>> replicas;  // role -> count, as declared
  bool training_role = false;
  std::optional<std::int64_t> rank;        // training roles with a known index
  std::optional<std::int64_t> world_size;  // training roles
  std::size_t container = 0;               // the target container's index

  [[nodiscard]] variable_values variables() const;
};

// Violations come back as errors whose message starts "trainenv: " and names the key, the
// value and the expected form.
[[nodiscard]] result<topology> resolve_topology(const pod_view& pod, const policy& p);

// "master=1,worker=3" -> [(master,1),(worker,3)].
[[nodiscard]] result<std::vector<std::pair<std::string, std::int64_t>>> parse_replicas(
    std::string_view text);

// Processes per node from a setting and the container's resources (Kubeflow Trainer's rule).
[[nodiscard]] result<std::string> resolve_nproc(const nproc_setting& setting,
                                                const nlohmann::json& container);

}  // namespace trainenv::core
