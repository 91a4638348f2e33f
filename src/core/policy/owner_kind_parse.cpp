// The OwnerKind parser (policies/owners.yaml): owners.hpp's parse_owner_kind, field by field,
// each problem named with its field and the fix, as policy_parse.cpp does for policies.
#include <functional>

#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {

using nlohmann::json;

namespace {

// A field-by-field reader of an OwnerKind document; the first problem ends the parse.
class owner_kind_parser {
 public:
  explicit owner_kind_parser(std::string_view source) : source_(source) {}

  result<owner_kind> parse(const json& document) {
    owner_kind out;
    out.source = source_;
    const auto* spec = parse_identity(document, out);
    if (spec == nullptr) return take();
    if (!known(*spec, "spec",
               {"apiGroup", "versions", "kind", "resource", "clusterScoped", "roles", "runtimeRef",
                "framework", "naming", "podLabels", "coordinator", "writes", "plugins",
                "defaultPolicy", "wiredBy", "sshKeys"}))
      return take();
    const auto* group = text(*spec, "apiGroup", "spec.apiGroup", true);
    if (failed_) return take();
    out.group = group != nullptr ? *group : std::string();
    const auto* versions = member(*spec, "versions");
    if (versions == nullptr || !versions->is_array() || versions->empty())
      return fail("spec.versions", "must be a non-empty list, e.g. [v1]");
    for (const auto& v : *versions) {
      if (!v.is_string() || v.get_ref<const std::string&>().empty())
        return fail("spec.versions", "must be a list of version names");
      out.versions.push_back(v.get<std::string>());
    }
    const auto* kind = text(*spec, "kind", "spec.kind");
    if (kind == nullptr) return take();
    out.kind = *kind;
    if (const auto* wired_by = text(*spec, "wiredBy", "spec.wiredBy", true)) {
      // Never read: its pods pass before any lookup, so it needs nothing else.
      out.wired_by = *wired_by;
      if (!known(*spec, "spec", {"apiGroup", "versions", "kind", "wiredBy"})) return take();
      return out;
    }
    if (failed_) return take();
    const auto* resource = text(*spec, "resource", "spec.resource");
    if (resource == nullptr) return take();
    out.resource = *resource;
    if (!is_dns_label(out.resource))
      return fail(
          "spec.resource",
          quote(out.resource) + " is not a resource name; write the plural, lower-case, e.g. jobs");
    out.cluster_scoped = flag(*spec, "clusterScoped", "spec.clusterScoped");
    out.gives_framework = flag(*spec, "framework", "spec.framework");
    if (const auto* ref = text(*spec, "runtimeRef", "spec.runtimeRef", true))
      out.runtime_ref = split(*ref);
    if (const auto* keys = member(*spec, "sshKeys")) {
      if (!keys->is_array() || keys->empty())
        return fail("spec.sshKeys",
                    "must be a non-empty list of member paths, e.g. [spec.plugins.ssh]");
      for (std::size_t i = 0; i < keys->size(); ++i) {
        const auto* path = text(*keys, i, "spec.sshKeys[" + std::to_string(i) + "]");
        if (path == nullptr) return take();
        out.ssh_keys.push_back(split(*path));
      }
    }
    if (failed_) return take();
    if (const auto* roles = member(*spec, "roles")) {
      auto layout = parse_roles(*roles);
      if (!layout) return take();
      out.roles = std::move(*layout);
    }
    if (const auto* naming = member(*spec, "naming")) {
      if (!out.roles)
        return fail("spec.naming", "needs roles: only a kind that runs pods names them");
      auto parsed = parse_naming(*naming);
      if (!parsed) return take();
      out.naming = std::move(*parsed);
    }
    if (const auto* labels = member(*spec, "podLabels")) {
      if (!parse_pod_labels(*labels, out.labels)) return take();
    }
    if (!parse_controller_facts(*spec, out)) return take();
    if (const auto* policy = text(*spec, "defaultPolicy", "spec.defaultPolicy", true)) {
      if (!is_dns_label(*policy))
        return fail("spec.defaultPolicy", quote(*policy) + " is not a policy name");
      out.default_policy = *policy;
    }
    if (failed_) return take();
    if (!out.roles && out.runtime_ref.empty() && !out.gives_framework) {
      return fail(
          "spec",
          "gives nothing: add roles (where the pod counts sit), runtimeRef or framework: true");
    }
    return out;
  }

