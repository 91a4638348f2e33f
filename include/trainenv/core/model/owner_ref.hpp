// A reference to an owner object, and the controlling one read from an object's
// ownerReferences: below the pod view, which keeps its pod's controller once read.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/json_ref.hpp"

namespace trainenv::core {

// One object to read: from an ownerReference (uid known) or by name (a TrainJob's runtimeRef).
struct owner_ref {
  std::string api_version;     // "jobset.x-k8s.io/v1alpha2", "batch/v1"
  std::string kind;            // "JobSet"
  std::string namespace_name;  // empty for a cluster-scoped object
  std::string name;
  std::string uid;  // empty when the reference names no uid
  // Named by name alone, not by an ownerReference (a TrainJob's runtimeRef): the one kind of
  // reference that may carry no uid (docs/contract.md §5). Any other without one reads nothing.
  bool by_name = false;
  // Asked of the shell: read it anew, past any cache, as the copy held is contradicted by the
  // pod (docs/contract.md §2.1: a pod created right after a resize). Not part of its identity.
  bool fresh = false;

  // "" for the core group; a view into api_version.
  [[nodiscard]] std::string_view group() const;
  // "JobSet team-a/bert", "ClusterTrainingRuntime torch-distributed": how messages name it.
  [[nodiscard]] std::string display() const;
  friend bool operator==(const owner_ref& a, const owner_ref& b) {
    return a.api_version == b.api_version && a.kind == b.kind &&
           a.namespace_name == b.namespace_name && a.name == b.name && a.uid == b.uid;
  }
};

// The API group of an apiVersion: "jobset.x-k8s.io/v1alpha2" -> "jobset.x-k8s.io", "v1" -> "".
[[nodiscard]] std::string_view api_group(std::string_view api_version);

// The ownerReference with `controller: true` of an object in `namespace_name`, if it has one. A
// uid left out reads as empty: the walk refuses such a reference rather than treat the object as
// ownerless.
[[nodiscard]] std::optional<owner_ref> controller_of(const nlohmann::json& object,
                                                     std::string_view namespace_name);
[[nodiscard]] std::optional<owner_ref> controller_of(const json_ref& object,
                                                     std::string_view namespace_name);

}  // namespace trainenv::core
