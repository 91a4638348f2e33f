// The variables a policy's templates may use (docs/policies.md), and one pod's values of them.
// Integer variables hold integers: topology hands counts, ports and ranks over as numbers, and
// only the final text of a template turns them into digits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace trainenv::core {

enum class variable : std::uint8_t {
  job,
  namespace_name,
  role,
  index,
  num_nodes,
  nproc_per_node,
  master_port,
  world_size,
  rank,
  gpus_per_node,
  slots,
  processes_per_node,
  job_index,            // the pod's Job within its role (a JobSet replicatedJob's replicas)
  node_rank,            // the pod's position among the job's nodes (docs/contract.md §2.2)
  master_addr,          // the DNS name of node rank 0
  ssh_auth_mount_path,  // where the MPI SSH keys go (the runtime's sshAuthMountPath)
  ssh_key_mode,         // the private key's file mode: 0600, or 0640 read through fsGroup
  ssh_secret,           // the Secret that holds them (trainenv.io/ssh-secret, else the default)
  ssh_keys_provided,    // 1 when the image or the owner's controller brings them, else 0
  ssh_port,             // the port the workers' sshd listens on: a job plugin's, else 22
  subdomain,            // the subdomain of the job's launcher, else of its master
  cluster_domain,       // the cluster's DNS domain (serve --cluster-domain)
  elastic,              // 1 for an elastic job (docs/contract.md §2.3), else 0
  c10d,                 // 1 when the job rendezvous with torch's c10d (elastic, or asked), else 0
  min_nodes,            // an elastic job's bounds
  max_nodes,
  max_restarts,   // an elastic job's restarts, -1 when not given
  rdzv_endpoint,  // the c10d rendezvous host: the endpoint pod's full DNS name
  rdzv_id,        // the job's top owner's uid: one rendezvous per job
  host,           // ${host}: one node's DNS name inside a hostfile's line
  line,           // ${i}: the line number inside an annotation's `lines`
};

struct variable_info {
  variable id;
  std::string_view name;  // as written in templates
  bool integer;           // a whole number, usable in arithmetic; else text
};

inline constexpr std::array variable_table = {
    variable_info{variable::job, "job", false},
    variable_info{variable::namespace_name, "namespace", false},
    variable_info{variable::role, "role", false},
    variable_info{variable::index, "index", true},
    variable_info{variable::num_nodes, "numNodes", true},
    variable_info{variable::nproc_per_node, "nprocPerNode", false},  // a count, "auto" or "gpu"
    variable_info{variable::master_port, "masterPort", true},
    variable_info{variable::world_size, "worldSize", true},
    variable_info{variable::rank, "rank", true},
    variable_info{variable::gpus_per_node, "gpusPerNode", true},
    variable_info{variable::slots, "slots", true},
    variable_info{variable::processes_per_node, "processesPerNode", true},
    variable_info{variable::job_index, "jobIndex", true},
    variable_info{variable::node_rank, "nodeRank", true},
    variable_info{variable::master_addr, "masterAddr", false},
    variable_info{variable::ssh_auth_mount_path, "sshAuthMountPath", false},
    variable_info{variable::ssh_key_mode, "sshKeyMode", true},
    variable_info{variable::ssh_secret, "sshSecret", false},
    variable_info{variable::ssh_keys_provided, "sshKeysProvided", true},
    variable_info{variable::ssh_port, "sshPort", true},
    variable_info{variable::subdomain, "subdomain", false},
    variable_info{variable::cluster_domain, "clusterDomain", false},
    variable_info{variable::elastic, "elastic", true},
    variable_info{variable::c10d, "c10d", true},
    variable_info{variable::min_nodes, "minNodes", true},
    variable_info{variable::max_nodes, "maxNodes", true},
    variable_info{variable::max_restarts, "maxRestarts", true},
    variable_info{variable::rdzv_endpoint, "rdzvEndpoint", false},
    variable_info{variable::rdzv_id, "rdzvId", false},
    variable_info{variable::host, "host", false},
    variable_info{variable::line, "i", true},
};
inline constexpr std::size_t variable_count = variable_table.size();

// The table is indexed by the enum: each row sits at its own enumerator, and every enumerator
// (the last is `line`) has a row.
constexpr bool variable_table_in_enum_order() {
  for (std::size_t i = 0; i < variable_table.size(); ++i) {
    if (static_cast<std::size_t>(variable_table[i].id) != i) return false;
  }
  return true;
}
static_assert(variable_table_in_enum_order(), "variable_table rows must follow the enum's order");
static_assert(static_cast<std::size_t>(variable::line) + 1 == variable_count,
              "every variable needs a row in variable_table");
// A used() mask holds one bit per variable, and its top bit for replicas(<role>).
using variable_mask = std::uint64_t;
static_assert(variable_count < 63, "a used() mask has room for 63 variables");

// The bit for `v` in a used() mask.
[[nodiscard]] constexpr variable_mask variable_bit(variable v) {
  return variable_mask{1} << static_cast<unsigned>(v);
}
// The bit in a used() mask for a replicas(<role>) call.
inline constexpr variable_mask replicas_bit = variable_mask{1} << 63;
// The values of an elastic job (docs/contract.md §2.3): a policy item may not use one beside
// ${nodeRank}, a literal rank that an elastic job's rendezvous gives instead.
inline constexpr variable_mask elastic_variables =
    variable_bit(variable::min_nodes) | variable_bit(variable::max_nodes);

[[nodiscard]] constexpr std::string_view variable_name(variable v) {
  return variable_table[static_cast<std::size_t>(v)].name;
}
[[nodiscard]] constexpr bool is_integer_variable(variable v) {
  return variable_table[static_cast<std::size_t>(v)].integer;
}
[[nodiscard]] std::optional<variable> variable_from_name(std::string_view name);
// "job, namespace, role, ..." for error messages.
[[nodiscard]] std::string variable_names();

// The values of one pod's variables: text for text variables, numbers for integer ones. An
// unavailable one carries the reason instead, which becomes the violation message when a policy
// item needs it.
class variable_values {
 public:
  // Text variables only (job, namespace, role, nprocPerNode).
  void set(variable v, std::string text);
  // Integer variables only.
  void set(variable v, std::int64_t number);
  void set_unavailable(variable v, std::string reason);

  // nullptr when unavailable or not a text variable.
  [[nodiscard]] const std::string* text(variable v) const;
  // nullopt when unavailable or not an integer variable.
  [[nodiscard]] std::optional<std::int64_t> number(variable v) const;
  [[nodiscard]] const std::string& unavailable_reason(variable v) const;

  // replicas(<role>) in expressions; 0 for a role not listed.
  void set_replicas(std::vector<std::pair<std::string, std::int64_t>> replicas) {
    replicas_ = std::move(replicas);
  }
  [[nodiscard]] std::int64_t replicas(std::string_view role) const;

 private:
  using slot = std::variant<std::monostate, std::string, std::int64_t>;
  std::vector<std::pair<std::string, std::int64_t>> replicas_;
  std::array<slot, variable_count> values_{};
  std::array<std::string, variable_count> reasons_{};
};

}  // namespace trainenv::core
