// Where a pod stands in its job (docs/contract.md §2): job name, role, index, nodes, processes per
// node, replicas per role, rank and world size — all read from the Pod alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainenv/core/decision.hpp"
#include "trainenv/core/keys.hpp"
#include "trainenv/core/owners.hpp"
#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/policy.hpp"
#include "trainenv/core/resources.hpp"
#include "trainenv/core/result.hpp"
#include "trainenv/core/variables.hpp"

namespace trainenv::core {

struct topology {
  std::string job;
  std::string namespace_name;
  std::string role;
  std::optional<std::int64_t> index;
  std::string index_unknown_reason;  // why `index` is empty
  std::int64_t num_nodes = 1;
  resolved_nproc nproc_per_node;
  std::int64_t master_port = 0;
  std::optional<std::int64_t> gpus_per_node;  // the target container's GPU count
  std::string gpus_unknown_reason;            // why `gpus_per_node` is empty (a bad quantity)
  // The GPUs of one worker, for MPI slots: a launcher reads them from the training role's pod
  // template in its owner; any other pod from itself (gpus_per_node).
  std::optional<std::int64_t> worker_gpus;
  std::optional<std::int64_t> nproc_count;  // the processes-per-node setting, when a number
  std::vector<std::pair<std::string, std::int64_t>> replicas;  // role -> count, as declared
  bool training_role = false;
  std::optional<std::int64_t> rank;        // training roles with a known index
  std::optional<std::int64_t> world_size;  // training roles
  std::size_t container = 0;               // the target container's index
  // Where the counts came from, for /preview and the admission log.
  std::vector<value_source> sources;

  [[nodiscard]] variable_values variables() const;
};

// The role the pod plays (docs/contract.md §2): trainenv.io/role, the replicatedJob, the Volcano
// task, else "node".
[[nodiscard]] std::string pod_role(const pod_view& pod);

// The number of nodes the owners give: the pods of the policy's training roles added up (an MPI
// launcher counts its workers); a plain Job, which knows only `role`, gives that role's pods.
[[nodiscard]] std::int64_t owner_nodes(const owner_counts& owners, const policy& p,
                                       std::string_view role);

// The variables whose values come from the job's size (nodes, replicas, world, rank, slots).
inline constexpr std::uint32_t count_variables =
    variable_bit(variable::num_nodes) | variable_bit(variable::world_size) |
    variable_bit(variable::rank) | variable_bit(variable::slots) |
    variable_bit(variable::processes_per_node) | replicas_bit;
// Whether the policy uses any of them: only then are a pod's owners worth reading, and only
// then is the pod's index checked against its role's replicas.
[[nodiscard]] inline bool uses_counts(const policy& p) {
  return (p.variables_used & count_variables) != 0;
}

// Whether the pod's annotations give its counts (trainenv.io/num-nodes or trainenv.io/replicas):
// then no owner is read for them.
[[nodiscard]] bool has_explicit_counts(const pod_view& pod);

// Violations come back as errors whose message starts "trainenv: " and names the key, the
// value and the expected form. `pod` has passed check_pod_shape, which found `target`. `owners`:
// the counts read from the pod's owners, when its annotations left them open (else null: the
// annotations, or for a bare pod the policy's defaults).
[[nodiscard]] result<topology> resolve_topology(const pod_view& pod, const policy& p,
                                                std::size_t target,
                                                const owner_counts* owners = nullptr);

// "master=1,worker=3" -> [(master,1),(worker,3)].
[[nodiscard]] result<std::vector<std::pair<std::string, std::int64_t>>> parse_replicas(
    std::string_view text);

}  // namespace trainenv::core
