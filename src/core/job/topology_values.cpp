// A topology as the template variables a policy renders (${numNodes}, ${rank}, ...), and the
// rendezvous endpoint of an elastic or c10d job (docs/contract.md §2.3).
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core {

result<std::string> topology::rendezvous_host() const {
  // The endpoint pod: the coordinator, else index 0 of the first node role (the pod an Indexed
  // Job keeps while it shrinks): node rank 0 either way. Only a job that stays one pod may
  // rendezvous on localhost.
  auto name = elastic && elastic->max > 1 ? layout.rank0_name() : master;
  if (!name) {
    if (!elastic || elastic->max <= 1) return name;
    return error{name.message() + " (the elastic job, " + elastic->source + ", may grow to " +
                 std::to_string(elastic->max) + " pods, and rendezvous at its first pod's name)"};
  }
  if (*name == "localhost") return name;
  // Its full name: torch's c10d hosts the store only on the agent whose own names match the
  // endpoint, and the kubelet's /etc/hosts lists the full name, not hostname.subdomain.
  return *name + "." + namespace_name + ".svc." + cluster_domain;
}

// An elastic job's bounds and restarts, and a c10d rendezvous's endpoint and id (docs/contract.md
// §2.3), or why each is unavailable.
void topology::set_rendezvous(variable_values& v) const {
  const std::string not_elastic =
      "trainenv: the job is not elastic (no annotation " + std::string(keys::elastic) + ")";
  v.set(variable::elastic, std::int64_t{elastic ? 1 : 0});
  v.set(variable::c10d, std::int64_t{c10d ? 1 : 0});
  if (elastic) {
    v.set(variable::min_nodes, elastic->min);
    v.set(variable::max_nodes, elastic->max);
  } else {
    v.set_unavailable(variable::min_nodes, not_elastic);
    v.set_unavailable(variable::max_nodes, not_elastic);
  }
  v.set(variable::max_restarts,
        elastic && elastic->max_restarts ? *elastic->max_restarts : std::int64_t{-1});
  v.set(variable::rdzv_id, job_uid);
  auto host = c10d ? rendezvous_host()
                   : result<std::string>(error{"trainenv: the job does not rendezvous with c10d "
                                               "(no annotation " +
                                               std::string(keys::elastic) + " or " +
                                               std::string(keys::rendezvous) + ")"});
  if (host) {
    v.set(variable::rdzv_endpoint, std::move(*host));
  } else {
    v.set_unavailable(variable::rdzv_endpoint, host.message());
  }
}

variable_values topology::variables() const {
  variable_values v;
  // A number when known, else the reason it is not, which a policy item needing it reports.
  const auto set_number = [&v](variable var, std::optional<std::int64_t> value,
                               const std::string& reason) {
    if (value) {
      v.set(var, *value);
    } else {
      v.set_unavailable(var, reason);
    }
  };
  const auto set_text = [&v](variable var, const result<std::string>& text) {
    if (text) {
      v.set(var, *text);
    } else {
      v.set_unavailable(var, text.message());
    }
  };
  v.set(variable::job, job);
  v.set(variable::namespace_name, namespace_name);
  v.set(variable::role, role);
  set_number(variable::index, index, index_unknown_reason);
  v.set(variable::job_index, job_index);
  v.set(variable::num_nodes, num_nodes);
  v.set(variable::nproc_per_node, nproc_per_node.text());
  v.set(variable::master_port, master_port);
  // Policies are validated so that only items scoped to training roles use these two.
  const std::string not_training = "trainenv: role " + quote(role) + " is not a training role";
  set_number(variable::world_size, world_size, not_training);
  set_number(variable::rank, training_role ? node_rank : std::nullopt,
             training_role ? index_unknown_reason : not_training);
  set_number(variable::node_rank, node_rank,
             layout.roles[role_at].node ? index_unknown_reason
                                        : "trainenv: role " + quote(role) +
                                              " is not a node of the job: it has no node rank");
  set_text(variable::master_addr, master);
  v.set(variable::ssh_auth_mount_path, ssh_auth_mount_path);
  v.set(variable::ssh_key_mode, ssh_key_mode);
  v.set(variable::ssh_secret, ssh_secret);
  v.set(variable::ssh_keys_provided, std::int64_t{ssh_keys_provided ? 1 : 0});
  v.set(variable::ssh_port, layout.plugin_ssh_port.value_or(default_ssh_port));
  v.set(variable::cluster_domain, cluster_domain);
  set_text(variable::subdomain, layout.launcher_subdomain());
  set_rendezvous(v);
  set_number(variable::gpus_per_node, gpus_per_node, gpus_unknown_reason);
  const auto gpus_or_one =
      gpus_per_node ? std::optional(std::max<std::int64_t>(*gpus_per_node, 1)) : std::nullopt;
  // MPI slots: the processes-per-node setting when a number (Trainer's 1 standing for the GPUs
  // when a node has more), else the GPUs of a worker, else 1.
  const auto worker = worker_gpus ? worker_gpus : gpus_per_node;
  // Written as branches: GCC 12 at -O2 takes the optional-of-optional ternary for a read of an
  // unset value (-Wmaybe-uninitialized) in some unity batches.
  std::optional<std::int64_t> slots = nproc_count;
  if (!slots && worker) slots = std::max<std::int64_t>(*worker, 1);
  if (nproc_one_means_gpus && worker && *worker > 1) slots = *worker;
  set_number(variable::slots, slots, gpus_unknown_reason);
  // Processes per node as a number: the resolved count, or for auto/gpu the GPUs (at least 1).
  set_number(variable::processes_per_node,
             nproc_per_node.count ? nproc_per_node.count : gpus_or_one, gpus_unknown_reason);
  v.set_unavailable(variable::host, "trainenv: ${host} exists only inside a hostfile's line");
  v.set_unavailable(variable::line, "trainenv: ${i} exists only inside an annotation's lines");
  std::vector<std::pair<std::string, std::int64_t>> replicas;
  replicas.reserve(layout.roles.size());
  for (const auto& r : layout.roles) replicas.emplace_back(r.name, r.pods);
  v.set_replicas(std::move(replicas));
  return v;
}

}  // namespace trainenv::core
