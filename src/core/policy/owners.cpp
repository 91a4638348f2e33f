#include "trainenv/core/policy/owners.hpp"

#include <algorithm>
#include <cctype>
#include <functional>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/text/command_flags.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Whether two references name the same object: the same API group, kind, namespace and name. The
// version may differ (the API server converts between versions); the uid is checked apart, so
// that a recreated object is refused as a uid mismatch.
bool same_object(const owner_ref& a, const owner_ref& b) {
  return a.kind == b.kind && a.name == b.name && a.namespace_name == b.namespace_name &&
         a.group() == b.group();
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A whole number from 0 to max_count, or `fallback` when absent. `where()` names the object in
// the error; built only then, as the owner walk reads these on every admission.
template <class Where>
result<std::int64_t> count_member(const json& object, std::string_view key, std::int64_t fallback,
                                  const Where& where) {
  const auto* value = member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer() || value->get<std::int64_t>() < 0 ||
      value->get<std::int64_t>() > max_count) {
    return error{where() + "." + std::string(key) + " is " + value->dump() +
                 "; expected a whole number from 0 to " + std::to_string(max_count)};
  }
  return value->get<std::int64_t>();
}

template <class Where>
result<std::int64_t> spec_pods(const json& spec, const Where& where) {
  if (!spec.is_object()) return error{where() + " is not a Job spec (expected an object)"};
  auto parallelism = count_member(spec, "parallelism", 1, where);
  if (!parallelism) return std::move(parallelism).take_error();
  auto completions = count_member(spec, "completions", *parallelism, where);
  if (!completions) return std::move(completions).take_error();
  return std::min(*parallelism, *completions);
}

// One role: the pods of one entry (or of the object itself), its replicas times its Job's, named
// `who` `where` in messages.
result<role_pods> read_role(const role_layout& layout, const json& entry, std::string role,
                            const std::string& who, const std::string& where) {
  role_pods out;
  out.entry = std::move(role);
  out.role = out.entry;
  out.source = who + " " + where;
  std::int64_t replicas = 1;
  if (!layout.replicas_member.empty()) {
    auto n = count_member(entry, layout.replicas_member, layout.replicas_default,
                          [&] { return out.source; });
    if (!n) return std::move(n).take_error();
    replicas = *n;
  }
  if (!layout.job_spec.empty()) {
    const auto* spec = find_path(entry, layout.job_spec);
    if (spec == nullptr) return error{out.source + " has no " + path_text(layout.job_spec)};
    auto per_job = spec_pods(*spec, [&] { return out.source + "." + path_text(layout.job_spec); });
    if (!per_job) return std::move(per_job).take_error();
    out.jobs = replicas;
    out.pods_per_job = *per_job;
    out.pods = replicas * *per_job;
    // Trainer puts its ancestor-step label on the Job template (which holds the JobSpec).
    const member_path job_template(layout.job_spec.begin(), layout.job_spec.end() - 1);
    if (const auto* step = object_label(find_path(entry, job_template), keys::ancestor_step))
      out.step = *step;
  } else {
    // One pod per replica, all in one job (a Volcano task).
    out.pods_per_job = replicas;
    out.pods = replicas;
  }
  if (out.pods > max_count) {
    return error{who + " " + where + " runs " + std::to_string(out.pods) + " pods; more than " +
                 std::to_string(max_count) + " is not believed"};
  }
  if (!layout.pod_template.empty()) out.pod_template = find_path(entry, layout.pod_template);
  if (out.step.empty()) {
    if (const auto* step = object_label(out.pod_template, keys::ancestor_step)) out.step = *step;
  }
  if (const auto* named = object_label_or_annotation(out.pod_template, keys::role)) {
    if (!is_dns_label(*named)) {
      return error{out.source + " template's " + std::string(keys::role) + " is " + quote(*named) +
                   "; a role is a DNS label (at most 63 of a-z, 0-9 and '-')"};
    }
    out.role = *named;
  }
  const auto* inject = object_annotation(out.pod_template, keys::inject);
  out.opted_out = inject != nullptr && *inject == "false";
  if (!layout.depends_on_member.empty()) {
    const auto* list = member(entry, layout.depends_on_member);
    if (list != nullptr && list->is_array()) {
      for (const auto& d : *list) {
        const auto* name = string_member(d, "name");
        const auto* status = string_member(d, "status");
        if (name != nullptr) out.depends_on.emplace_back(*name, status != nullptr ? *status : "");
      }
    }
  }
  return out;
}

// The roles a job plugin's flags give the entries they name (a template's own trainenv.io/role
// wins), and the entries left out of the world where only those it names train.
void apply_plugin(const job_plugin& plugin, const json& object, std::vector<role_pods>& roles) {
  if (!runs_plugin(plugin, object)) return;
  std::string named;
  std::vector<std::string> entries;
  for (const auto& rule : plugin.roles) {
    const auto entry = plugin_flag(plugin, object, rule.flag).value_or(rule.entry_default);
    named += (named.empty() ? "" : ", ") + rule.flag + "=" + entry;
    entries.push_back(entry);
    for (auto& r : roles) {
      if (r.entry == entry && r.role == r.entry) r.role = rule.plays;
    }
  }
  if (!plugin.only_named_roles_train) return;
  for (auto& r : roles) {
    if (std::find(entries.begin(), entries.end(), r.entry) == entries.end())
      r.left_out = plugin.name + " names only " + named;
  }
}

}  // namespace

