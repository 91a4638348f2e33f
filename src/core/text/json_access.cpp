#include "trainenv/core/text/json_access.hpp"

namespace trainenv::core {

const nlohmann::json* member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

const std::string* string_member(const nlohmann::json& object, std::string_view key) {
  const auto* value = member(object, key);
  if (value == nullptr || !value->is_string()) return nullptr;
  return value->get_ptr<const std::string*>();
}

const std::string& string_or_empty(const nlohmann::json& object, std::string_view key) {
  static const std::string empty;
  const auto* value = string_member(object, key);
  return value != nullptr ? *value : empty;
}

namespace {

const std::string* metadata_string(const nlohmann::json* object, std::string_view map,
                                   std::string_view key) {
  const auto* metadata = object != nullptr ? member(*object, "metadata") : nullptr;
  const auto* values = metadata != nullptr ? member(*metadata, map) : nullptr;
  return values != nullptr ? string_member(*values, key) : nullptr;
}

}  // namespace

const std::string* object_label(const nlohmann::json* object, std::string_view key) {
  return metadata_string(object, "labels", key);
}

const std::string* object_annotation(const nlohmann::json* object, std::string_view key) {
  return metadata_string(object, "annotations", key);
}

const std::string* object_label_or_annotation(const nlohmann::json* object, std::string_view key) {
  const auto* label = object_label(object, key);
  return label != nullptr ? label : object_annotation(object, key);
}

const nlohmann::json* find_path(const nlohmann::json& object, const member_path& path) {
  const nlohmann::json* at = &object;
  for (const auto& key : path) {
    at = member(*at, key);
    if (at == nullptr) return nullptr;
  }
  return at;
}

std::string path_text(const member_path& path) {
  std::string out;
  for (const auto& key : path) out += (out.empty() ? "" : ".") + key;
  return out;
}

const nlohmann::json& array_member(const nlohmann::json* object, std::string_view key) {
  static const nlohmann::json none = nlohmann::json::array();
  const auto* found = object != nullptr ? member(*object, key) : nullptr;
  return found != nullptr && found->is_array() ? *found : none;
}

bool true_member(const nlohmann::json* object, std::string_view key) {
  const auto* found = object != nullptr ? member(*object, key) : nullptr;
  return found != nullptr && found->is_boolean() && found->get<bool>();
}

}  // namespace trainenv::core
