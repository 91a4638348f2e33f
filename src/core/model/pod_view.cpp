#include "trainenv/core/model/pod_view.hpp"

namespace trainenv::core {

pod_maps pod_maps::of(const nlohmann::json& pod) {
  const auto* metadata = member(pod, "metadata");
  pod_maps out;
  if (metadata != nullptr && metadata->is_object()) {
    out.maps[labels_slot] = string_map::of(member(*metadata, "labels"));
    out.maps[annotations_slot] = string_map::of(member(*metadata, "annotations"));
  }
  return out;
}

namespace {

std::optional<std::string_view> string_at(const nlohmann::json* object, std::string_view key) {
  const auto* value = object != nullptr ? string_member(*object, key) : nullptr;
  return value != nullptr ? std::optional<std::string_view>(*value) : std::nullopt;
}

const pod_maps& no_maps() {
  static const pod_maps none;
  return none;
}

}  // namespace

pod_view::pod_view(const nlohmann::json& pod) : pod_view(pod, no_maps()) {
  own_maps_ = pod_maps::of(pod);
  maps_ = &*own_maps_;
}

pod_view::pod_view(const nlohmann::json& pod, const pod_maps& maps)
    : pod_(&pod),
      metadata_(member(pod, "metadata")),
      spec_(member(pod, "spec")),
      maps_(&maps),
      name_(string_at(metadata_, "name")),
      generate_name_(string_at(metadata_, "generateName")),
      namespace_(string_at(metadata_, "namespace")),
      hostname_(string_at(spec_, "hostname")),
      subdomain_(string_at(spec_, "subdomain")),
      containers_(spec_ != nullptr ? member(*spec_, "containers") : nullptr) {
  if (containers_ != nullptr && !containers_->is_array()) containers_ = nullptr;
}

const std::string_view* pod_view::label(std::string_view key) const {
  return labels().find(key);
}

const std::string_view* pod_view::annotation(std::string_view key) const {
  return annotations().find(key);
}

const std::optional<owner_ref>& pod_view::controller() const {
  if (!controller_) {
    const auto* ns = namespace_name();
    controller_ = controller_of(*pod_, ns != nullptr ? std::string_view(*ns) : std::string_view());
  }
  return *controller_;
}

std::optional<std::string_view> field_ref_value(const pod_view& pod, const nlohmann::json& env) {
  const auto* from = member(env, "valueFrom");
  const auto* ref = from != nullptr ? member(*from, "fieldRef") : nullptr;
  const auto* path = ref != nullptr ? string_member(*ref, "fieldPath") : nullptr;
  if (path == nullptr) return std::nullopt;
  const auto known = [](const auto* value) {
    return value != nullptr ? std::optional<std::string_view>(*value) : std::nullopt;
  };
  if (*path == "metadata.name") return known(pod.name());
  if (*path == "metadata.namespace") return known(pod.namespace_name());
  for (const std::string_view map : {"annotations", "labels"}) {
    const std::string prefix = "metadata." + std::string(map) + "['";
    if (path->rfind(prefix, 0) != 0 || path->size() < prefix.size() + 2 ||
        path->compare(path->size() - 2, 2, "']") != 0)
      continue;
    const auto key =
        std::string_view(*path).substr(prefix.size(), path->size() - prefix.size() - 2);
    return known(map == "labels" ? pod.label(key) : pod.annotation(key));
  }
  return std::nullopt;
}

}  // namespace trainenv::core
