// The Kubernetes objects a policy writes whole: an env var's v1.EnvVarSource, a v1.Volume, a
// v1.VolumeMount. Each is checked member by member against Kubernetes' types (so the patched
// pod always decodes) and written out as the apiserver would default it (so reinvocation finds
// nothing to change). The policy parser compiles the result as a template.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// An env item's `valueFrom`: exactly one of fieldRef, resourceFieldRef, configMapKeyRef,
// secretKeyRef; fieldRef.apiVersion defaults to v1.
[[nodiscard]] result<nlohmann::json> env_var_source(const nlohmann::json& value,
                                                    std::string_view field);

// A volume item's body: `name` and exactly one of secret, configMap, downwardAPI, emptyDir
// (a downwardAPI fieldRef's apiVersion defaults to v1). The item's other keys (name, roles,
// when) are the parser's.
[[nodiscard]] result<nlohmann::json> volume_body(const nlohmann::json& item, std::string_view field,
                                                 const std::string& name);

// A volumeMounts item's body: name (a volume name), mountPath (absolute), readOnly, subPath.
[[nodiscard]] result<nlohmann::json> volume_mount_body(const nlohmann::json& item,
                                                       std::string_view field);

}  // namespace trainenv::core
