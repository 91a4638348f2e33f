// A reference to an owner object, and the controlling one read from an object's
// ownerReferences: below the pod view, which keeps its pod's controller once read.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// One object to read: from an ownerReference (uid known) or by name (a TrainJob's runtimeRef).
struct owner_ref {
  std::string api_version;     // "jobset.x-k8s.io/v1alpha2", "batch/v1"
  std::string kind;            // "JobSet"
  std::string namespace_name;  // empty for a cluster-scoped object
  std::string name;
  std::string uid;  // empty when the reference names no uid

  // "" for the core group; a view into api_version.
  [[nodiscard]] std::string_view group() const;
  // "JobSet team-a/bert", "ClusterTrainingRuntime torch-distributed": how messages name it.
  [[nodiscard]] std::string display() const;
  friend bool operator==(const owner_ref&, const owner_ref&) = default;
};

// The ownerReference with `controller: true` of an object in `namespace_name`, if it has one.
[[nodiscard]] std::optional<owner_ref> controller_of(const nlohmann::json& object,
                                                     std::string_view namespace_name);

}  // namespace trainenv::core
