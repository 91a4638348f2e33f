// What the engine answers for one pod: allowed or denied, the policy, the JSON Patch, the
// warnings, and a typed summary of what the patch adds. The admission encoder, the preview and
// the logs read this; none of them looks inside the patch to find out what it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// What a patch adds, by kind, in the order the patch adds it. Names repeated across containers
// (a sidecar gets the same env) are listed once.
struct injection_summary {
  std::vector<std::string> env;              // variable names
  std::vector<std::int64_t> ports;           // containerPort
  std::vector<std::string> mounts;           // mountPath
  std::vector<std::string> args;             // as inserted
  std::vector<std::string> volumes;          // volume names
  std::vector<std::string> annotations;      // keys
  std::vector<std::string> init_containers;  // names
  std::vector<std::string> dns_searches;     // spec.dnsConfig.searches added
  std::vector<std::string> removed_env;  // a controller's entries removed (docs/contract.md §4)
  std::string dns_policy;  // spec.dnsPolicy set (hostNetwork: ClusterFirstWithHostNet)

  [[nodiscard]] bool empty() const;
  // "PET_NNODES,WORLD_SIZE,port 29500,mount /etc/mpi,volume mpi-ssh-auth,arg --x,annotation k,
  // initContainer x,dnsSearch d,removed PET_NNODES": every field, cut at `max_length` characters
  // (audit events are stored, so this is bounded).
  [[nodiscard]] std::string describe(std::size_t max_length = 1024) const;
};

// What a pod's `trainenv-wait` checks before its trainer starts (docs/contract.md §3.1).
struct wait_target {
  std::string host;
  std::int64_t port = 0;  // 0: that the name resolves; else also that this port accepts
};
struct wait_plan {
  std::vector<wait_target> targets;
  // An MPI launcher's: every host of this hostfile but `skip` (the pod itself), on this port
  // (0: that they resolve). Empty: none.
  std::string hostfile;
  std::int64_t hostfile_port = 0;
  std::string skip;
  std::int64_t timeout_seconds = 0;
  std::string decided_by;  // what chose how it checks: "policy torch", "annotation ... of the pod"
  bool present = false;    // the pod has it already (reinvocation): nothing added
};

// Why a pod a policy applied to got no wait; what the metrics count (docs/operations.md).
enum class no_wait : std::uint8_t {
  none,             // it has one
  no_policy_wait,   // its policy has no wait: block
  switched_off,     // serve --wait off, an annotation, or the policy's role says off
  nothing_to_dial,  // it dials no other pod at start (node rank 0, a world of one, a worker)
  waits_already,    // its own wait (Volcano's wait-for-master)
};
[[nodiscard]] std::string_view no_wait_name(no_wait reason);  // "switched-off", ...

// Where one value came from: {"numNodes", "4", "JobSet team-a/bert spec.replicatedJobs"}.
struct value_source {
  std::string name;
  std::string value;
  std::string source;
};

// How a decision ends: what every edge counts and logs it as.
enum class outcome : std::uint8_t { allowed, patched, denied };
[[nodiscard]] std::string_view outcome_name(outcome o);  // "allowed", "patched", "denied"

// Why a pod was allowed unchanged: none when a policy applied or it was denied.
enum class pass_reason : std::uint8_t {
  none,
  not_a_pod_create,   // the request is not a pod CREATE: nothing read
  not_training,       // not a training pod (no Trainer label, on it or its Job)
  unrecognised,       // its Job could not be read to tell (recognising fails open): counted
  opted_out,          // trainenv.io/inject: "false"
  wired_elsewhere,    // its owner is wired by another controller (an MPIJob)
  unknown_framework,  // its runtime names a framework no policy lists (Trainer wired it): counted
  not_applying,       // the policy's condition is false
};

struct decision {
  std::string policy;  // the policy that applied, if any
  // The JSON Patch as text (a JSON array of operations), as the response carries it; empty
  // when nothing is patched.
  std::string patch_text;
  std::size_t patch_ops = 0;          // the operations in it
  injection_summary injected;         // what the patch adds
  std::vector<value_source> sources;  // where the counts came from, when a policy applied
  // Env entries the pod had that the policy also gives: a controller's value it replaced, a
  // user's it kept (each also a warning); for the status annotation.
  std::vector<std::string> replaced_env;
  std::vector<std::string> kept_env;
  std::vector<std::string> warnings;
  // Denied: the violation ("trainenv: ..."). Allowed: why nothing applied, if so.
  std::string message;
  // The pod's place as its layout sees it, for preview --job's whole-job checks: the name the
  // layout gives it (empty when it has none), the roles of its world, and whether those need not
  // be training pods themselves (an MPI job's workers, world_of_workers below).
  std::string layout_name;
  std::vector<std::string> world_roles;
  // Its readiness wait, or why it has none (`no_wait_reason`, in words) when a policy applied.
  std::optional<wait_plan> wait;
  std::string no_wait_why;
  // Denied: status.code (docs/contract.md §6): 400 a contract violation; 404, 500 or 503 an owner
  // that could not be read (gone, our access refused, or unreachable for now).
  int code = 400;
  // The small members together, after the rest (no padding between them).
  bool allowed = true;
  pass_reason passed = pass_reason::none;  // allowed unchanged: why
  bool world_of_workers = false;
  no_wait no_wait_reason = no_wait::none;

  [[nodiscard]] bool mutated() const { return patch_ops != 0; }
  [[nodiscard]] outcome verdict() const {
    return !allowed ? outcome::denied : mutated() ? outcome::patched : outcome::allowed;
  }
  // The patch as a value ([] when none): for the preview and for tests, not the request path.
  [[nodiscard]] nlohmann::json patch() const;
};

}  // namespace trainenv::core
