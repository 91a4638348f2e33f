#include "trainenv/core/model/owner_ref.hpp"

#include "trainenv/core/text/json_access.hpp"

namespace trainenv::core {

using nlohmann::json;

std::string_view owner_ref::group() const {
  const std::string_view version(api_version);
  const auto slash = version.find('/');
  return slash == std::string_view::npos ? std::string_view() : version.substr(0, slash);
}

std::string owner_ref::display() const {
  return kind + " " + (namespace_name.empty() ? name : namespace_name + "/" + name);
}

std::optional<owner_ref> controller_of(const json& object, std::string_view namespace_name) {
  const auto* metadata = member(object, "metadata");
  const auto* refs = metadata != nullptr ? member(*metadata, "ownerReferences") : nullptr;
  if (refs == nullptr || !refs->is_array()) return std::nullopt;
  for (const auto& ref : *refs) {
    const auto* controller = member(ref, "controller");
    if (controller == nullptr || !controller->is_boolean() || !controller->get<bool>()) continue;
    const auto* api_version = string_member(ref, "apiVersion");
    const auto* kind = string_member(ref, "kind");
    const auto* name = string_member(ref, "name");
    const auto* uid = string_member(ref, "uid");
    if (api_version == nullptr || kind == nullptr || name == nullptr || uid == nullptr)
      return std::nullopt;
    return owner_ref{*api_version, *kind, std::string(namespace_name), *name, *uid};
  }
  return std::nullopt;
}

}  // namespace trainenv::core
