// Policy value types, the parsing and validation of a policy document (already decoded from
// YAML or JSON into nlohmann::json by the shell; no file IO here), and the policy set. The
// validators of names (is_dns_label, parse_decimal, ...) are names.hpp, included here for the
// callers that still find them through this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy_objects.hpp"
#include "trainenv/core/policy/template.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

inline constexpr std::string_view policy_kind = "TrainingPolicy";

// Processes per node as written in an annotation or a policy default.
struct nproc_setting {
  enum class mode : std::uint8_t { count, automatic, cpu, gpu };
  mode kind = mode::automatic;
  std::int64_t count = 0;  // with mode::count

  // "4", "auto", "cpu", "gpu"; nullopt for anything else.
  [[nodiscard]] static std::optional<nproc_setting> parse(std::string_view text);
};

// Which roles an item applies to. No `roles:` means every role.
struct role_scope {
  bool all = true;
  bool training = false;  // the policy's training roles
  std::vector<std::string> names;

  [[nodiscard]] bool matches(std::string_view role, bool is_training_role) const;
};

// Where and when an item applies: its roles and an optional `when` condition.
struct item_scope {
  role_scope roles;
  std::optional<condition> when;
};

struct env_item {
  std::string name;
  std::optional<template_string> value;
  std::optional<template_json> value_from;
  item_scope scope;
};

struct port_item {
  template_string container_port;  // renders to an integer 1-65535
  std::string name;                // optional
  std::string protocol = "TCP";
  item_scope scope;
};

struct arg_item {
  template_string value;
  item_scope scope;
};

// NOLINTNEXTLINE(bugprone-exception-escape): as template_json below.
struct volume_item {
  std::string name;
  template_json volume;  // a whole v1.Volume, name included
  item_scope scope;
};

// NOLINTNEXTLINE(bugprone-exception-escape): as template_json below.
struct mount_item {
  std::string mount_path;
  template_json mount;  // a whole v1.VolumeMount
  item_scope scope;
};

// An annotation whose text the policy generates: a value, or one line per i in [0, count).
struct annotation_item {
  std::string name;
  std::optional<template_string> value;
  std::optional<template_string> line_count;
  std::optional<template_string> line;
  item_scope scope;
};

// The hostfile an MPI launcher reads (docs/contract.md §3): one line per node of the job, in
// node order, written where `path` says. trainenv delivers it itself (the pod's annotation
// through the downward API, or for a large job a compact rule the pod expands as it starts),
// unless the pod already mounts a hostfile there (Kubeflow Trainer's ConfigMap).
struct hostfile_item {
  std::string path = "/etc/mpi/hostfile";  // absolute; its directory is what gets mounted
  template_string line;                    // uses ${host} once: "${host} slots=${slots}"
  item_scope scope;                        // roles: [launcher] unless the policy says
};

// A DNS search domain the pod's resolver tries (spec.dnsConfig.searches): how MPICH's and Intel
// MPI's Hydra proxies find the launcher by its bare hostname (docs/contract.md §3).
struct dns_search_item {
  template_string value;
  item_scope scope;
};

// What a readiness wait checks of a target (docs/contract.md §3.1): nothing, that its name
// resolves, or that it resolves and its port accepts a connection.
enum class wait_check : std::uint8_t { off, dns, connect };
// "off", "dns", "connect".
[[nodiscard]] std::string_view wait_check_name(wait_check check);
[[nodiscard]] std::optional<wait_check> parse_wait_check(std::string_view text);

// The wait `trainenv-wait` runs before the trainer starts (docs/contract.md §3.1, the policy's
// `wait:`): which of the contract's rows apply to its pods and how they check, its bound, its
// resources. A policy without one adds no wait.
struct wait_block {
  // Static node ranks > 0 on <master> (and elastic pods on the endpoint, which always connect):
  // dns or connect; none: the policy's pods dial no master at start.
  std::optional<wait_check> master;
  // An MPI launcher on every host of its hostfile but itself, on the SSH port.
  std::optional<wait_check> hostfile;
  std::int64_t timeout_seconds = 600;
  std::string cpu = "50m";  // requests and limits alike
  std::string memory = "64Mi";
  std::vector<std::pair<std::string, wait_check>> roles;  // a role's own check, over the rows'
  // The init container's text that does not change from pod to pod (policy_objects.hpp), built
  // once with the policy: a pod's wait adds its arguments, image and mounts.
  wait_container_text container;
};

