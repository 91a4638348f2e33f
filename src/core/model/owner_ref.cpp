#include "trainenv/core/model/owner_ref.hpp"

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_ref.hpp"

namespace trainenv::core {

using nlohmann::json;

std::string_view api_group(std::string_view api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
}

std::string_view owner_ref::group() const {
  return api_group(api_version);
}

std::string owner_ref::display() const {
  return kind + " " + (namespace_name.empty() ? name : namespace_name + "/" + name);
}

namespace {

bool is_true(const json* value) {
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

bool is_true(const json_ref& value) {
  return value.is_true();
}

// Over a pod (json_ref) or an owner object fetched from the API (nlohmann values) alike.
template <class Json>
std::optional<owner_ref> controller_in(const Json& object, std::string_view namespace_name) {
  const auto metadata = member(object, "metadata");
  const auto refs = metadata ? member(*metadata, "ownerReferences") : decltype(metadata){};
  if (!refs || !refs->is_array()) return std::nullopt;
  for (const auto& ref : *refs) {
    if (!is_true(member(ref, "controller"))) continue;
    const auto api_version = string_member(ref, "apiVersion");
    const auto kind = string_member(ref, "kind");
    const auto name = string_member(ref, "name");
    const auto uid = string_member(ref, "uid");
    if (!api_version || !kind || !name) return std::nullopt;
    return owner_ref{std::string(*api_version), std::string(*kind), std::string(namespace_name),
                     std::string(*name), uid ? std::string(*uid) : std::string()};
  }
  return std::nullopt;
}

}  // namespace

std::optional<owner_ref> controller_of(const json& object, std::string_view namespace_name) {
  return controller_in(object, namespace_name);
}

std::optional<owner_ref> controller_of(const json_ref& object, std::string_view namespace_name) {
  return controller_in(object, namespace_name);
}

}  // namespace trainenv::core
