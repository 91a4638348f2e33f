// Where a pod stands in its job (docs/contract.md §2, §2.2): job name, role, the job's layout
// and the pod's place in it (index, node rank, master, world), processes per node and MPI slots —
// from the pod's annotations and labels, its owners when they were read, and the policy's
// defaults, with where each value came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainenv/core/job/layout.hpp"
#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/job/resources.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/policy/variables.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

struct topology {
  std::string job;
  std::string namespace_name;
  std::string role;
  job_layout layout;
  std::size_t role_at = 0;  // the pod's role in layout.roles
  std::optional<std::int64_t>
      index;                         // the pod's place in its role (job index x pods per Job + ...)
  std::string index_unknown_reason;  // why `index` is empty
  std::int64_t job_index = 0;        // its Job within the role
  std::int64_t num_nodes = 1;
  resolved_nproc nproc_per_node;
  std::int64_t master_port = 0;
  std::optional<std::int64_t> gpus_per_node;  // the target container's GPU count
  std::string gpus_unknown_reason;            // why `gpus_per_node` is empty (a bad quantity)
  // The GPUs of one worker, for MPI slots: a pod that is not a node reads them from the first
  // node role's pod template in its owner; a node from itself (gpus_per_node).
  std::optional<std::int64_t> worker_gpus;
  std::optional<std::int64_t> nproc_count;  // the processes-per-node setting, when a number
  std::string ssh_auth_mount_path;
  std::int64_t ssh_key_mode = 0600;
  std::string ssh_secret;  // ${sshSecret}
  std::string cluster_domain;
  std::optional<elastic_mode> elastic;  // an elastic job's bounds
  std::string job_uid;
  // The pod's own "<hostname>.<subdomain>", as its controller set them: what the layout must call
  // it too (docs/contract.md §2.2, the self-check).
  std::string own_name;
  // What the pod should hear about its layout (a coordinator outside the world), as warnings.
  std::vector<std::string> notes;
  std::optional<std::int64_t> node_rank;   // a node with a known index
  std::optional<std::int64_t> world_size;  // training roles
  // layout.master(), worked out once: ${masterAddr}, the rendezvous endpoint, the self-check and
  // the readiness wait all read it, and each working-out renders the naming rule.
  result<std::string> master = std::string();
  std::size_t container = 0;  // the target container's index
  // Where the counts came from, for /preview and the admission log.
  std::vector<value_source> sources;
  // The variables whose values only the pod's owners can tell (a used() mask): set when the pod
  // has owners that were not read; a policy that uses one for this pod needs them read.
  variable_mask owner_open = 0;
  // The flags, together (no padding between them).
  bool nproc_one_means_gpus = false;  // Trainer's MPI rule (trainer_settings)
  bool ssh_keys_provided = false;     // ${sshKeysProvided}: the image or the controller brings them
  bool c10d = false;                  // the job rendezvous with c10d (elastic, or asked)
  bool training_role = false;
  // It runs the MPI launcher: role launcher, or node rank 0 of an MPI job with no launcher role
  // (every pod alike, rank 0 calls mpirun; docs/contract.md §2.2). It then gets what a policy
  // gives role launcher (the hostfile, the launcher's variables) besides its own role's.
  bool launches = false;
  // The counts are the job's (from its owner, the annotations, or a bare pod's policy defaults),
  // not a placeholder for owners not read: a layout with no node is then the job's own.
  bool counts_known = false;

  [[nodiscard]] variable_values variables() const;
  // Whether a policy item for `roles` applies to this pod's role (or, when it launches, to
  // role launcher).
  [[nodiscard]] bool in_scope(const role_scope& roles) const;
  // "<hostname>.<subdomain>.<namespace>.svc.<cluster domain>" of node rank 0: where a c10d
  // rendezvous is hosted (docs/contract.md §2.3).
  [[nodiscard]] result<std::string> rendezvous_host() const;

 private:
  void set_rendezvous(variable_values& v) const;
};

// The role the pod plays (docs/contract.md §2): trainenv.io/role, else the entry its controller's
// role label names (JobSet's replicatedjob-name, Volcano's task-spec: owners.yaml's podLabels),
// else "node".
[[nodiscard]] std::string pod_role(const pod_view& pod, const owner_kind_set& kinds);
// The name its controller gives the pod's role entry (its podLabels.role), which its DNS name
// carries; else its role.
[[nodiscard]] std::string pod_entry(const pod_view& pod, const owner_kind_set& kinds);

// The variables whose values come from the job's layout (nodes, replicas, world, ranks, master,
// hosts, slots): only a policy that uses one for a pod makes its owners worth reading, and only
// then is the pod's index checked against its role's pods.
inline constexpr variable_mask layout_variables =
    variable_bit(variable::num_nodes) | variable_bit(variable::world_size) |
    variable_bit(variable::rank) | variable_bit(variable::node_rank) |
    variable_bit(variable::master_addr) | variable_bit(variable::host) |
    variable_bit(variable::slots) | variable_bit(variable::processes_per_node) |
    variable_bit(variable::subdomain) | variable_bit(variable::rdzv_endpoint) | replicas_bit;
// The variables that name pods: a pod whose policy uses one is checked against its layout's name
// for it (docs/contract.md §2.2).
inline constexpr variable_mask naming_variables =
    variable_bit(variable::master_addr) | variable_bit(variable::host) |
    variable_bit(variable::subdomain) | variable_bit(variable::rdzv_endpoint);

[[nodiscard]] inline bool uses_counts(const policy& p) {
  return (p.variables_used & layout_variables) != 0;
}

// What topology reads besides the pod and the policy.
struct topology_sources {
  const owner_kind_set* kinds = nullptr;  // the naming rules, for a pod whose owners are not read
  const std::vector<accelerator>* accelerators = nullptr;  // what processes per node counts
  const owner_counts* owners = nullptr;                    // the layout owner's roles, when read
  const trainer_settings* trainer = nullptr;               // a Trainer pod's TrainJob and runtime
  bool has_owner = false;  // the pod has a controlling owner (read or not)
  std::string cluster_domain{default_cluster_domain};  // ${clusterDomain}: serve --cluster-domain
  const elastic_reading* elastic = nullptr;  // the job's elastic bounds, read by the engine
  std::string job_uid;                       // ${rdzvId}
};

// The code of an error that says the pod contradicts the owner it was sized from (its index past
// the owner's pods, its Job past its Jobs): the owner is read anew before it is a violation.
inline constexpr int contradicts_owner = 409;

// Violations come back as errors whose message starts "trainenv: " and names the key, the
// value and the expected form. `pod` has passed check_pod_shape, which found `target_index`.
[[nodiscard]] result<topology> resolve_topology(const pod_view& pod, const policy& p,
                                                std::size_t target_index,
                                                const topology_sources& src);

// "master=1,worker=3" -> [(master,1),(worker,3)].
[[nodiscard]] result<std::vector<std::pair<std::string, std::int64_t>>> parse_replicas(
    std::string_view text);

}  // namespace trainenv::core