// The largest bound a wait takes: a day.
inline constexpr std::int64_t max_wait_seconds = 86'400;

// Another container that receives the env and volume mounts too, when the pod has it.
struct extra_container {
  std::string name;
  bool init = false;  // in spec.initContainers
};

// This policy takes over pods that would get `policy`, when the target container's command
// (then args) starts with `command_prefix` — torchtune's `tune run` over torch.
struct replacement {
  std::string policy;
  std::vector<std::string> command_prefix;
};

struct policy {
  std::string name;
  std::string source;  // where it was read from, for messages
  std::vector<std::string> frameworks;
  bool is_default = false;
  std::optional<replacement> replaces;
  std::optional<condition> when;  // the policy injects nothing into pods where this is false
  std::string when_source;
  std::string container = "node";
  // `allContainers: true`: every container of the pod gets the env and mounts, as Volcano's own
  // plugins write them (ports and args stay on the target container).
  bool all_containers = false;
  std::vector<extra_container> extra_containers;
  std::vector<std::string> training_roles = {"master", "worker", "node"};
  // `trainingRoles: ["*"]`: every role of the job but the launcher trains (an MPI job's workers,
  // whatever their names); training_roles is then empty.
  bool every_role_trains = false;
  // `strictTrainingRoles: true`: only training_roles train, whatever other roles the job has
  // (volcano-pytorch: master and worker, the Volcano fix). Otherwise every role of the job's
  // world trains, and training_roles matter only for a layout the pod's annotations sketch.
  bool strict_training_roles = false;
  std::int64_t default_master_port = 29500;
  std::int64_t default_num_nodes = 1;
  nproc_setting default_nproc;
  std::vector<std::pair<std::string, template_string>> default_replicas;  // role -> count
  std::string default_ssh_auth_mount_path = "/root/.ssh";  // ${sshAuthMountPath} without a runtime
  // ${sshSecret} without trainenv.io/ssh-secret: over ${job} ("${job}-mpi-ssh-auth").
  std::optional<template_string> default_ssh_secret;
  std::vector<env_item> env;
  std::vector<port_item> ports;
  std::vector<std::string> args_after;  // insert args right after these command tokens
  std::vector<arg_item> args;
  std::vector<volume_item> volumes;
  std::vector<mount_item> volume_mounts;
  std::vector<annotation_item> annotations;
  std::vector<dns_search_item> dns_searches;
  std::optional<hostfile_item> hostfile;
  std::optional<wait_block> wait;
  // The variables any of its templates or conditions use (a used() mask, set by parse_policy):
  // a policy that uses no count does not make the engine read a pod's owners.
  variable_mask variables_used = 0;

  [[nodiscard]] bool is_training_role(std::string_view role) const;
  // The variables used by the items that can apply to a pod of `role` (`training`: whether the
  // role trains): what a pod whose owners are not read must be able to tell.
  [[nodiscard]] variable_mask variables_used_for(std::string_view role, bool training) const;
};

// The used() mask of every template and condition in `p` (parse_policy stores it in
// policy::variables_used).
[[nodiscard]] variable_mask variables_used_by(const policy& p);

// Parses one policy document. Errors read "<source>: <field>: <problem>; <what to write>".
[[nodiscard]] result<policy> parse_policy(const nlohmann::json& document, std::string_view source);

inline constexpr std::string_view sidecar_list_kind = "SidecarList";
// Parses one SidecarList document: the container names it lists (spec.containers).
[[nodiscard]] result<std::vector<std::string>> parse_sidecar_list(const nlohmann::json& document,
                                                                  std::string_view source);

