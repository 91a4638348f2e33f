// Owner objects read from a file, for `trainenv preview --owners FILE`: what the webhook would
// fetch from the Kubernetes API, given offline. YAML documents (as `kubectl get -o yaml` writes
// them, `---`-separated) or a `kubectl get -o json` List, in any mix.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::inputs {

class owner_file {
 public:
  // Every object must have apiVersion, kind and metadata.name; Lists are flattened. Errors name
  // `source` and the document.
  [[nodiscard]] static core::result<owner_file> parse(std::string_view text,
                                                      std::string_view source);

  // The object `ref` names: same API group, kind, namespace and name (the version may differ,
  // as the API server converts between versions). The uid is not compared here: the core checks
  // it, so that a recreated object in the file is refused as it would be from the API.
  [[nodiscard]] const nlohmann::json* find(const core::owner_ref& ref) const;
  // Answers `ref` into `owners` as the API would: the object, or not found.
  void answer(const core::owner_ref& ref, core::owner_values& owners) const;
  [[nodiscard]] std::size_t size() const { return objects_.size(); }
  [[nodiscard]] const std::vector<nlohmann::json>& objects() const { return objects_; }

 private:
  std::vector<nlohmann::json> objects_;
};

}  // namespace trainenv::inputs