bool runs_plugin(const job_plugin& plugin, const json& owner) {
  return find_path(owner, plugin.at) != nullptr;
}

std::optional<std::string> plugin_flag(const job_plugin& plugin, const json& owner,
                                       std::string_view flag) {
  const auto* args = find_path(owner, plugin.at);
  return args != nullptr ? flag_value(*args, flag) : std::nullopt;
}

const json* find_object(const std::vector<json>& objects, const owner_ref& ref) {
  const auto group = ref.group();
  for (const auto& object : objects) {
    const auto* metadata = member(object, "metadata");
    const auto* api_version = string_member(object, "apiVersion");
    const auto* kind = string_member(object, "kind");
    const auto* name = metadata != nullptr ? string_member(*metadata, "name") : nullptr;
    if (api_version == nullptr || kind == nullptr || name == nullptr) continue;
    const auto* ns = string_member(*metadata, "namespace");
    const std::string_view version(*api_version);
    const auto slash = version.find('/');
    if (*kind == ref.kind && *name == ref.name &&
        (slash == std::string_view::npos ? std::string_view() : version.substr(0, slash)) ==
            group &&
        (ns != nullptr ? std::string_view(*ns) : std::string_view()) == ref.namespace_name) {
      return &object;
    }
  }
  return nullptr;
}

std::string owner_kind::api_path(const owner_ref& ref) const {
  const std::string version = ref.api_version.substr(ref.api_version.find('/') + 1);
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (!cluster_scoped) path += "/namespaces/" + ref.namespace_name;
  return path + "/" + resource + "/" + ref.name;
}

result<owner_kind_set> owner_kind_set::build(std::vector<owner_kind> kinds) {
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (kinds[i].group != kinds[j].group || kinds[i].kind != kinds[j].kind) continue;
      for (const auto& version : kinds[i].versions) {
        if (std::find(kinds[j].versions.begin(), kinds[j].versions.end(), version) !=
            kinds[j].versions.end()) {
          return error{kinds[i].source + ": owner kind " + quote(kinds[i].name) + " claims " +
                       kinds[i].kind + " " + (kinds[i].group.empty() ? "" : kinds[i].group + "/") +
                       version + ", which owner kind " + quote(kinds[j].name) + " (" +
                       kinds[j].source + ") already describes"};
        }
      }
    }
  }
  owner_kind_set out;
  out.kinds_ = std::move(kinds);
  return out;
}

const owner_kind* owner_kind_set::find(std::string_view api_version, std::string_view kind) const {
  const auto slash = api_version.find('/');
  const auto group =
      slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
  const auto version = api_version.substr(slash == std::string_view::npos ? 0 : slash + 1);
  for (const auto& k : kinds_) {
    if (k.kind == kind && k.group == group &&
        std::find(k.versions.begin(), k.versions.end(), version) != k.versions.end()) {
      return &k;
    }
  }
  return nullptr;
}

std::string_view failure_name(lookup_failure f) {
  switch (f) {
    case lookup_failure::not_found:
      return "not found";
    case lookup_failure::uid_mismatch:
      return "a different object of that name (uid mismatch: recreated?)";
    case lookup_failure::unauthorized:
      return "unauthorized (401)";
    case lookup_failure::forbidden:
      return "forbidden (403)";
    case lookup_failure::server_error:
      return "API server error";
    case lookup_failure::malformed:
      return "malformed answer";
    case lookup_failure::too_large:
      return "answer too large";
    case lookup_failure::timeout:
      return "timed out";
    case lookup_failure::unreachable:
      return "API server unreachable";
    case lookup_failure::no_access:
      return "no API access configured";
  }
  return "failed";
}

int failure_code(lookup_failure f) {
  switch (f) {
    case lookup_failure::not_found:
    case lookup_failure::uid_mismatch:
      return 404;
    case lookup_failure::unauthorized:
    case lookup_failure::forbidden:
    case lookup_failure::no_access:
    case lookup_failure::too_large:  // our own bound: a retry meets it again
      return 500;
    case lookup_failure::malformed:  // a proxy's error page, say: a retry may succeed
    case lookup_failure::server_error:
    case lookup_failure::timeout:
    case lookup_failure::unreachable:
      return 503;
  }
  return 500;
}

const json& owner_fetch::object() const {
  static const json none;
  return fetched != nullptr ? fetched->json() : none;
}

void owner_values::add(owner_ref ref, json object) {
  add(std::move(ref), std::make_shared<const owner_object>(std::move(object)));
}

void owner_values::add(owner_ref ref, std::shared_ptr<const owner_object> object) {
  (void)push(std::move(ref), std::move(object), false);
}

