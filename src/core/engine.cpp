// bytes are decoded elsewhere; here: Pod -> policy -> topology -> wants -> diff -> patch.
#include "trainenv/core/engine.hpp"

#include "trainenv/core/json_patch.hpp"
#include "trainenv/core/pod_view.hpp"
#include "trainenv/core/render.hpp"
#include "trainenv/core/topology.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::size_t max_warning_length = 120;

decision deny(std::string message, std::string policy = {}) {
  decision d;
  d.allowed = false;
  d.message = std::move(message);
  d.policy = std::move(policy);
  return d;
}

decision pass(std::string why) {
  decision d;
  d.message = std::move(why);
  return d;
}

// Warnings reach kubectl users: printable, one line, bounded (the apiserver truncates too).
std::string make_warning(std::string text) {
  for (auto& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  if (text.size() > max_warning_length) text = text.substr(0, max_warning_length - 3) + "...";
  return text;
}

// True when every member `wanted` sets is present in `existing` with the same value: the
// apiserver's defaulting may add members (fieldRef.apiVersion, protocol) on reinvocation.
bool contains(const json& existing, const json& wanted) {
  if (wanted.is_object()) {
    if (!existing.is_object()) return false;
    for (const auto& [key, value] : wanted.items()) {
      auto it = existing.find(key);
      if (it == existing.end() || !contains(*it, value)) return false;
    }
    return true;
  }
  if (wanted.is_array()) {
    if (!existing.is_array() || existing.size() != wanted.size()) return false;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      if (!contains(existing[i], wanted[i])) return false;
    }
    return true;
  }
  return existing == wanted;
}

// A list the pod already has must be a list of objects for the patch to apply cleanly.
const char* check_object_list(const json& container, std::string_view key, bool needs_name) {
  const auto* list = member(container, key);
  if (list == nullptr) return nullptr;
  if (!list->is_array()) return "must be a list";
  for (const auto& item : *list) {
    if (!item.is_object()) return "must be a list of objects";
    if (needs_name && string_member(item, "name") == nullptr) return "has an entry without a name";
  }
  return nullptr;
}

std::string check_shape(const json& pod, std::size_t target) {
  const auto* metadata = member(pod, "metadata");
  if (metadata == nullptr || !metadata->is_object()) return "trainenv: metadata must be an object";
  if (const auto* a = member(*metadata, "annotations"); a != nullptr && !a->is_object()) {
    return "trainenv: metadata.annotations must be an object of strings";
  }
  const auto& container = pod["spec"]["containers"][target];
  const std::string where = "trainenv: spec.containers[" + std::to_string(target) + "]";
  if (!container.is_object()) return where + " must be an object";
  if (const char* why = check_object_list(container, "env", true)) return where + ".env " + why;
  if (const char* why = check_object_list(container, "ports", false))
    return where + ".ports " + why;
  return {};
}

std::string describe_env(const json& env) {
  if (const auto* value = string_member(env, "value")) return "=" + value->substr(0, 40);
  return " (valueFrom)";
}

const json* find_env(const json* list, const std::string& name) {
  if (list == nullptr) return nullptr;
  for (const auto& item : *list) {
    if (const auto* n = string_member(item, "name"); n != nullptr && *n == name) return &item;
  }
  return nullptr;
}

const json* find_port(const json* list, const json& wanted) {
  if (list == nullptr) return nullptr;
  const auto* wanted_name = string_member(wanted, "name");
  for (const auto& item : *list) {
    const auto* protocol = string_member(item, "protocol");
    const bool same_port =
        item.value("containerPort", json()) == wanted["containerPort"] &&
        (protocol == nullptr ? std::string("TCP") : *protocol) == wanted["protocol"];
    const auto* name = string_member(item, "name");
    if (same_port || (wanted_name != nullptr && name != nullptr && *name == *wanted_name))
      return &item;
  }
  return nullptr;
}

void diff_container(const json& container, std::size_t index, const container_wants& want,
                    patch_builder& patch, std::vector<std::string>& warnings) {
  const std::string path = "/spec/containers/" + std::to_string(index);
  const auto* name = string_member(container, "name");
  const std::string where =
      " in container " + quote(name != nullptr ? *name : std::to_string(index));

  std::vector<json> env;
  const auto* existing_env = member(container, "env");
  for (const auto& wanted : want.env) {
    const auto& env_name = wanted["name"].get_ref<const std::string&>();
    if (const auto* existing = find_env(existing_env, env_name)) {
      if (!contains(*existing, wanted)) {
        warnings.push_back(
            make_warning("trainenv: kept user-set " + env_name + describe_env(*existing) + where));
      }
      continue;
    }
    env.push_back(wanted);
  }
  patch.append(container, path, "env", std::move(env));

  std::vector<json> ports;
  const auto* existing_ports = member(container, "ports");
  for (const auto& wanted : want.ports) {
    if (const auto* existing = find_port(existing_ports, wanted)) {
      json defaulted = *existing;  // protocol defaults to TCP
      if (!defaulted.contains("protocol")) defaulted["protocol"] = "TCP";
      if (!contains(defaulted, wanted)) {
        warnings.push_back(make_warning(
            "trainenv: kept user-set port " + existing->value("containerPort", json()).dump() +
            " (wanted " + wanted["containerPort"].dump() + ")" + where));
      }
      continue;
    }
    ports.push_back(wanted);
  }
  patch.append(container, path, "ports", std::move(ports));
}

