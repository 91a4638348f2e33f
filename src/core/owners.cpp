#include "trainenv/core/owners.hpp"

#include <algorithm>
#include <cctype>

#include "trainenv/core/pod_view.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Counts above this are refused as implausible (and keep every product below 2^63).
constexpr std::int64_t max_count = 1'000'000;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A whole number from 0 to max_count, or `fallback` when absent.
result<std::int64_t> count_member(const json& object, std::string_view key, std::int64_t fallback,
                                  const std::string& where) {
  const auto* value = member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer() || value->get<std::int64_t>() < 0 ||
      value->get<std::int64_t>() > max_count) {
    return error{where + "." + std::string(key) + " is " + value->dump() +
                 "; expected a whole number from 0 to " + std::to_string(max_count)};
  }
  return value->get<std::int64_t>();
}

}  // namespace

std::string owner_ref::group() const {
  const auto slash = api_version.find('/');
  return slash == std::string::npos ? std::string() : api_version.substr(0, slash);
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

const json* find_path(const json& object, const member_path& path) {
  const json* at = &object;
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

std::string owner_kind::api_path(const owner_ref& ref) const {
  const std::string version = ref.api_version.substr(ref.api_version.find('/') + 1);
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (!cluster_scoped) path += "/namespaces/" + ref.namespace_name;
  return path + "/" + resource + "/" + ref.name;
}

result<std::int64_t> job_spec_pods(const json& spec, const std::string& where) {
  if (!spec.is_object()) return error{where + " is not a Job spec (expected an object)"};
  auto parallelism = count_member(spec, "parallelism", 1, where);
  if (!parallelism) return std::move(parallelism).take_error();
  auto completions = count_member(spec, "completions", *parallelism, where);
  if (!completions) return std::move(completions).take_error();
  return std::min(*parallelism, *completions);
}

result<std::vector<role_pods>> read_roles(const owner_kind& kind, const json& object,
                                          const owner_ref& ref, std::string_view own_role) {
  const std::string who = ref.display();
  if (!kind.roles) return error{who + " gives no pod counts"};
  const auto& layout = *kind.roles;

  // One role: the pods of one entry (or of the object itself), its replicas times its Job's.
  const auto read_entry = [&](const json& entry, std::string role,
                              const std::string& where) -> result<role_pods> {
    role_pods out;
    out.role = std::move(role);
    out.source = who + " " + where;
    std::int64_t replicas = 1;
    if (!layout.replicas_member.empty()) {
      auto n = count_member(entry, layout.replicas_member, 1, who + " " + where);
      if (!n) return std::move(n).take_error();
      replicas = *n;
    }
    if (!layout.job_spec.empty()) {
      const auto* spec = find_path(entry, layout.job_spec);
      if (spec == nullptr) {
        return error{who + " " + where + " has no " + path_text(layout.job_spec)};
      }
      auto per_job = job_spec_pods(*spec, who + " " + where + "." + path_text(layout.job_spec));
      if (!per_job) return std::move(per_job).take_error();
      out.pods_per_job = *per_job;
    }
    out.pods = replicas * out.pods_per_job;
    if (out.pods > max_count) {
      return error{who + " " + where + " runs " + std::to_string(out.pods) + " pods; more than " +
                   std::to_string(max_count) + " is not believed"};
    }
    if (!layout.pod_template.empty()) out.pod_template = find_path(entry, layout.pod_template);
    return out;
  };

  std::vector<role_pods> roles;
  switch (layout.kind) {
    case role_layout::shape::own: {
      auto one = read_entry(object, std::string(own_role), path_text(layout.job_spec));
      if (!one) return std::move(one).take_error();
      roles.push_back(std::move(*one));
      break;
    }
    case role_layout::shape::list: {
      const auto* list = find_path(object, layout.entries);
      const std::string where = path_text(layout.entries);
      if (list == nullptr || !list->is_array()) {
        return error{who + " has no list " + where};
      }
      for (std::size_t i = 0; i < list->size(); ++i) {
        const auto& entry = (*list)[i];
        const auto* name = string_member(entry, layout.name_member);
        if (name == nullptr || name->empty()) {
          return error{who + " " + where + "[" + std::to_string(i) + "] has no " +
                       layout.name_member};
        }
        auto one = read_entry(entry, *name, where + "[" + *name + "]");
        if (!one) return std::move(one).take_error();
        roles.push_back(std::move(*one));
      }
      break;
    }
    case role_layout::shape::map: {
      const auto* map = find_path(object, layout.entries);
      const std::string where = path_text(layout.entries);
      if (map == nullptr || !map->is_object()) {
        return error{who + " has no mapping " + where};
      }
      for (const auto& [key, entry] : map->items()) {
        auto one = read_entry(entry, lower(key), where + "." + key);
        if (!one) return std::move(one).take_error();
        roles.push_back(std::move(*one));
      }
      break;
    }
  }
  for (std::size_t i = 0; i < roles.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (roles[i].role == roles[j].role) {
        return error{who + " names role " + quote(roles[i].role) + " twice"};
      }
    }
  }
  return roles;
}

}  // namespace trainenv::core
