// Which policy applies to a training pod (docs/contract.md §1): the annotation, else the
// framework label, else the default; then a policy that takes over for certain commands
// (torchtune's `tune run` over torch).
#pragma once

#include <string>
#include <string_view>

#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/policy.hpp"

namespace trainenv::core {

struct selection {
  const policy* chosen = nullptr;
  std::string violation;  // "trainenv: ..." when `chosen` is null and `pass` is empty
  // Set when the pod passes unchanged instead (docs/contract.md §1): the runtime of its TrainJob
  // names a framework no policy lists, so Trainer's own plugins wired it. Says so in words.
  std::string pass;
  // Set when nothing on the pod named the policy, so its owner kind's job plugins may (Volcano's
  // mpi plugin): select again with the owner object read.
  bool owner_may_name = false;
};

// Which policy applies, first match wins: `forced_policy` (preview's ?policy=) or the pod's
// annotation; the pod's framework label; for a Trainer pod (`trainer`), its runtime's framework
// label, else the framework its mlPolicy names; the policy of a job plugin its owner runs
// (`owner`, of kind `owner_kind`: a Volcano Job's mpi plugin); the default policy of the pod's
// owner kind (a Volcano Job's); the policy marked default. Then a policy that takes over for
// certain commands (torchtune's `tune run` over torch).
[[nodiscard]] selection select_policy(const pod_view& pod, const policy_set& policies,
                                      std::string_view forced_policy = {},
                                      const trainer_settings* trainer = nullptr,
                                      const owner_kind* owner_kind = nullptr,
                                      const nlohmann::json* owner = nullptr);

}  // namespace trainenv::core
