// What the controllers' models in controllers.cpp share with Trainer's in controllers_trainer.cpp:
// reading an applied object, and the parts every created object carries. Private to the
// preview wing's sources.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "trainenv/core/preview/controllers.hpp"

namespace trainenv::core::controllers_detail {

// The string at `path` of `object`, else `fallback`.
[[nodiscard]] std::string text_at(const nlohmann::json& object,
                                  std::initializer_list<const char*> path,
                                  const std::string& fallback = {});
// The whole number at `path`, if it is one.
[[nodiscard]] std::optional<std::int64_t> int_at(const nlohmann::json& object,
                                                 std::initializer_list<const char*> path);
// A mutable member that is an object, made so when absent or not one.
nlohmann::json& object_member(nlohmann::json& parent, const char* key);
// What every created object shares: the controller reference to its owner.
[[nodiscard]] nlohmann::json controller_ref(const nlohmann::json& owner);

// Made-up uids, one per object, so that the engine's uid checks hold as they do in a cluster.
class uid_source {
 public:
  std::string next(const std::string& kind, const std::string& name) {
    return "preview-" + std::to_string(++count_) + "-" + kind + "-" + name;
  }

 private:
  int count_ = 0;
};

// A headless Service whose name is the pods' subdomain: the one that gives them DNS names.
[[nodiscard]] nlohmann::json headless_service(
    const std::string& name, const std::pair<std::string_view, std::string>& selector,
    const nlohmann::json& owner, bool publish_not_ready);

// The JobSet Kubeflow Trainer's plugins make of TrainJob `trainjob` on `runtime`, its objects
// added to `out` (controllers_trainer.cpp).
[[nodiscard]] result<nlohmann::json> trainer_jobset(const nlohmann::json& trainjob,
                                                    const nlohmann::json& runtime, uid_source& uids,
                                                    created_job& out);

}  // namespace trainenv::core::controllers_detail
