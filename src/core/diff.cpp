#include "trainenv/core/diff.hpp"

#include <algorithm>

#include "trainenv/core/json_access.hpp"
#include "trainenv/core/json_patch.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::size_t max_warning_length = 120;

// Sidecars get the same env and mounts as the target container: the summary names them once.
void note_once(std::vector<std::string>& names, std::string name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
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

// Adds the members of `defaults` that `value` lacks; nested objects only where `value` has them.
void fill_defaults(json& value, const json& defaults) {
  if (!value.is_object()) return;
  for (const auto& [k, v] : defaults.items()) {
    const auto it = value.find(k);
    if (it == value.end()) {
      if (!v.is_object()) value[k] = v;
    } else if (v.is_object()) {
      fill_defaults(*it, v);
    }
  }
}

// Adds each wanted entry of the list `key` that the pod lacks (by `find`); an entry the pod
// already has is kept, with a warning (from `describe`) when it differs.
// `defaults` are members the apiserver fills in when absent (a port's protocol, a fieldRef's
// apiVersion), compared as such: a pod that says the same thing in fewer words agrees.
// `record` notes each added entry in the decision's summary.
template <class Find, class Describe, class Record>
void merge_list(const json& parent, const std::string& path, std::string_view key,
                const std::vector<json>& wanted, Find find, Describe describe, Record record,
                patch_builder& patch, std::vector<std::string>& warnings,
                const json& defaults = json::object()) {
  std::vector<json> added;
  const auto* existing_list = member(parent, key);
  for (const auto& item : wanted) {
    if (const auto* existing = existing_list != nullptr ? find(*existing_list, item) : nullptr) {
      json defaulted = *existing;
      fill_defaults(defaulted, defaults);
      if (!contains(defaulted, item)) warnings.push_back(make_warning(describe(*existing, item)));
      continue;
    }
    record(item);
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
                const std::string& where, patch_builder& patch, decision& d) {
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
      d.injected.args.push_back(arg);
    } else if (present->get_ref<const std::string&>() != arg) {
      d.warnings.push_back(make_warning("trainenv: kept user-set arg " +
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
                    decision& d) {
  auto& warnings = d.warnings;
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
      [&](const json& w) { note_once(d.injected.env, w["name"].get<std::string>()); }, patch,
      warnings, json{{"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}}}}}});
  merge_list(
      container, path, "ports", want.ports, find_port,
      [&](const json& e, const json& w) {
        return "trainenv: kept user-set port " + e.value("containerPort", json()).dump() +
               " (wanted " + w["containerPort"].dump() + ")" + where;
      },
      [&](const json& w) { d.injected.ports.push_back(w["containerPort"].get<std::int64_t>()); },
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
      [&](const json& w) { note_once(d.injected.mounts, w["mountPath"].get<std::string>()); },
      patch, warnings);
  merge_args(container, path, want, where, patch, d);
}

void diff_annotations(const json& metadata, const json& wanted, patch_builder& patch, decision& d) {
  json added = json::object();
  const auto* existing = member(metadata, "annotations");
  for (const auto& [key, value] : wanted.items()) {
    const auto* current = existing != nullptr ? string_member(*existing, key) : nullptr;
    if (current == nullptr) {
      added[key] = value;
      d.injected.annotations.push_back(key);
    } else if (*current != value) {
      d.warnings.push_back(
          make_warning("trainenv: kept user-set annotation " + key + "=" + current->substr(0, 40)));
    }
  }
  patch.add_members(metadata, "/metadata", "annotations", std::move(added));
}

}  // namespace

std::string make_warning(std::string text) {
  for (auto& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  if (text.size() > max_warning_length) text = text.substr(0, max_warning_length - 3) + "...";
  return text;
}

decision build_patch(const json& pod, const wants& want, const std::string& policy) {
  decision d;
  d.policy = policy;
  for (const auto& w : want.warnings) d.warnings.push_back(make_warning(w));
  patch_builder patch;
  for (const auto& c : want.containers) diff_container(pod["spec"][c.list][c.index], c, patch, d);
  merge_list(
      pod["spec"], "/spec", "volumes", want.volumes,
      [](const json& list, const json& w) {
        return find_by(list, "name", w["name"].get<std::string>());
      },
      [](const json&, const json& w) {
        return "trainenv: kept user-set volume " + w["name"].get<std::string>();
      },
      [&](const json& w) { d.injected.volumes.push_back(w["name"].get<std::string>()); }, patch,
      d.warnings);
  diff_annotations(pod["metadata"], want.annotations, patch, d);
  d.patch = patch.take();
  return d;
}

}  // namespace trainenv::core
