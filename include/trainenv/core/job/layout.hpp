// The job's layout (docs/contract.md §2.2): its roles in node order, the Jobs and pods of each,
// which roles are out of the world (initializers, finished prerequisites, opted-out and unlabelled
// side roles), which train and which are the job's nodes, the coordinator, and how its controller
// names their pods. Built once per admission, from the pod's owners or, when they need not be
// read, from the pod's annotations and labels; every address and node rank a policy injects is
// read from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

struct layout_role {
  std::string name;       // the role its pods play (a template's trainenv.io/role, else `entry`)
  std::string entry;      // the owner's name for it, which its pods' DNS names carry (role_pods)
  std::int64_t pods = 0;  // in all, over its Jobs
  std::int64_t jobs = 1;  // the Jobs it runs (a JobSet replicatedJob's replicas); pods split evenly
  // False for a role whose Job count only its owner knows and the owner was not read: its
  // pods' names are then unknown past its first Job.
  bool jobs_known = true;
  // Kubeflow Trainer's ancestor-step label on its templates ("dataset-initializer"), if any: a
  // role whose label is another step's never trains.
  std::string step;
  bool opted_out = false;  // its pod template says trainenv.io/inject: "false"
  // A role that depends on this one with status Complete: this one has finished before it starts.
  std::string completes_before;
  // False for the pod's own role when trainenv.io/replicas leaves it out: it counts no pods and
  // never trains.
  bool listed = true;
  std::size_t owner_order = 0;  // its place in the owner's own list: the MPI hostfile's order
  std::string outside;          // why it is out of the world; empty when it is in
  std::string left_out;         // set when a job plugin leaves it out (role_pods::left_out)
  bool training = false;        // WORLD_SIZE and RANK; `roles: [training]` in policies
  bool node = false;            // a node of the job: has a node rank, and a line in the hostfile
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
  // Naming: the owner kind's rule, the name it starts from (${job}) and where the subdomain comes
  // from. Without a rule, or when the controller names no pod at all, `unnamed` says why.
  const pod_naming* naming = nullptr;
  const owner_kind* kind = nullptr;  // the owner kind whose rule names them, when one does
  std::string naming_kind;           // "JobSet", for messages
  std::string job;
  std::string unnamed;
  std::string subdomain;        // the owner's (or its default, or the pod's own when not read)
  bool template_first = false;  // a role's template's own spec.subdomain wins over `subdomain`
  std::string templates_only;   // set: only templates name pods (says why: DNS hostnames off)
  std::string source;           // where the roles came from: "JobSet team-a/bert", "annotation ..."
  std::string no_nodes;         // set by settle_roles when no node role runs a pod: says so
  bool launcher_is_node = false;
  // The pod the owner names as its master (JobSet's coordinator), when it is in the world: node
  // rank 0, the others following in node order. `coordinator_note` says why a named one is not.
  std::optional<std::pair<std::size_t, std::int64_t>> coordinator;
  std::string coordinator_note;
  // The ports the owner's job plugins name (Volcano's pytorch plugin's --port, its mpi plugin's):
  // the master's, and the one sshd listens on.
  std::optional<std::int64_t> plugin_master_port;
  std::optional<std::int64_t> plugin_ssh_port;
  // Whether the Service that names the pods publishes them before they are Ready, when the owner
  // was read and its kind says how to tell (pod_naming::not_ready); none: unknown.
  std::optional<bool> not_ready_published;
  // Set when the owner's controller mounts the job's SSH keys (owner_kind::ssh_keys): says where.
  std::string ssh_keys_by;

  [[nodiscard]] const layout_role* find(std::string_view role) const;
  [[nodiscard]] layout_role* find(std::string_view role);
  [[nodiscard]] std::optional<std::size_t> index_of(std::string_view role) const;
  // The role whose owner entry is named `entry` (dependsOn, a coordinator, a plugin's arguments).
  [[nodiscard]] std::optional<std::size_t> index_of_entry(std::string_view entry) const;
  [[nodiscard]] std::int64_t node_count() const;     // the pods of the node roles
  [[nodiscard]] std::int64_t training_pods() const;  // the pods of the training roles
  // The node rank of the pod at `position` in role `role` (an index into roles): its place among
  // the nodes, the coordinator first. nullopt when the role is not a node role.
  [[nodiscard]] std::optional<std::int64_t> node_rank(std::size_t role,
                                                      std::int64_t position) const;
  // The subdomain of role `role`'s pods, by the controller's rule; an error says why they have
  // none, or that it is no DNS label.
  [[nodiscard]] result<std::string> subdomain_of(std::size_t role) const;
  // "<hostname>.<subdomain>" of the pod at `position` in role `role`, by the controller's rule.
  [[nodiscard]] result<std::string> dns_name(std::size_t role, std::int64_t position) const;
  // The DNS name of node rank 0, or why it has none.
  [[nodiscard]] result<std::string> rank0_name() const;
  // `<master>`: rank0_name(), or "localhost" for a world of one pod that has no name.
  [[nodiscard]] result<std::string> master() const;
  // The subdomain a pod searches to find the job's launcher by its bare hostname (Hydra): the
  // launcher's, else the master's.
  [[nodiscard]] result<std::string> launcher_subdomain() const;
  // Every node's DNS name, one group per node role, in the owner's order of its roles (as
  // Trainer's MPI plugin writes the hostfile). Fails when a name cannot be told (no naming
  // rule, or a Job count only the owner knows).
  [[nodiscard]] result<std::vector<host_group>> host_groups() const;
  // The names of role `role`'s pods (its Job count as known, or 1).
  [[nodiscard]] result<host_group> names_of(std::size_t role) const;
};

// An elastic job (docs/contract.md §2.3): torchrun's --nnodes bounds, its restarts when given,
// and where they were read.
struct elastic_mode {
  std::int64_t min = 1;
  std::int64_t max = 1;
  std::optional<std::int64_t> max_restarts;
  std::string source;  // "annotation trainenv.io/elastic of JobSet team-a/bert"
};

// What a job says of its size (read by elastic.hpp from the pod and its owners).
struct elastic_reading {
  std::optional<elastic_mode> elastic;
  bool rendezvous_c10d = false;    // a static job's trainenv.io/rendezvous: c10d
  std::vector<std::string> notes;  // warnings: Kueue's elastic job without bounds, ...
};

// How the job's world is drawn (docs/contract.md §2.2, "the world").
struct world_rules {
  // The layout is the job's own (read from its owner), not what a pod's annotations sketch.
  bool read_from_owner = false;
  // A Kubeflow Trainer TrainJob: its MPI workers are the role named node, as its MPI plugin picks
  // them.
  bool trainer_workers = false;
};

// Orders `layout.roles` (master, worker, node first, then as given), marks the roles out of the
// world and settles which roles train and which are nodes (docs/contract.md §2.2): of the roles
// left, the policy's training roles when they are strict or the layout is not the owner's,
// else every one but a launcher; for an MPI policy its workers. An MPI launcher run as a node
// comes last in node order. Places the coordinator, when the owner names one.
void settle_roles(job_layout& layout, const policy& p, const world_rules& rules,
                  const std::optional<coordinator_pod>& coordinator);

// The pod's naming rule, its job name and subdomain, from `kind`'s rule and, when read, the owner
// object (`owner`, whose metadata.name is ${job}); else from the pod's own label and
// spec.subdomain (`has_owner`: the pod has a controller that was not read).
void set_naming(job_layout& layout, const owner_kind& kind, const nlohmann::json* owner,
                std::string_view job, const std::string_view* pod_subdomain, bool has_owner);

}  // namespace trainenv::core
