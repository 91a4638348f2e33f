#include "trainenv/core/model/pod_view.hpp"

#include <utility>

namespace trainenv::core {

pod_view::pod_view(read_only_json document, json_ref pod, std::string_view request_namespace)
    : document_(std::move(document)), pod_(pod) {
  read(request_namespace);
}

pod_view::pod_view(const nlohmann::json& pod) {
  // Text this process wrote from values parsed from text: it parses, unless it nests deeper
  // than any text accepted would (then there is no pod, and evaluate says it is not an object).
  auto document =
      parse_read_only(pod.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!document) return;
  document_ = std::move(*document);
  pod_ = document_.root();
  read({});
}

void pod_view::read(std::string_view request_namespace) {
  metadata_ = member(pod_, "metadata");
  spec_ = member(pod_, "spec");
  labels_ = read_string_map(member(metadata_, "labels"));
  annotations_ = read_string_map(member(metadata_, "annotations"));
  name_ = string_member(metadata_, "name");
  generate_name_ = string_member(metadata_, "generateName");
  namespace_ = string_member(metadata_, "namespace");
  // Only where the pod names no namespace at all, as the apiserver fills one in.
  if (!namespace_ && !request_namespace.empty() && metadata_.is_object() &&
      !metadata_.find("namespace")) {
    request_namespace_ = std::make_unique<const std::string>(request_namespace);
    namespace_ = *request_namespace_;
  }
  hostname_ = string_member(spec_, "hostname");
  subdomain_ = string_member(spec_, "subdomain");
  containers_ = member(spec_, "containers");
  if (!containers_.is_array()) containers_ = {};
}

const std::optional<owner_ref>& pod_view::controller() const {
  if (!controller_) {
    const auto* ns = namespace_name();
    controller_ = controller_of(pod_, ns != nullptr ? *ns : std::string_view());
  }
  return *controller_;
}

std::optional<std::string_view> field_ref_value(const pod_view& pod, const json_ref& env) {
  const auto path = string_member(member(member(env, "valueFrom"), "fieldRef"), "fieldPath");
  if (!path) return std::nullopt;
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
    const auto key = path->substr(prefix.size(), path->size() - prefix.size() - 2);
    return known(map == "labels" ? pod.label(key) : pod.annotation(key));
  }
  return std::nullopt;
}

}  // namespace trainenv::core