 private:
  // apiVersion, kind and metadata.name: the spec, or null when they are wrong (the problem kept).
  const json* parse_identity(const json& document, owner_kind& out) {
    if (!document.is_object()) {
      fail("", "must be a mapping with apiVersion, kind, metadata and spec");
      return nullptr;
    }
    if (!known(document, "", {"apiVersion", "kind", "metadata", "spec"})) return nullptr;
    const auto* api_version = string_member(document, "apiVersion");
    if (api_version == nullptr || *api_version != policy_api_version) {
      fail("apiVersion", "must be " + std::string(policy_api_version));
      return nullptr;
    }
    const auto* document_kind = string_member(document, "kind");
    if (document_kind == nullptr || *document_kind != owner_kind_kind) {
      fail("kind", "must be " + std::string(owner_kind_kind));
      return nullptr;
    }
    const auto* metadata = object(document, "metadata", "metadata");
    const auto* name = metadata != nullptr ? text(*metadata, "name", "metadata.name") : nullptr;
    if (name == nullptr) return nullptr;
    if (!is_dns_label(*name)) {
      fail("metadata.name",
           quote(*name) + " is not a valid name; use lower-case letters, digits and '-'");
      return nullptr;
    }
    out.name = *name;
    return object(document, "spec", "spec");
  }

  // roles.nameDefault, a list's: over ${index} and nothing else. False on a bad one (failed).
  bool parse_name_default(const json& roles, role_layout& out) {
    const auto* fallback = text(roles, "nameDefault", "spec.roles.nameDefault", true);
    if (fallback == nullptr) return !failed_;
    if (out.kind != role_layout::shape::list) {
      fail("spec.roles.nameDefault", "not used with map: the keys name the roles");
      return false;
    }
    auto compiled = template_string::compile(*fallback);
    if (!compiled) {
      fail("spec.roles.nameDefault", compiled.message());
      return false;
    }
    if (!compiled->uses(variable::index) ||
        (compiled->used() & ~variable_bit(variable::index)) != 0) {
      fail("spec.roles.nameDefault",
           "must use ${index} and nothing else (e.g. \"default${index}\")");
      return false;
    }
    out.name_default = std::move(*compiled);
    return true;
  }

  std::optional<role_layout> parse_roles(const json& roles) {
    if (!keep(expect_object(roles, "spec.roles"))) return std::nullopt;
    if (!known(roles, "spec.roles",
               {"own", "list", "map", "name", "nameDefault", "replicas", "replicasDefault",
                "jobSpec", "podTemplate", "dependsOn"}))
      return std::nullopt;
    role_layout out;
    const json* fields = &roles;
    const int shapes = roles.contains("own") + roles.contains("list") + roles.contains("map");
    if (shapes != 1) return fail_layout("spec.roles", "needs exactly one of own, list or map");
    if (const auto* own = member(roles, "own")) {
      if (!own->is_object())
        return fail_layout("spec.roles.own", "must be a mapping with jobSpec and podTemplate");
      if (roles.size() != 1) return fail_layout("spec.roles", "with own, the fields go inside own");
      if (!known(*own, "spec.roles.own", {"jobSpec", "podTemplate"})) return std::nullopt;
      out.kind = role_layout::shape::own;
      fields = own;
    } else {
      const bool is_list = roles.contains("list");
      out.kind = is_list ? role_layout::shape::list : role_layout::shape::map;
      const auto* entries =
          text(roles, is_list ? "list" : "map", is_list ? "spec.roles.list" : "spec.roles.map");
      if (entries == nullptr) return std::nullopt;
      out.entries = split(*entries);
      if (is_list) {
        const auto* name = text(roles, "name", "spec.roles.name");
        if (name == nullptr) return std::nullopt;
        out.name_member = *name;
      } else if (roles.contains("name")) {
        return fail_layout("spec.roles.name", "not used with map: the keys name the roles");
      }
      if (!parse_name_default(roles, out)) return std::nullopt;
      if (const auto* replicas = text(roles, "replicas", "spec.roles.replicas", true))
        out.replicas_member = *replicas;
      if (const auto* fallback = member(roles, "replicasDefault")) {
        if (out.replicas_member.empty())
          return fail_layout("spec.roles.replicasDefault",
                             "needs replicas: the member it defaults");
        auto n = read_int(*fallback, "spec.roles.replicasDefault", 0, max_count);
        if (!keep(n)) return std::nullopt;
        out.replicas_default = *n;
      }
      if (const auto* depends_on = text(roles, "dependsOn", "spec.roles.dependsOn", true)) {
        if (!is_list) return fail_layout("spec.roles.dependsOn", "needs list: it is an entry's");
        out.depends_on_member = *depends_on;
      }
    }
    const std::string prefix = fields == &roles ? "spec.roles" : "spec.roles.own";
    if (const auto* job_spec = text(*fields, "jobSpec", prefix + ".jobSpec", true))
      out.job_spec = split(*job_spec);
    if (const auto* pod_template = text(*fields, "podTemplate", prefix + ".podTemplate", true))
      out.pod_template = split(*pod_template);
    if (failed_) return std::nullopt;
    if (out.pod_template.empty())
      return fail_layout(prefix + ".podTemplate",
                         "missing: where the role's pod template sits, e.g. template");
    return out;
  }