void diff_annotations(const json& metadata, const json& wanted, patch_builder& patch,
                      std::vector<std::string>& warnings) {
  json added = json::object();
  const auto* existing = member(metadata, "annotations");
  for (const auto& [key, value] : wanted.items()) {
    const auto* current = existing != nullptr ? string_member(*existing, key) : nullptr;
    if (current == nullptr) {
      added[key] = value;
    } else if (*current != value) {
      warnings.push_back(
          make_warning("trainenv: kept user-set annotation " + key + "=" + current->substr(0, 40)));
    }
  }
  patch.add_members(metadata, "/metadata", "annotations", std::move(added));
}

struct selection {
  const policy* chosen = nullptr;
  std::string violation;
};

selection select_policy(const pod_view& pod, const policy_set& policies,
                        const mutate_options& options) {
  const auto known_names = [&] {
    std::string out;
    for (const auto& p : policies.all()) out += (out.empty() ? "" : ", ") + p.name;
    return out.empty() ? std::string("none") : out;
  };
  const std::string* name =
      options.forced_policy.empty() ? pod.annotation(keys::policy) : &options.forced_policy;
  if (name != nullptr) {
    if (const auto* p = policies.by_name(*name)) return {p, {}};
    const std::string source =
        options.forced_policy.empty() ? "annotation " + std::string(keys::policy) : "policy";
    return {nullptr, "trainenv: " + source + " is " + quote(*name) +
                         ", which is not a loaded policy; use one of: " + known_names()};
  }
  if (const auto* framework = pod.label(keys::framework)) {
    if (const auto* p = policies.by_framework(*framework)) return {p, {}};
    std::string values;
    for (const auto& p : policies.all()) {
      for (const auto& f : p.frameworks) values += (values.empty() ? "" : ", ") + f;
    }
    return {nullptr,
            "trainenv: label " + std::string(keys::framework) + " is " + quote(*framework) +
                ", which no policy lists; use one of: " + (values.empty() ? "none" : values) +
                ", or set annotation " + std::string(keys::policy)};
  }
  if (const auto* p = policies.default_policy()) return {p, {}};
  return {nullptr, "trainenv: the pod has no label " + std::string(keys::framework) +
                       " and no policy is marked default; set the label or annotation " +
                       std::string(keys::policy)};
}

}  // namespace

decision mutate_pod(const json& pod, const policy_set& policies, const mutate_options& options) {
  if (!pod.is_object()) return deny("trainenv: the object is not a Pod (expected a JSON object)");
  const pod_view view(pod);
  const auto* step = view.label(keys::ancestor_step);
  if (step == nullptr || *step != "trainer") {
    return pass("not a training pod: label " + std::string(keys::ancestor_step) +
                " is not \"trainer\"");
  }
  if (const auto* inject = view.annotation(keys::inject); inject != nullptr && *inject == "false") {
    return pass("opted out: annotation " + std::string(keys::inject) + " is \"false\"");
  }

  const auto selected = select_policy(view, policies, options);
  if (selected.chosen == nullptr) return deny(selected.violation);
  const policy& p = *selected.chosen;

  auto topo = resolve_topology(view, p);
  if (!topo) return deny(topo.message(), p.name);
  if (auto problem = check_shape(pod, topo->container); !problem.empty())
    return deny(std::move(problem), p.name);
  auto want = render(p, *topo);
  if (!want) return deny(want.message(), p.name);

  decision d;
  d.policy = p.name;
  patch_builder patch;
  const auto& containers = *view.containers();
  for (const auto& c : want->containers) {
    diff_container(containers[c.index], c.index, c, patch, d.warnings);
  }
  diff_annotations(pod["metadata"], want->annotations, patch, d.warnings);
  d.patch = patch.take();
  return d;
}

decision mutate(const admission_request& request, const policy_set& policies,
                const mutate_options& options) {
  if (!request.is_pod_create()) {
    return pass("not a pod CREATE: " + request.operation + " of " + request.resource);
  }
  return mutate_pod(request.object, policies, options);
}

}  // namespace trainenv::core
