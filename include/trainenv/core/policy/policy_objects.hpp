// The Kubernetes objects a policy writes whole: an env var's v1.EnvVarSource, a v1.Volume, a
// v1.VolumeMount. Each is checked member by member against Kubernetes' types (so the patched
// pod always decodes) and written out as the apiserver would default it (so reinvocation finds
// nothing to change). The policy parser compiles the result as a template.
#pragma once

#include <cstdint>
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

// The wait's init container: its name, where trainenv's image has the binary, the user it runs as.
inline constexpr std::string_view wait_container_name = "trainenv-wait";
inline constexpr std::string_view wait_binary = "/usr/local/bin/trainenv";
inline constexpr std::int64_t wait_user = 65532;

// The readiness wait's init container (docs/contract.md §3.1) as JSON text in parts, built once
// with the policy; its members in key order, as a json object writes them:
//   {"args":[...] after_args "<image>" after_image <security context> tail ["volumeMounts":...] }
// (name and command, requests equal to limits, FallbackToLogsOnError).
struct wait_container_text {
  std::string after_args;
  std::string after_image;
  std::string security;  // the restricted context as wait_user
  std::string tail;
};
[[nodiscard]] wait_container_text wait_container_parts(std::string_view cpu,
                                                       std::string_view memory);
// The restricted container-level security context, running as `user`.
[[nodiscard]] nlohmann::json wait_security_context(std::int64_t user);

}  // namespace trainenv::core
