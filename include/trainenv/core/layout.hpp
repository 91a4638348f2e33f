// The job's layout (docs/contract.md §2.2): its roles in node order, the Jobs and pods of each,
// which roles train and which are the job's nodes, and how its controller names their pods.
// Built once per admission, from the pod's owners or, when they need not be read, from the pod's
// annotations and labels; every address and node rank a policy injects is read from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/owners.hpp"
#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"

namespace trainenv::core {

struct layout_role {
  std::string name;
  std::int64_t pods = 0;  // in all, over its Jobs
  std::int64_t jobs = 1;  // the Jobs it runs (a JobSet replicatedJob's replicas); pods split evenly
  // False for a role whose Job count only its owner knows and the owner was not read: its
  // pods' names are then unknown past its first Job.
  bool jobs_known = true;
  // Kubeflow Trainer's ancestor-step label on its templates ("dataset-initializer"), if any: a
  // role whose label is another step's never trains.
  std::string step;
  // False for the pod's own role when trainenv.io/replicas leaves it out: it counts no pods and
  // never trains.
  bool listed = true;
  bool training = false;  // WORLD_SIZE and RANK; `roles: [training]` in policies
  bool node = false;      // a node of the job: has a node rank, and a line in the hostfile
  const nlohmann::json* pod_template = nullptr;  // into the owner object, when it was read

  [[nodiscard]] std::int64_t pods_per_job() const { return jobs > 0 ? pods / jobs : 0; }
};

// The DNS names of one role's pods: prefix + <job> + middle + <i> + suffix, for each of its
// Jobs (0..jobs-1; no Job number at all when the controller's rule writes none) and i from 0 to
// its pods per Job - 1. A whole role in one line, whatever its size.
struct host_group {
  std::string prefix;
  std::optional<std::int64_t> jobs;  // none: the rule names no Job (one Job)
  std::string middle;
  std::int64_t pods_per_job = 0;
  std::string suffix;

  [[nodiscard]] std::int64_t pods() const { return jobs.value_or(1) * pods_per_job; }
  // The name of the pod at `position` (job-major, as the node order is).
  [[nodiscard]] std::string name(std::int64_t position) const;
};

struct job_layout {
  std::vector<layout_role> roles;  // master, worker, node first, then the owner's own order
  std::vector<std::size_t> nodes;  // the node roles, in node order (a launcher node last)
  // Naming: the owner kind's rule, the name it starts from (${job}) and the subdomain. Without a
  // rule or a subdomain, `unnamed` says why no pod of the job has a DNS name trainenv can tell.
  const pod_naming* naming = nullptr;
  std::string naming_kind;  // "JobSet", for messages
  std::string job;
  std::string subdomain;
  std::string unnamed;
  std::string source;    // where the roles came from: "JobSet team-a/bert", "annotation ..."
  std::string no_nodes;  // set by settle_roles when no node role runs a pod: says so
  bool launcher_is_node = false;
  // The pod being decided, when its own spec.hostname and spec.subdomain name it: they win for
  // that pod (docs/contract.md §2.2).
  std::optional<std::pair<std::size_t, std::int64_t>> self;
  std::string self_name;

  [[nodiscard]] const layout_role* find(std::string_view role) const;
  [[nodiscard]] layout_role* find(std::string_view role);
  [[nodiscard]] std::optional<std::size_t> index_of(std::string_view role) const;
  [[nodiscard]] std::int64_t node_count() const;     // the pods of the node roles
  [[nodiscard]] std::int64_t training_pods() const;  // the pods of the training roles
  // The node rank of the pod at `position` in role `role` (an index into roles): its place among
  // the nodes. nullopt when the role is not a node role.
  [[nodiscard]] std::optional<std::int64_t> node_rank(std::size_t role,
                                                      std::int64_t position) const;
  // "<hostname>.<subdomain>" of the pod at `position` in role `role`, by the controller's rule.
  [[nodiscard]] result<std::string> dns_name(std::size_t role, std::int64_t position) const;
  // The DNS name of node rank 0 (`<master>`).
  [[nodiscard]] result<std::string> master() const;
  // Every node's DNS name, in node order, one group per node role. Fails when a name cannot be
  // told (no naming rule, or a Job count only the owner knows).
  [[nodiscard]] result<std::vector<host_group>> host_groups() const;
  // The names of role `role`'s pods (its Job count as known, or 1).
  [[nodiscard]] result<host_group> names_of(std::size_t role) const;
};

// Orders `layout.roles` (master, worker, node first, then as given) and settles which roles train
// and which are nodes (docs/contract.md §2.2): the policy's training roles that the layout has;
// when it has none of them and the layout is the job's own (`read_from_owner`: not what a pod's
// annotations sketch of it), every role but the launcher and Trainer's initializers. An MPI
// launcher run as a node comes last.
void settle_roles(job_layout& layout, const policy& p, bool read_from_owner);

// The pod's naming rule, its job name and subdomain, from `kind`'s rule and, when read, the owner
// object (`owner`, whose metadata.name is ${job}); else from the pod's own label and
// spec.subdomain.
void set_naming(job_layout& layout, const owner_kind& kind, const nlohmann::json* owner,
                std::string_view job, const std::string_view* pod_subdomain);

}  // namespace trainenv::core