  // naming: {hostname, subdomain, subdomainDefault, templateSubdomain, dnsHostnames, requiresAny}
  // (docs/policies.md, "Owner kinds").
  std::optional<pod_naming> parse_naming(const json& naming) {
    if (!keep(expect_object(naming, "spec.naming"))) return std::nullopt;
    if (!known(naming, "spec.naming",
               {"hostname", "subdomain", "subdomainDefault", "templateSubdomain", "dnsHostnames",
                "requiresAny", "notReadyAddresses"}))
      return std::nullopt;
    constexpr variable_mask naming_variables =
        variable_bit(variable::job) | variable_bit(variable::role) |
        variable_bit(variable::job_index) | variable_bit(variable::index);
    const auto compile = [&](const std::string& field, variable_mask allowed,
                             const std::string& example) -> std::optional<template_string> {
      const auto* source = text(naming, field, "spec.naming." + field);
      if (source == nullptr) return std::nullopt;
      auto compiled = template_string::compile(*source);
      if (!compiled) return fail_layout("spec.naming." + field, compiled.message());
      if ((compiled->used() & ~allowed) != 0) {
        fail("spec.naming." + field, "may use only " + example);
        return std::nullopt;
      }
      return std::move(*compiled);
    };
    pod_naming out;
    auto hostname =
        compile("hostname", naming_variables, "${job}, ${role}, ${jobIndex} and ${index}");
    if (!hostname) return std::nullopt;
    if (!hostname->ends_with_variable(variable::index) ||
        (hostname->uses(variable::job_index) && !hostname->uses_once(variable::job_index))) {
      return fail_layout("spec.naming.hostname",
                         "must end with ${index}, and use it and ${jobIndex} once each at most "
                         "(e.g. \"${job}-${role}-${jobIndex}-${index}\")");
    }
    out.hostname = std::move(*hostname);
    if (const auto* subdomain = text(naming, "subdomain", "spec.naming.subdomain", true))
      out.subdomain = split(*subdomain);
    if (naming.contains("subdomainDefault")) {
      auto fallback = compile("subdomainDefault", variable_bit(variable::job), "${job}");
      if (!fallback) return std::nullopt;
      out.subdomain_default = std::move(*fallback);
    }
    if (const auto* rule =
            text(naming, "templateSubdomain", "spec.naming.templateSubdomain", true)) {
      if (*rule == "first") {
        out.template_subdomain = pod_naming::template_rule::first;
      } else if (*rule == "overridden") {
        out.template_subdomain = pod_naming::template_rule::overridden;
      } else {
        return fail_layout("spec.naming.templateSubdomain",
                           quote(*rule) +
                               " is not a rule; write first (the template's own "
                               "subdomain wins) or overridden (the controller's does)");
      }
    }
    if (const auto* path = text(naming, "dnsHostnames", "spec.naming.dnsHostnames", true))
      out.dns_switch = split(*path);
    if (const auto* any = member(naming, "requiresAny")) {
      if (!any->is_array() || any->empty())
        return fail_layout("spec.naming.requiresAny",
                           "must be a non-empty list of member paths, e.g. [spec.plugins.svc]");
      for (std::size_t i = 0; i < any->size(); ++i) {
        const auto* path = text(*any, i, "spec.naming.requiresAny[" + std::to_string(i) + "]");
        if (path == nullptr) return std::nullopt;
        out.requires_any.push_back(split(*path));
      }
    }
    if (const auto* rule = member(naming, "notReadyAddresses")) {
      out.not_ready = parse_not_ready(*rule);
      if (!out.not_ready) return std::nullopt;
    }
    if (failed_) return std::nullopt;
    return out;
  }

