#include "trainenv/core/pod_view.hpp"

namespace trainenv::core {

pod_view::pod_view(const nlohmann::json& pod)
    : pod_(&pod),
      metadata_(member(pod, "metadata")),
      labels_(metadata_ != nullptr ? member(*metadata_, "labels") : nullptr),
      annotations_(metadata_ != nullptr ? member(*metadata_, "annotations") : nullptr),
      spec_(member(pod, "spec")) {}

const std::string* pod_view::label(std::string_view key) const {
  return labels_ != nullptr ? string_member(*labels_, key) : nullptr;
}

const std::string* pod_view::annotation(std::string_view key) const {
  return annotations_ != nullptr ? string_member(*annotations_, key) : nullptr;
}

const std::string* pod_view::name() const {
  return metadata_ != nullptr ? string_member(*metadata_, "name") : nullptr;
}

const std::string* pod_view::generate_name() const {
  return metadata_ != nullptr ? string_member(*metadata_, "generateName") : nullptr;
}

const std::string* pod_view::namespace_name() const {
  return metadata_ != nullptr ? string_member(*metadata_, "namespace") : nullptr;
}

const std::string* pod_view::hostname() const {
  return spec_ != nullptr ? string_member(*spec_, "hostname") : nullptr;
}

const std::string* pod_view::subdomain() const {
  return spec_ != nullptr ? string_member(*spec_, "subdomain") : nullptr;
}

const nlohmann::json* pod_view::containers() const {
  if (spec_ == nullptr) return nullptr;
  const auto* list = member(*spec_, "containers");
  return list != nullptr && list->is_array() ? list : nullptr;
}

std::optional<std::size_t> pod_view::target_container(std::string_view preferred) const {
  const auto* list = containers();
  if (list == nullptr || list->empty()) return std::nullopt;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto* name = string_member((*list)[i], "name");
    if (name != nullptr && *name == preferred) return i;
  }
  return 0;
}

const std::optional<owner_ref>& pod_view::controller() const {
  if (!controller_) {
    const auto* ns = namespace_name();
    controller_ = controller_of(*pod_, ns != nullptr ? std::string_view(*ns) : std::string_view());
  }
  return *controller_;
}

const std::string* field_ref_value(const nlohmann::json& pod, const nlohmann::json& env) {
  const auto* from = member(env, "valueFrom");
  const auto* ref = from != nullptr ? member(*from, "fieldRef") : nullptr;
  const auto* path = ref != nullptr ? string_member(*ref, "fieldPath") : nullptr;
  const auto* metadata = member(pod, "metadata");
  if (path == nullptr || metadata == nullptr) return nullptr;
  if (*path == "metadata.name" || *path == "metadata.namespace")
    return string_member(*metadata, std::string_view(*path).substr(9));
  for (const std::string_view map : {"annotations", "labels"}) {
    const std::string prefix = "metadata." + std::string(map) + "['";
    if (path->rfind(prefix, 0) != 0 || path->size() < prefix.size() + 2 ||
        path->compare(path->size() - 2, 2, "']") != 0)
      continue;
    const auto* values = member(*metadata, map);
    return values != nullptr
               ? string_member(*values, std::string_view(*path).substr(
                                            prefix.size(), path->size() - prefix.size() - 2))
               : nullptr;
  }
  return nullptr;
}

}  // namespace trainenv::core
