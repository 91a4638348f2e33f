#include "trainenv/core/pod_view.hpp"

namespace trainenv::core {

const std::string* pod_view::string_at(std::string_view section, std::string_view object,
                                       std::string_view key) const {
  const auto* outer = member(*pod_, section);
  if (outer == nullptr) return nullptr;
  const auto* inner = member(*outer, object);
  if (inner == nullptr) return nullptr;
  return string_member(*inner, key);
}

const std::string* pod_view::label(std::string_view key) const {
  return string_at("metadata", "labels", key);
}

const std::string* pod_view::annotation(std::string_view key) const {
  return string_at("metadata", "annotations", key);
}

const std::string* pod_view::name() const {
  const auto* metadata = member(*pod_, "metadata");
  return metadata != nullptr ? string_member(*metadata, "name") : nullptr;
}

const std::string* pod_view::generate_name() const {
  const auto* metadata = member(*pod_, "metadata");
  return metadata != nullptr ? string_member(*metadata, "generateName") : nullptr;
}

const std::string* pod_view::namespace_name() const {
  const auto* metadata = member(*pod_, "metadata");
  return metadata != nullptr ? string_member(*metadata, "namespace") : nullptr;
}

const std::string* pod_view::subdomain() const {
  const auto* spec = member(*pod_, "spec");
  return spec != nullptr ? string_member(*spec, "subdomain") : nullptr;
}

const nlohmann::json* pod_view::containers() const {
  const auto* spec = member(*pod_, "spec");
  if (spec == nullptr) return nullptr;
  const auto* list = member(*spec, "containers");
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

}  // namespace trainenv::core
