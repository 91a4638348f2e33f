// The env entries of a pod that its controller wrote, not its user (docs/contract.md §4): Kubeflow
// Trainer's plugins in the trainer's node container, Volcano's pytorch plugin in every container.
// What the live layout contradicts among them is replaced, what the policy does not want for the
// pod removed; a name the user's own template sets stays the user's, and the duplicate a plugin
// appends beside it is removed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"

namespace trainenv::core {

// One entry of a container's env list that the controller wrote.
struct written_entry {
  std::size_t index = 0;  // in the container's env list
  std::string name;
  bool duplicate = false;  // a second entry beside the template's: removed, the template's kept
};

// What one controller wrote into the containers of one pod.
struct written_env {
  const controller_writes* writes = nullptr;
  std::vector<std::vector<written_entry>> by_container;  // indexed as spec.containers

  [[nodiscard]] const std::vector<written_entry>& in(std::size_t container) const;
};

// The entries `writes` accounts for in `pod`'s containers. `role_template`: the pod template of
// the pod's role in its owner (what the user wrote), or null; `user_env`: names the user sets
// elsewhere (a TrainJob's spec.trainer.env). `owner`: the object whose members `writes.when`
// looks for, or null when it has none.
[[nodiscard]] written_env find_written_env(const pod_view& pod, const controller_writes& writes,
                                           const nlohmann::json* owner,
                                           const nlohmann::json* role_template,
                                           const std::vector<std::string>& user_env);

}  // namespace trainenv::core
