// bytes are decoded elsewhere; here: Pod -> policy -> topology -> wants -> diff -> patch.
#include "trainenv/core/engine.hpp"

#include <algorithm>

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
    const auto items = wanted.items();
    return std::all_of(items.begin(), items.end(), [&](const auto& item) {
      const auto it = existing.find(item.key());
      return it != existing.end() && contains(*it, item.value());
    });
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

// The parts of the pod the patch will touch must have the shapes it assumes.
std::string check_shape(const json& pod, const wants& want) {
  const auto* metadata = member(pod, "metadata");
  if (metadata == nullptr || !metadata->is_object()) return "trainenv: metadata must be an object";
  if (const auto* a = member(*metadata, "annotations"); a != nullptr && !a->is_object()) {
    return "trainenv: metadata.annotations must be an object of strings";
  }
  if (!want.volumes.empty()) {
    if (const char* why = check_object_list(pod["spec"], "volumes", true))
      return std::string("trainenv: spec.volumes ") + why;
  }
  for (const auto& c : want.containers) {
    const auto& container = pod["spec"][c.list][c.index];
    const std::string where = "trainenv: spec." + c.list + "[" + std::to_string(c.index) + "]";
    if (!container.is_object()) return where + " must be an object";
    if (const char* why = check_object_list(container, "env", true)) return where + ".env " + why;
    if (const char* why = check_object_list(container, "ports", false))
      return where + ".ports " + why;
    if (const char* why = check_object_list(container, "volumeMounts", false))
      return where + ".volumeMounts " + why;
    for (const char* key : {"command", "args"}) {
      if (const auto* list = member(container, key)) {
        if (!list->is_array() ||
            !std::all_of(list->begin(), list->end(), [](const json& a) { return a.is_string(); })) {
          return where + "." + key + " must be a list of strings";
        }
      }
    }
  }
  return {};
}

std::string describe_env(const json& env) {
  if (const auto* value = string_member(env, "value")) return "=" + value->substr(0, 40);
  return " (valueFrom)";
}

const json* find_by(const json& list, std::string_view key, const std::string& value) {
  for (const auto& item : list) {
    if (const auto* v = string_member(item, key); v != nullptr && *v == value) return &item;
  }
  return nullptr;
}