  // naming.notReadyAddresses: {at, default} or {plugin, flag, default}.
  std::optional<pod_naming::not_ready_rule> parse_not_ready(const json& rule) {
    const std::string field = "spec.naming.notReadyAddresses";
    if (!keep(expect_object(rule, field))) return std::nullopt;
    if (!known(rule, field, {"at", "plugin", "flag", "default"})) return std::nullopt;
    pod_naming::not_ready_rule out;
    if (const auto* at = text(rule, "at", field + ".at", true)) out.at = split(*at);
    if (const auto* plugin = text(rule, "plugin", field + ".plugin", true))
      out.plugin = split(*plugin);
    if (const auto* flag = text(rule, "flag", field + ".flag", true)) out.flag = *flag;
    if (const auto* by_default = member(rule, "default")) {
      if (!by_default->is_boolean())
        return fail_layout(field + ".default", "must be true or false");
      out.by_default = by_default->get<bool>();
    }
    if (failed_) return std::nullopt;
    if (out.at.empty() == out.plugin.empty() || out.plugin.empty() != out.flag.empty()) {
      return fail_layout(field,
                         "needs either `at` (a boolean in the owner) or `plugin` and `flag` (a job "
                         "plugin's boolean flag), e.g. {at: spec.network.publishNotReadyAddresses, "
                         "default: true}");
    }
    return out;
  }

  // podLabels: {job, uid, role, index, jobIndex, jobs}, each a label key; uid goes with job.
  bool parse_pod_labels(const json& labels, pod_labels& out) {
    if (!keep(expect_object(labels, "spec.podLabels"))) return false;
    if (!known(labels, "spec.podLabels", {"job", "uid", "role", "index", "jobIndex", "jobs"}))
      return false;
    const std::pair<const char*, std::string pod_labels::*> fields[] = {
        {"job", &pod_labels::job},
        {"uid", &pod_labels::uid},
        {"role", &pod_labels::role},
        {"index", &pod_labels::index},
        {"jobIndex", &pod_labels::job_index},
        {"jobs", &pod_labels::jobs}};
    for (const auto& [key, field] : fields) {
      const std::string at = "spec.podLabels." + std::string(key);
      if (const auto* value = text(labels, key, at, true)) {
        if (!is_annotation_key(*value)) {
          fail(at, quote(*value) + " is not a label key ([prefix/]name)");
          return false;
        }
        out.*field = *value;
      }
    }
    if (!out.uid.empty() && out.job.empty()) {
      fail("spec.podLabels.uid", "goes with job: the two name the owner to read");
      return false;
    }
    return !failed_;
  }

  // What a kind says of its controller beside the counts: the coordinator it names, the env it
  // writes, the job plugins whose arguments name its roles. False on the first problem.
  bool parse_controller_facts(const json& spec, owner_kind& out) {
    if (const auto* coordinator = member(spec, "coordinator")) {
      if (!out.roles) {
        fail("spec.coordinator", "needs roles: the coordinator names one of them");
        return false;
      }
      auto parsed = parse_coordinator(*coordinator);
      if (!parsed) return false;
      out.coordinator = std::move(*parsed);
    }
    if (const auto* writes = member(spec, "writes")) {
      auto parsed = parse_writes(*writes);
      if (!parsed) return false;
      out.writes = std::move(*parsed);
    }
    if (const auto* plugins = member(spec, "plugins")) {
      if (!plugins->is_array() || plugins->empty()) {
        fail("spec.plugins", "must be a non-empty list of job plugins");
        return false;
      }
      for (std::size_t i = 0; i < plugins->size(); ++i) {
        auto parsed = parse_plugin((*plugins)[i], "spec.plugins[" + std::to_string(i) + "]");
        if (!parsed) return false;
        out.plugins.push_back(std::move(*parsed));
      }
    }
    return true;
  }

