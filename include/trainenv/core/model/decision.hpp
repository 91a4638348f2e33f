// What the engine answers for one pod: allowed or denied, the policy, the JSON Patch, the
// warnings, and a typed summary of what the patch adds. The admission encoder, the preview and
// the logs read this; none of them looks inside the patch to find out what it does.
#pragma once

#include <cstddef>
#include <cstdint>
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

  [[nodiscard]] bool empty() const;
  // "PET_NNODES,WORLD_SIZE,port 29500,mount /etc/mpi,volume mpi-ssh-auth,arg --x,annotation k,
  // initContainer x,dnsSearch d,removed PET_NNODES": every field, cut at `max_length` characters
  // (audit events are stored, so this is bounded).
  [[nodiscard]] std::string describe(std::size_t max_length = 1024) const;
};

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
  bool allowed = true;
  std::string policy;  // the policy that applied, if any
  // The JSON Patch as text (a JSON array of operations), as the response carries it; empty
  // when nothing is patched.
  std::string patch_text;
  std::size_t patch_ops = 0;          // the operations in it
  injection_summary injected;         // what the patch adds
  std::vector<value_source> sources;  // where the counts came from, when a policy applied
  std::vector<std::string> warnings;
  pass_reason passed = pass_reason::none;  // allowed unchanged: why
  // Denied: the violation ("trainenv: ..."). Allowed: why nothing applied, if so.
  std::string message;
  // Denied: status.code (docs/contract.md §6): 400 a contract violation; 404, 500 or 503 an owner
  // that could not be read (gone, our access refused, or unreachable for now).
  int code = 400;
  // The pod's place as its layout sees it, for preview --job's whole-job checks: the name the
  // layout gives it (empty when it has none), the roles of its world, and whether those need not
  // be training pods themselves (an MPI job's workers).
  std::string layout_name;
  std::vector<std::string> world_roles;
  bool world_of_workers = false;

  [[nodiscard]] bool mutated() const { return patch_ops != 0; }
  [[nodiscard]] outcome verdict() const {
    return !allowed ? outcome::denied : mutated() ? outcome::patched : outcome::allowed;
  }
  // The patch as a value ([] when none): for the preview and for tests, not the request path.
  [[nodiscard]] nlohmann::json patch() const;
};

}  // namespace trainenv::core