const json* find_port(const json& list, const json& wanted) {
  const auto* wanted_name = string_member(wanted, "name");
  for (const auto& item : list) {
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

// Adds each wanted entry of the list `key` that the pod lacks (by `find`); an entry the pod
// already has is kept, with a warning (from `describe`) when it differs.
// `defaults` are members the apiserver fills in when absent (a port's protocol), compared as such.
template <class Find, class Describe>
void merge_list(const json& parent, const std::string& path, std::string_view key,
                const std::vector<json>& wanted, Find find, Describe describe, patch_builder& patch,
                std::vector<std::string>& warnings, const json& defaults = json::object()) {
  std::vector<json> added;
  const auto* existing_list = member(parent, key);
  for (const auto& item : wanted) {
    if (const auto* existing = existing_list != nullptr ? find(*existing_list, item) : nullptr) {
      json defaulted = *existing;
      for (const auto& [k, v] : defaults.items()) {
        if (!defaulted.contains(k)) defaulted[k] = v;
      }
      if (!contains(defaulted, item)) warnings.push_back(make_warning(describe(*existing, item)));
      continue;
    }
    added.push_back(item);
  }
  patch.append(parent, path, key, std::move(added));
}

// "--nproc_per_node=4" and "--nproc-per-node 4" name the same flag: compare what precedes '=',
// with '_' read as '-'.
std::string arg_key(std::string_view arg) {
  std::string key(arg.substr(0, arg.find('=')));
  if (key.rfind("--", 0) == 0) std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void merge_args(const json& container, const std::string& path, const container_wants& want,
                const std::string& where, patch_builder& patch,
                std::vector<std::string>& warnings) {
  const auto* existing = member(container, "args");
  std::vector<json> added;
  for (const auto& arg : want.args) {
    const auto key = arg_key(arg);
    const json* present = nullptr;
    if (existing != nullptr) {
      for (const auto& a : *existing) {
        if (arg_key(a.get_ref<const std::string&>()) == key) present = &a;
      }
    }
    if (present == nullptr) {
      added.emplace_back(arg);
    } else if (present->get_ref<const std::string&>() != arg) {
      warnings.push_back(make_warning("trainenv: kept user-set arg " +
                                      present->get<std::string>().substr(0, 40) + where));
    }
  }
  if (added.empty()) return;
  if (!want.args_at || existing == nullptr) {
    patch.append(container, path, "args", std::move(added));
    return;
  }
  // Inserted in order right after the command prefix, ahead of the user's own args.
  std::size_t at = *want.args_at;
  for (auto& arg : added) patch.add(path + "/args/" + std::to_string(at++), std::move(arg));
}

void diff_container(const json& container, const container_wants& want, patch_builder& patch,
                    std::vector<std::string>& warnings) {
  const std::string path = "/spec/" + want.list + "/" + std::to_string(want.index);
  const auto* name = string_member(container, "name");
  const std::string where =
      " in container " + quote(name != nullptr ? *name : std::to_string(want.index));

  merge_list(
      container, path, "env", want.env,
      [](const json& list, const json& w) {
        return find_by(list, "name", w["name"].get<std::string>());
      },
      [&](const json& e, const json& w) {
        return "trainenv: kept user-set " + w["name"].get<std::string>() + describe_env(e) + where;
      },
      patch, warnings);
  merge_list(
      container, path, "ports", want.ports, find_port,
      [&](const json& e, const json& w) {
        return "trainenv: kept user-set port " + e.value("containerPort", json()).dump() +
               " (wanted " + w["containerPort"].dump() + ")" + where;
      },
      patch, warnings, json{{"protocol", "TCP"}});
  merge_list(
      container, path, "volumeMounts", want.mounts,
      [](const json& list, const json& w) {
        return find_by(list, "mountPath", w["mountPath"].get<std::string>());
      },
      [&](const json& e, const json& w) {
        return "trainenv: kept user-set mount " + w["mountPath"].get<std::string>() +
               " of volume " + e.value("name", std::string("?")) + where;
      },
      patch, warnings);
  merge_args(container, path, want, where, patch, warnings);
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
  // The names a denial suggests; bounded, as a cluster may load hundreds of policies.
  const auto listing = [](const std::vector<std::string>& names) {
    constexpr std::size_t shown = 16;
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i)
      out += (out.empty() ? "" : ", ") + names[i];
    if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
    return out.empty() ? std::string("none") : out;
  };
  const auto known_names = [&] {
    std::vector<std::string> names;
    for (const auto& p : policies.all()) names.push_back(p.name);
    return listing(names);
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
  const policy* chosen = nullptr;
  if (const auto* framework = pod.label(keys::framework)) {
    chosen = policies.by_framework(*framework);
    if (chosen == nullptr) {
      std::vector<std::string> values;
      for (const auto& p : policies.all())
        values.insert(values.end(), p.frameworks.begin(), p.frameworks.end());
      return {nullptr, "trainenv: label " + std::string(keys::framework) + " is " +
                           quote(*framework) + ", which no policy lists; use one of: " +
                           listing(values) + ", or set annotation " + std::string(keys::policy)};
    }
  } else {
    chosen = policies.default_policy();
    if (chosen == nullptr) {
      return {nullptr, "trainenv: the pod has no label " + std::string(keys::framework) +
                           " and no policy is marked default; set the label or annotation " +
                           std::string(keys::policy)};
    }
  }
  // A policy that takes over this one for certain commands (torchtune's `tune run` over torch).
  for (const auto* replacement : policies.replacements_of(chosen->name)) {
    const auto target = pod.target_container(replacement->container);
    if (target &&
        args_position_after((*pod.containers())[*target], replacement->replaces->command_prefix)) {
      return {replacement, {}};
    }
  }
  return {chosen, {}};
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
  auto want = render(p, *topo, view);
  if (!want) return deny(want.message(), p.name);
  if (!want->applies) {
    return pass("policy " + quote(p.name) + " does not apply: its condition " +
                quote(p.when_source) + " is false");
  }
  return build_patch(pod, *want, p.name);
}

decision build_patch(const json& pod, const wants& want, const std::string& policy) {
  if (auto problem = check_shape(pod, want); !problem.empty())
    return deny(std::move(problem), policy);

  decision d;
  d.policy = policy;
  for (const auto& w : want.warnings) d.warnings.push_back(make_warning(w));
  patch_builder patch;
  for (const auto& c : want.containers)
    diff_container(pod["spec"][c.list][c.index], c, patch, d.warnings);
  merge_list(
      pod["spec"], "/spec", "volumes", want.volumes,
      [](const json& list, const json& w) {
        return find_by(list, "name", w["name"].get<std::string>());
      },
      [](const json&, const json& w) {
        return "trainenv: kept user-set volume " + w["name"].get<std::string>();
      },
      patch, d.warnings);
  diff_annotations(pod["metadata"], want.annotations, patch, d.warnings);
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