  // writes: {writer, env, container, when, keep, appends} (docs/policies.md, "Owner kinds").
  std::optional<controller_writes> parse_writes(const json& writes) {
    if (!keep(expect_object(writes, "spec.writes"))) return std::nullopt;
    if (!known(writes, "spec.writes", {"writer", "env", "container", "when", "keep", "appends"}))
      return std::nullopt;
    controller_writes out;
    const auto* writer = text(writes, "writer", "spec.writes.writer");
    if (writer == nullptr) return std::nullopt;
    out.writer = *writer;
    const auto names = [&](std::string_view key, bool required) -> std::vector<std::string> {
      const auto* list = member(writes, key);
      const std::string field = "spec.writes." + std::string(key);
      if (list == nullptr) {
        if (required) fail(field, "missing; list the env names the controller writes");
        return {};
      }
      if (!list->is_array()) {
        fail(field, "must be a list of env names");
        return {};
      }
      std::vector<std::string> out_names;
      for (std::size_t i = 0; i < list->size(); ++i) {
        const auto* name = text(*list, i, field + "[" + std::to_string(i) + "]");
        if (name == nullptr) return {};
        out_names.push_back(*name);
      }
      return out_names;
    };
    out.env = names("env", true);
    out.keep = names("keep", false);
    if (const auto* container = text(writes, "container", "spec.writes.container", true))
      out.container = *container;
    if (const auto* when = text(writes, "when", "spec.writes.when", true)) out.when = split(*when);
    out.appends = flag(writes, "appends", "spec.writes.appends");
    if (failed_) return std::nullopt;
    for (const auto& k : out.keep) {
      if (std::find(out.env.begin(), out.env.end(), k) == out.env.end())
        return fail_writes("spec.writes.keep", quote(k) + " is not in spec.writes.env");
    }
    return out;
  }
  std::nullopt_t fail_writes(const std::string& field, const std::string& problem) {
    fail(field, problem);
    return std::nullopt;
  }

  // plugins[i]: {name, at, roles: [{flag, default, plays}], masterPort, sshPort,
  // onlyNamedRolesTrain, policy} (docs/policies.md, "Owner kinds").
  std::optional<job_plugin> parse_plugin(const json& plugin, const std::string& field) {
    if (!keep(expect_object(plugin, field))) return std::nullopt;
    if (!known(plugin, field,
               {"name", "at", "roles", "masterPort", "sshPort", "onlyNamedRolesTrain", "policy"}))
      return std::nullopt;
    job_plugin out;
    const auto* name = text(plugin, "name", field + ".name");
    const auto* at = text(plugin, "at", field + ".at");
    if (name == nullptr || at == nullptr) return std::nullopt;
    out.name = *name;
    out.at = split(*at);
    if (const auto* f = text(plugin, "masterPort", field + ".masterPort", true))
      out.master_port_flag = *f;
    if (const auto* f = text(plugin, "sshPort", field + ".sshPort", true)) out.ssh_port_flag = *f;
    if (const auto* policy = text(plugin, "policy", field + ".policy", true)) out.policy = *policy;
    out.only_named_roles_train =
        flag(plugin, "onlyNamedRolesTrain", field + ".onlyNamedRolesTrain");
    const auto* roles = member(plugin, "roles");
    if (roles != nullptr && (!roles->is_array() || roles->empty())) {
      fail(field + ".roles", "must be a non-empty list of {flag, default, plays}");
      return std::nullopt;
    }
    for (std::size_t i = 0; roles != nullptr && i < roles->size(); ++i) {
      const auto at_role = field + ".roles[" + std::to_string(i) + "]";
      const auto& r = (*roles)[i];
      if (!keep(expect_object(r, at_role)) || !known(r, at_role, {"flag", "default", "plays"}))
        return std::nullopt;
      const auto* flag_name = text(r, "flag", at_role + ".flag");
      const auto* entry = text(r, "default", at_role + ".default");
      const auto* plays = text(r, "plays", at_role + ".plays");
      if (flag_name == nullptr || entry == nullptr || plays == nullptr) return std::nullopt;
      if (!is_dns_label(*plays)) {
        fail(at_role + ".plays", quote(*plays) + " is not a role name");
        return std::nullopt;
      }
      out.roles.push_back({*flag_name, *entry, *plays});
    }
    if (out.only_named_roles_train && out.roles.empty()) {
      fail(field + ".onlyNamedRolesTrain", "needs roles: the entries its flags name");
      return std::nullopt;
    }
    if (failed_) return std::nullopt;
    return out;
  }

