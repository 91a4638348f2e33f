// The Kubernetes objects a policy writes whole (policy_objects.hpp): their members and types as
// v1.EnvVarSource, v1.Volume and v1.VolumeMount have them, and the apiserver's defaults.
#include "trainenv/core/policy/policy_objects.hpp"

#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr field_rule field_ref_path = {"fieldPath", true, field_type::string};
constexpr field_rule field_ref_version = {"apiVersion", false, field_type::string};
constexpr field_rule default_mode = {"defaultMode", false, field_type::file_mode};

// A secret's or configMap's `items`: each a key, a path and an optional mode.
std::optional<error> check_key_items(const json& source, const std::string& field) {
  if (!source.contains("items")) return std::nullopt;
  const auto& items = source["items"];
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto e = check_members(items[i], item_field(field + ".items", i),
                               {{"key", true, field_type::string},
                                {"path", true, field_type::string},
                                {"mode", false, field_type::file_mode}}))
      return e;
  }
  return std::nullopt;
}

std::optional<error> check_downward_api(const json& source, const std::string& at) {
  if (auto e = check_members(source, at, {{"items", true, field_type::list}, default_mode}))
    return e;
  const auto& items = source["items"];
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto item_at = item_field(at + ".items", i);
    if (auto e = check_members(items[i], item_at,
                               {{"path", true, field_type::string},
                                {"fieldRef", true, field_type::object},
                                {"mode", false, field_type::file_mode}}))
      return e;
    if (auto e = check_members(items[i]["fieldRef"], item_at + ".fieldRef",
                               {field_ref_path, field_ref_version}))
      return e;
  }
  return std::nullopt;
}

}  // namespace

result<json> env_var_source(const json& value, std::string_view field_view) {
  const std::string field(field_view);
  if (auto e = expect_object(value, field)) return std::move(*e);
  if (auto e = check_fields(value, field,
                            {"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"}))
    return std::move(*e);
  if (value.size() != 1) {
    return field_error(
        field, "needs exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef");
  }
  std::optional<error> problem;
  if (value.contains("fieldRef")) {
    problem =
        check_members(value["fieldRef"], field + ".fieldRef", {field_ref_path, field_ref_version});
  } else if (value.contains("resourceFieldRef")) {
    problem = check_members(value["resourceFieldRef"], field + ".resourceFieldRef",
                            {{"resource", true, field_type::string},
                             {"containerName", false, field_type::string},
                             {"divisor", false, field_type::string}});
  } else {
    const char* source = value.contains("secretKeyRef") ? "secretKeyRef" : "configMapKeyRef";
    problem = check_members(value[source], field + "." + source,
                            {{"name", true, field_type::string},
                             {"key", true, field_type::string},
                             {"optional", false, field_type::boolean}});
  }
  if (problem) return std::move(*problem);
  json normalized = value;
  if (normalized.contains("fieldRef") && !normalized["fieldRef"].contains("apiVersion")) {
    normalized["fieldRef"]["apiVersion"] = "v1";
  }
  return normalized;
}

result<json> volume_body(const json& item, std::string_view field_view, const std::string& name) {
  const std::string field(field_view);
  json body = {{"name", name}};
  int sources = 0;
  for (const char* key : {"secret", "configMap"}) {
    if (!item.contains(key)) continue;
    ++sources;
    const auto at = field + "." + key;
    const bool secret = std::string_view(key) == "secret";
    if (auto e = check_members(item[key], at,
                               {{secret ? "secretName" : "name", true, field_type::string},
                                default_mode,
                                {"items", false, field_type::list},
                                {"optional", false, field_type::boolean}}))
      return std::move(*e);
    if (auto e = check_key_items(item[key], at)) return std::move(*e);
    body[key] = item[key];
  }
  if (item.contains("downwardAPI")) {
    ++sources;
    if (auto e = check_downward_api(item["downwardAPI"], field + ".downwardAPI"))
      return std::move(*e);
    body["downwardAPI"] = item["downwardAPI"];
    for (auto& i : body["downwardAPI"]["items"]) {
      if (!i["fieldRef"].contains("apiVersion")) i["fieldRef"]["apiVersion"] = "v1";
    }
  }
  if (item.contains("emptyDir")) {
    ++sources;
    if (auto e = check_members(
            item["emptyDir"], field + ".emptyDir",
            {{"medium", false, field_type::string}, {"sizeLimit", false, field_type::string}}))
      return std::move(*e);
    body["emptyDir"] = item["emptyDir"];
  }
  if (sources != 1)
    return field_error(field, "needs exactly one of secret, configMap, downwardAPI, emptyDir");
  return body;
}

result<json> volume_mount_body(const json& item, std::string_view field_view) {
  const std::string field(field_view);
  json body = json::object();
  for (const char* key : {"name", "mountPath"}) {
    if (!item.contains(key)) return field_error(field + "." + key, "missing");
    auto text = read_string(item[key], field + "." + key);
    if (!text) return std::move(text).take_error();
    body[key] = std::move(*text);
  }
  if (!is_dns_label(body["name"].get_ref<const std::string&>()))
    return field_error(field + ".name", "must be a volume name");
  const auto& path = body["mountPath"].get_ref<const std::string&>();
  // An absolute path, or one that starts with the one variable that is an absolute path
  // (${sshAuthMountPath}: render checks what it renders to).
  if (path.empty() || (path[0] != '/' && path.rfind("${sshAuthMountPath}", 0) != 0))
    return field_error(field + ".mountPath",
                       "must be an absolute path (or start with ${sshAuthMountPath})");
  if (item.contains("readOnly")) {
    auto read_only = read_bool(item["readOnly"], field + ".readOnly");
    if (!read_only) return std::move(read_only).take_error();
    body["readOnly"] = *read_only;
  }
  if (item.contains("subPath")) {
    auto sub_path = read_string(item["subPath"], field + ".subPath");
    if (!sub_path) return std::move(sub_path).take_error();
    body["subPath"] = std::move(*sub_path);
  }
  return body;
}

nlohmann::json wait_security_context(std::int64_t user) {
  using nlohmann::json;
  return {{"runAsNonRoot", true},
          {"runAsUser", user},
          {"runAsGroup", user},
          {"allowPrivilegeEscalation", false},
          {"capabilities", {{"drop", json::array({"ALL"})}}},
          {"readOnlyRootFilesystem", true},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

wait_container_text wait_container_parts(std::string_view cpu, std::string_view memory) {
  using nlohmann::json;
  const json amount = {{"cpu", cpu}, {"memory", memory}};
  const auto text = [](const json& value) { return value.dump(); };
  wait_container_text out;
  out.after_args = R"(,"command":)" + text(json::array({wait_binary, "wait"})) + R"(,"image":)";
  out.after_image = R"(,"name":)" + text(wait_container_name) + R"(,"resources":)" +
                    text({{"limits", amount}, {"requests", amount}}) + R"(,"securityContext":)";
  out.security = text(wait_security_context(wait_user));
  out.tail = R"(,"terminationMessagePolicy":"FallbackToLogsOnError")";
  return out;
}

}  // namespace trainenv::core