const owner_fetch& owner_values::push(owner_ref ref, std::shared_ptr<const owner_object> object,
                                      bool cached) const {
  const auto* metadata = object != nullptr ? member(object->json(), "metadata") : nullptr;
  const auto* uid = metadata != nullptr ? string_member(*metadata, "uid") : nullptr;
  if (!ref.uid.empty() && (uid == nullptr || *uid != ref.uid)) {
    // The object's own uid is not said: an answer never echoes one (docs/security.md).
    return keep(owner_fetch{std::move(ref), nullptr, lookup_failure::uid_mismatch,
                            "its metadata.uid is not the reference's", cached});
  }
  return keep(owner_fetch{std::move(ref), std::move(object), std::nullopt, {}, cached});
}

const owner_fetch& owner_values::keep(owner_fetch f) const {
  // In place of one held for the same object: what a walk found before it is read anew is
  // not read again (each pass of the walk starts over).
  for (auto& held : fetched_) {
    if (same_object(held.ref, f.ref)) {
      held = std::move(f);
      held.ref.fresh = false;
      return held;
    }
  }
  f.ref.fresh = false;
  return fetched_.emplace_back(std::move(f));
}

void owner_values::add_failure(owner_ref ref, lookup_failure failure, std::string detail) {
  (void)keep({std::move(ref), nullptr, failure, std::move(detail)});
}

const owner_fetch* owner_values::find(const owner_ref& ref) const {
  for (const auto& f : fetched_) {
    if (same_object(f.ref, ref)) return &f;
  }
  if (!at_hand_) return nullptr;
  auto object = at_hand_(ref);
  if (object == nullptr) return nullptr;
  return &push(ref, std::move(object), true);
}

result<std::int64_t> job_spec_pods(const json& spec, const std::string& where) {
  return spec_pods(spec, [&] { return where; });
}

result<std::vector<role_pods>> read_roles(const owner_kind& kind, const json& object,
                                          const owner_ref& ref, std::string_view own_role) {
  const std::string who = ref.display();
  if (!kind.roles) return error{who + " gives no pod counts"};
  const auto& layout = *kind.roles;

  const auto read_entry = [&](const json& entry, std::string role, const std::string& where) {
    return read_role(layout, entry, std::move(role), who, where);
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
        const auto* given = string_member(entry, layout.name_member);
        std::string name = given != nullptr ? *given : std::string();
        if (name.empty() && layout.name_default) {
          variable_values index;
          index.set(variable::index, static_cast<std::int64_t>(i));
          auto fallback = layout.name_default->render(index);
          if (!fallback) return std::move(fallback).take_error();
          name = std::move(*fallback);
        }
        if (name.empty()) {
          return error{who + " " + where + "[" + std::to_string(i) + "] has no " +
                       layout.name_member};
        }
        auto one = read_entry(entry, name, where + "[" + name + "]");
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
  for (const auto& plugin : kind.plugins) apply_plugin(plugin, object, roles);
  for (std::size_t i = 0; i < roles.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (roles[i].role != roles[j].role) continue;
      if (roles[i].entry == roles[j].entry) {
        return error{who + " names role " + quote(roles[i].role) + " twice"};
      }
      return error{who + ": " + quote(roles[j].entry) + " and " + quote(roles[i].entry) +
                   " both play role " + quote(roles[i].role) + " (by " + std::string(keys::role) +
                   " on their templates or a job plugin's flags); " + "give each its own"};
    }
  }
  return roles;
}

owner_reading read_owner(const json& object, const owner_kind& kind, const owner_ref& ref) {
  owner_reading out;
  out.kind_id = kind.id;
  out.controller_namespace = ref.namespace_name;
  out.controller = controller_of(object, ref.namespace_name);
  if (kind.roles) out.roles = read_roles(kind, object, ref, {});
  out.coordinator = read_coordinator(kind, object);
  if (kind.gives_framework) out.runtime = read_runtime_settings(object, ref.display());
  if (!kind.runtime_ref.empty()) out.trainjob = read_trainjob_settings(object, ref.display());
  return out;
}

const std::optional<owner_ref>& owner_object::controller(std::string_view ns,
                                                         std::optional<owner_ref>& scratch) const {
  if (reading_ && reading_->controller_namespace == ns) return reading_->controller;
  scratch = controller_of(value_, ns);
  return scratch;
}

std::optional<coordinator_pod> read_coordinator(const owner_kind& kind, const json& object) {
  if (!kind.coordinator) return std::nullopt;
  const auto& rule = *kind.coordinator;
  const auto* at = find_path(object, rule.at);
  if (at == nullptr || !at->is_object()) return std::nullopt;
  const auto* role = string_member(*at, rule.role_member);
  if (role == nullptr || role->empty()) return std::nullopt;
  const auto index = [&](const std::string& key) -> std::int64_t {
    const auto* n = member(*at, key);
    return n != nullptr && n->is_number_integer()
               ? std::max<std::int64_t>(n->get<std::int64_t>(), 0)
               : 0;
  };
  return coordinator_pod{*role, index(rule.job_index_member), index(rule.pod_index_member)};
}

const role_pods* owner_counts::find(std::string_view role) const {
  for (const auto& r : roles) {
    if (r.role == role) return &r;
  }
  return nullptr;
}

}  // namespace trainenv::core