  // coordinator: {at, role, jobIndex, podIndex} (docs/policies.md, "Owner kinds").
  std::optional<coordinator_rule> parse_coordinator(const json& coordinator) {
    if (!keep(expect_object(coordinator, "spec.coordinator"))) return std::nullopt;
    if (!known(coordinator, "spec.coordinator", {"at", "role", "jobIndex", "podIndex"}))
      return std::nullopt;
    coordinator_rule out;
    const auto* at = text(coordinator, "at", "spec.coordinator.at");
    if (at == nullptr) return std::nullopt;
    out.at = split(*at);
    if (const auto* role = text(coordinator, "role", "spec.coordinator.role", true))
      out.role_member = *role;
    if (const auto* job = text(coordinator, "jobIndex", "spec.coordinator.jobIndex", true))
      out.job_index_member = *job;
    if (const auto* pod = text(coordinator, "podIndex", "spec.coordinator.podIndex", true))
      out.pod_index_member = *pod;
    if (failed_) return std::nullopt;
    return out;
  }

  static member_path split(const std::string& dotted) {
    member_path out;
    std::size_t start = 0;
    while (start <= dotted.size()) {
      const auto dot = dotted.find('.', start);
      out.push_back(dotted.substr(start, dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return out;
  }

  // Each read keeps the first problem it meets (in policy_fields' words) and returns nothing,
  // so that parse() can test once after several reads.
  bool known(const json& object, const std::string& field,
             std::initializer_list<std::string_view> names) {
    return keep(check_fields(object, field, names));
  }
  const json* object(const json& parent, std::string_view key, const std::string& field) {
    const auto* value = member(parent, key);
    return keep(expect_object(value != nullptr ? *value : json(), field)) ? value : nullptr;
  }
  // A non-empty string item of a list.
  const std::string* text(const json& list, std::size_t i, const std::string& field) {
    return keep(read_text(list[i], field)) ? &list[i].get_ref<const std::string&>() : nullptr;
  }
  // A non-empty string member; absent is an error unless `optional`.
  const std::string* text(const json& parent, std::string_view key, const std::string& field,
                          bool optional = false) {
    const auto* value = member(parent, key);
    if (value == nullptr) {
      if (!optional) fail(field, "missing");
      return nullptr;
    }
    return keep(read_text(*value, field)) ? &value->get_ref<const std::string&>() : nullptr;
  }
  bool flag(const json& parent, std::string_view key, const std::string& field) {
    const auto* value = member(parent, key);
    if (value == nullptr) return false;
    auto read = read_bool(*value, field);
    return keep(read) && *read;
  }
  bool keep(const std::optional<error>& problem) {
    if (!problem) return true;
    if (!failed_) failed_ = error{source_ + ": " + problem->message};
    return false;
  }
  template <class T>
  bool keep(const result<T>& read) {
    return read ? true : keep(error{read.message()});
  }
  error fail(const std::string& field, const std::string& problem) {
    keep(field_error(field, problem));
    return *failed_;
  }
  std::nullopt_t fail_layout(const std::string& field, const std::string& problem) {
    fail(field, problem);
    return std::nullopt;
  }
  error take() { return failed_ ? *failed_ : error{source_ + ": invalid OwnerKind"}; }

  std::string source_;
  std::optional<error> failed_;
};

}  // namespace

result<owner_kind> parse_owner_kind(const json& document, std::string_view source) {
  auto kind = owner_kind_parser(source).parse(document);
  // What the kind says, as a number: an object read as a kind that was reloaded unchanged keeps
  // its reading; one reloaded with other fields never takes a reading made under the old one.
  if (kind) kind->id = std::hash<std::string>{}(document.dump()) | 1U;
  return kind;
}

}  // namespace trainenv::core
