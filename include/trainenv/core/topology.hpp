// Where a pod stands in its job (docs/contract.md §2): job name, role, index, nodes, processes per
// node, replicas per role, rank and world size — all read from the Pod alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainenv/core/keys.hpp"
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
  std::optional<std::int64_t> nproc_count;    // the processes-per-node setting, when a number
  std::vector<std::pair<std::string, std::int64_t>> replicas;  // role -> count, as declared
  bool training_role = false;
  std::optional<std::int64_t> rank;        // training roles with a known index
  std::optional<std::int64_t> world_size;  // training roles
  std::size_t container = 0;               // the target container's index

  [[nodiscard]] variable_values variables() const;
};

// Violations come back as errors whose message starts "trainenv: " and names the key, the
// value and the expected form. `pod` has passed check_pod_shape, which found `target`.
[[nodiscard]] result<topology> resolve_topology(const pod_view& pod, const policy& p,
                                                std::size_t target);

// "master=1,worker=3" -> [(master,1),(worker,3)].
[[nodiscard]] result<std::vector<std::pair<std::string, std::int64_t>>> parse_replicas(
    std::string_view text);

}  // namespace trainenv::core