// An accelerator that torchrun's own `auto` does not count (docs/contract.md §2, processes per
// node): a resource name and the processes each device runs, per instance type where the figure
// depends on the machine (node.kubernetes.io/instance-type). policies/accelerators.yaml.
struct accelerator {
  std::string resource;  // "aws.amazon.com/neuron"
  std::int64_t processes_per_device = 1;
  // Instance type -> processes per device; when not empty, a pod that names no instance type
  // listed here gets processes_per_device with a warning.
  std::vector<std::pair<std::string, std::int64_t>> by_instance_type;
};

inline constexpr std::string_view accelerator_list_kind = "AcceleratorList";
// Parses one AcceleratorList document (spec.accelerators, in the order they are counted: a
// container that asks for several is counted by the first listed).
[[nodiscard]] result<std::vector<accelerator>> parse_accelerator_list(
    const nlohmann::json& document, std::string_view source);

// A start-up failure a launcher prints, as the real program words it
// (policies/startup-failures.yaml): `trainenv doctor --logs` finds a log line that holds every
// `match` text and says the cause and the fix.
struct startup_failure {
  std::string name;                // "ssh-unresolved-host"
  std::string program;             // "ssh", "torch", "Open MPI", "MPICH", "JAX"
  std::vector<std::string> match;  // texts one line must all hold
  std::string cause;
  std::string fix;
};

inline constexpr std::string_view startup_failure_list_kind = "StartupFailureList";
// Parses one StartupFailureList document (spec.failures, in the order they are tried).
[[nodiscard]] result<std::vector<startup_failure>> parse_startup_failure_list(
    const nlohmann::json& document, std::string_view source);

// An immutable set of policies with constant-time selection by name and framework value.
class policy_set {
 public:
  policy_set() = default;
  // replacements_ points into policies_: moves keep the elements in place, copies would not.
  policy_set(const policy_set&) = delete;
  policy_set& operator=(const policy_set&) = delete;
  policy_set(policy_set&&) = default;
  policy_set& operator=(policy_set&&) = default;

  // Rejects duplicate names, a framework value claimed twice and more than one default. The
  // owner kinds (policies/owners.yaml) travel with the policies: one load, one snapshot.
  [[nodiscard]] static result<policy_set> build(std::vector<policy> policies,
                                                owner_kind_set owner_kinds = {},
                                                std::vector<std::string> sidecars = {},
                                                std::vector<accelerator> accelerators = {},
                                                std::vector<startup_failure> startup_failures = {});

  [[nodiscard]] const policy* by_name(std::string_view name) const;
  [[nodiscard]] const policy* by_framework(std::string_view framework) const;
  [[nodiscard]] const policy* default_policy() const;
  // The policies that declared `replaces: {policy: <name>}`.
  [[nodiscard]] const std::vector<const policy*>& replacements_of(std::string_view name) const;
  [[nodiscard]] const std::vector<policy>& all() const { return policies_; }
  [[nodiscard]] const owner_kind_set& owner_kinds() const { return owner_kinds_; }
  // Container names known as sidecars (a service mesh's proxy, ...): never the target container
  // unless named (policies/sidecars.yaml).
  [[nodiscard]] const std::vector<std::string>& sidecars() const { return sidecars_; }
  // The accelerators processes per node counts (policies/accelerators.yaml), in their order.
  [[nodiscard]] const std::vector<accelerator>& accelerators() const { return accelerators_; }
  // The launchers' known start-up failures (policies/startup-failures.yaml), for doctor --logs.
  [[nodiscard]] const std::vector<startup_failure>& startup_failures() const {
    return startup_failures_;
  }

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using index_map = std::unordered_map<std::string, std::size_t, string_hash, std::equal_to<>>;

  std::vector<policy> policies_;
  owner_kind_set owner_kinds_;
  std::vector<std::string> sidecars_;
  std::vector<accelerator> accelerators_;
  std::vector<startup_failure> startup_failures_;
  index_map by_name_;
  index_map by_framework_;
  std::optional<std::size_t> default_;
  std::unordered_map<std::string, std::vector<const policy*>, string_hash, std::equal_to<>>
      replacements_;
};

}  // namespace trainenv::core
