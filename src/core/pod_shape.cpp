#include "trainenv/core/pod_shape.hpp"

#include <algorithm>
#include <string_view>

#include "trainenv/core/json_access.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// A list the pod already has must be a list of objects for the patch to apply cleanly.
const char* check_object_list(const json& container, std::string_view key, bool needs_name) {
  const auto* list = member(container, key);
  if (list == nullptr) return nullptr;
  if (!list->is_array()) return "must be a list";
  for (const auto& item : *list) {
    if (!item.is_object()) return "must be a list of objects";
    if (needs_name && string_member(item, "name") == nullptr) return "has an entry without a name";
  }
  return nullptr;
}

// A container trainenv injects into: env, ports and mounts are merged, args may be inserted.
std::string check_container(const json& container, std::string_view list, std::size_t index) {
  const std::string where =
      "trainenv: spec." + std::string(list) + "[" + std::to_string(index) + "]";
  if (!container.is_object()) return where + " must be an object";
  if (const char* why = check_object_list(container, "env", true)) return where + ".env " + why;
  if (const char* why = check_object_list(container, "ports", false))
    return where + ".ports " + why;
  if (const char* why = check_object_list(container, "volumeMounts", false))
    return where + ".volumeMounts " + why;
  for (const char* key : {"command", "args"}) {
    if (const auto* strings = member(container, key)) {
      if (!strings->is_array() || !std::all_of(strings->begin(), strings->end(),
                                               [](const json& a) { return a.is_string(); })) {
        return where + "." + key + " must be a list of strings";
      }
    }
  }
  return {};
}

}  // namespace

std::string check_pod_shape(const pod_view& pod, const policy& p, std::size_t& target) {
  const auto& object = pod.json();
  const auto* metadata = member(object, "metadata");
  if (metadata == nullptr || !metadata->is_object()) return "trainenv: metadata must be an object";
  if (pod.annotations().kind() == string_map::shape::not_object)
    return "trainenv: metadata.annotations must be an object of strings";
  const auto container = pod.target_container(p.container);
  if (!container) {
    return "trainenv: spec.containers is empty or missing; the pod has no container to inject "
           "into";
  }
  target = *container;
  const auto& spec = object["spec"];  // an object: target_container found a list in it
  if (auto problem = check_container((*pod.containers())[target], "containers", target);
      !problem.empty())
    return problem;
  // Extra containers named by the policy get the env and mounts too.
  for (const auto& extra : p.extra_containers) {
    const std::string_view list_name = extra.init ? "initContainers" : "containers";
    const auto* list = member(spec, list_name);
    if (list == nullptr || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const auto* name = string_member((*list)[i], "name");
      if (name == nullptr || *name != extra.name) continue;
      if (auto problem = check_container((*list)[i], list_name, i); !problem.empty())
        return problem;
    }
  }
  if (!p.volumes.empty() || p.hostfile) {
    if (const char* why = check_object_list(spec, "volumes", true))
      return std::string("trainenv: spec.volumes ") + why;
  }
  if (p.hostfile) {  // a large hostfile comes with an init container
    if (const char* why = check_object_list(spec, "initContainers", true))
      return std::string("trainenv: spec.initContainers ") + why;
  }
  return {};
}

}  // namespace trainenv::core
