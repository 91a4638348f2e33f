#include "trainenv/core/policy.hpp"

#include <algorithm>
#include <initializer_list>

namespace trainenv::core {
namespace {

using nlohmann::json;

// Internal to the parser: unwinds to parse_policy, which turns it into an error value.
struct policy_error {
  std::string message;
};

[[noreturn]] void fail(const std::string& field, const std::string& problem) {
  throw policy_error{field + ": " + problem};
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Rejects keys a policy does not know, suggesting the closest known one.
void check_keys(const json& object, const std::string& field,
                std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string_view closest;
    std::size_t best = 3;  // suggest only near misses
    for (auto candidate : known) {
      const auto d = edit_distance(key, candidate);
      if (d < best) best = d, closest = candidate;
    }
    std::string known_list;
    for (auto k : known) known_list += (known_list.empty() ? "" : ", ") + std::string(k);
    fail(field + "." + key, closest.empty()
                                ? "unknown field; known fields here: " + known_list
                                : "unknown field; did you mean \"" + std::string(closest) + "\"?");
  }
}

const json& require_object(const json& value, const std::string& field) {
  if (!value.is_object()) fail(field, "must be a mapping (key: value)");
  return value;
}

const json& require_array(const json& value, const std::string& field) {
  if (!value.is_array()) fail(field, "must be a list");
  return value;
}

std::string require_string(const json& value, const std::string& field) {
  if (!value.is_string()) {
    fail(field,
         "must be a string; quote it, e.g. \"" + (value.is_primitive() ? value.dump() : "") + "\"");
  }
  return value.get<std::string>();
}

std::int64_t require_int(const json& value, const std::string& field, std::int64_t min,
                         std::int64_t max) {
  if (!value.is_number_integer()) {
    fail(field,
         "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  const auto n = value.get<std::int64_t>();
  if (n < min || n > max) {
    fail(field, std::to_string(n) + " is out of range; write a number from " + std::to_string(min) +
                    " to " + std::to_string(max));
  }
  return n;
}

std::vector<std::string> require_names(const json& value, const std::string& field) {
  std::vector<std::string> out;
  const auto& list = require_array(value, field);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string item_field = field + "[" + std::to_string(i) + "]";
    auto name = require_string(list[i], item_field);
    if (!is_dns_label(name)) {
      fail(item_field, "\"" + name +
                           "\" is not a valid name; use lower-case letters, digits and "
                           "'-', at most 63 characters");
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      fail(item_field, "\"" + name + "\" is listed twice");
    }
    out.push_back(std::move(name));
  }
  return out;
}

template_string require_template(const json& value, const std::string& field) {
  auto compiled = template_string::compile(require_string(value, field));
  if (!compiled) fail(field, compiled.message());
  return std::move(compiled).value();
}

bool is_env_name(std::string_view s) {
  if (s.empty()) return false;
  const auto ok_first = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.';
  };
  if (!ok_first(s[0])) return false;
  return std::all_of(s.begin() + 1, s.end(),
                     [&](char c) { return ok_first(c) || (c >= '0' && c <= '9'); });
}

// Kubernetes' IANA_SVC_NAME: at most 15 characters of [a-z0-9-], at least one letter, no
// leading, trailing or doubled '-'.
bool is_port_name(std::string_view s) {
  if (s.empty() || s.size() > 15 || s.front() == '-' || s.back() == '-') return false;
  if (s.find("--") != std::string_view::npos) return false;
  bool has_letter = false;
  for (char c : s) {
    const bool letter = c >= 'a' && c <= 'z';
    has_letter = has_letter || letter;
    if (!letter && !(c >= '0' && c <= '9') && c != '-') return false;
  }
  return has_letter;
}

// Conservative: only two explicit lists of plain role names can be shown disjoint.
bool scopes_overlap(const role_scope& a, const role_scope& b) {
  if (a.all || b.all || a.training || b.training) return true;
  return std::any_of(a.names.begin(), a.names.end(), [&](const auto& r) {
    return std::find(b.names.begin(), b.names.end(), r) != b.names.end();
  });
}

class parser {
 public:
  explicit parser(policy& out) : p_(out) {}

  void parse(const json& doc) {
    require_object(doc, "document");
    check_keys(doc, "document", {"apiVersion", "kind", "metadata", "spec"});
    if (!doc.contains("apiVersion") || doc["apiVersion"] != policy_api_version) {
      fail("apiVersion", "must be \"" + std::string(policy_api_version) + "\"");
    }
    if (!doc.contains("kind") || doc["kind"] != policy_kind) {
      fail("kind", "must be \"" + std::string(policy_kind) + "\"");
    }
    if (!doc.contains("metadata"))
      fail("metadata", "missing; write metadata: {name: <policy name>}");
    const auto& metadata = require_object(doc["metadata"], "metadata");
    check_keys(metadata, "metadata", {"name", "annotations", "labels"});
    if (!metadata.contains("name")) fail("metadata.name", "missing; every policy needs a name");
    p_.name = require_string(metadata["name"], "metadata.name");
    if (!is_dns_label(p_.name)) {
      fail("metadata.name", "\"" + p_.name +
                                "\" is not a valid name; use lower-case letters, "
                                "digits and '-', at most 63 characters");
    }
    if (!doc.contains("spec")) fail("spec", "missing");
    parse_spec(require_object(doc["spec"], "spec"));
  }

 private:
  void parse_spec(const json& spec) {
    check_keys(spec, "spec",
               {"frameworks", "default", "container", "trainingRoles", "defaults", "env", "ports"});
    if (spec.contains("frameworks"))
      p_.frameworks = require_names(spec["frameworks"], "spec.frameworks");
    if (spec.contains("default")) {
      if (!spec["default"].is_boolean()) fail("spec.default", "must be true or false");
      p_.is_default = spec["default"].get<bool>();
    }
    if (spec.contains("container")) {
      p_.container = require_string(spec["container"], "spec.container");
      if (!is_dns_label(p_.container)) fail("spec.container", "must be a container name");
    }
    if (spec.contains("trainingRoles")) {
      p_.training_roles = require_names(spec["trainingRoles"], "spec.trainingRoles");
      if (p_.training_roles.empty()) {
        fail("spec.trainingRoles",
             "names no role; list the roles that train, e.g. [master, worker]");
      }
    }
    if (spec.contains("defaults"))
      parse_defaults(require_object(spec["defaults"], "spec.defaults"));
    if (spec.contains("env")) {
      const auto& list = require_array(spec["env"], "spec.env");
      for (std::size_t i = 0; i < list.size(); ++i) {
        parse_env(list[i], "spec.env[" + std::to_string(i) + "]");
      }
    }
    if (spec.contains("ports")) {
      const auto& list = require_array(spec["ports"], "spec.ports");
      for (std::size_t i = 0; i < list.size(); ++i) {
        parse_port(list[i], "spec.ports[" + std::to_string(i) + "]");
      }
    }
  }

  void parse_defaults(const json& defaults) {
    check_keys(defaults, "spec.defaults", {"masterPort", "numNodes", "nprocPerNode"});
    if (defaults.contains("masterPort")) {
      p_.default_master_port =
          require_int(defaults["masterPort"], "spec.defaults.masterPort", 1, 65535);
    }
    if (defaults.contains("numNodes")) {
      p_.default_num_nodes =
          require_int(defaults["numNodes"], "spec.defaults.numNodes", 1, 1'000'000);
    }
    if (defaults.contains("nprocPerNode")) {
      const auto& v = defaults["nprocPerNode"];
      const std::string text =
          v.is_number_integer() ? v.dump() : require_string(v, "spec.defaults.nprocPerNode");
      auto parsed = nproc_setting::parse(text);
      if (!parsed) {
        fail("spec.defaults.nprocPerNode", "\"" + text +
                                               "\" is not valid; write a whole number >= 1, "
                                               "auto, cpu or gpu");
      }
      p_.default_nproc = *parsed;
    }
  }

  role_scope parse_roles(const json& item, const std::string& field) {
    role_scope scope;
    if (!item.contains("roles")) return scope;
    scope.all = false;
    const auto& list = require_array(item["roles"], field + ".roles");
    if (list.empty()) {
      fail(field + ".roles",
           "names no role; remove it to apply to every role, or list roles "
           "such as [training] or [launcher]");
    }
    for (auto& name : require_names(list, field + ".roles")) {
      if (name == "training") {
        scope.training = true;
      } else {
        scope.names.push_back(std::move(name));
      }
    }
    return scope;
  }

  // WORLD_SIZE and RANK exist only for training roles (the Volcano fix): an item that uses
  // them must be scoped so.
  void check_training_only(const role_scope& scope, bool uses_rank_or_world,
                           const std::string& field) {
    if (!uses_rank_or_world) return;
    const bool only_training =
        !scope.all && std::all_of(scope.names.begin(), scope.names.end(),
                                  [&](const auto& r) { return p_.is_training_role(r); });
    if (!only_training) {
      fail(field,
           "uses ${worldSize} or ${rank}, which exist only for training roles; add "
           "roles: [training]");
    }
  }

  void parse_env(const json& item, const std::string& field) {
    require_object(item, field);
    check_keys(item, field, {"name", "value", "valueFrom", "roles"});
    env_item env;
    if (!item.contains("name")) fail(field + ".name", "missing");
    env.name = require_string(item["name"], field + ".name");
    if (!is_env_name(env.name)) {
      fail(field + ".name", "\"" + env.name + "\" is not a valid environment variable name");
    }
    env.roles = parse_roles(item, field);
    for (const auto& other : p_.env) {
      if (other.name == env.name && scopes_overlap(other.roles, env.roles)) {
        fail(field + ".name", "\"" + env.name +
                                  "\" is already set for some of the same roles; "
                                  "give each entry disjoint roles: [...]");
      }
    }
    if (item.contains("value") == item.contains("valueFrom")) {
      fail(field, "needs exactly one of value or valueFrom");
    }
    bool uses_rank_or_world = false;
    if (item.contains("value")) {
      env.value = require_template(item["value"], field + ".value");
      uses_rank_or_world = env.value->uses(variable::rank) || env.value->uses(variable::world_size);
    } else {
      env.value_from = parse_value_from(item["valueFrom"], field + ".valueFrom");
      uses_rank_or_world =
          env.value_from->uses(variable::rank) || env.value_from->uses(variable::world_size);
    }
    check_training_only(env.roles, uses_rank_or_world, field);
    p_.env.push_back(std::move(env));
  }

  static template_json parse_value_from(const json& value, const std::string& field) {
    require_object(value, field);
    check_keys(value, field, {"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"});
    if (value.size() != 1) {
      fail(field, "needs exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef");
    }
    // Each source's members and their types, as v1.EnvVarSource has them, so the patched pod
    // always decodes.
    struct member_rule {
      std::string_view name;
      bool required;
      bool boolean;  // else string
    };
    const auto check_source = [&](std::string_view source,
                                  std::initializer_list<member_rule> rules) {
      const std::string at = field + "." + std::string(source);
      const auto& ref = require_object(value[std::string(source)], at);
      for (const auto& [key, member] : ref.items()) {
        const auto rule = std::find_if(rules.begin(), rules.end(),
                                       [&](const member_rule& r) { return r.name == key; });
        if (rule == rules.end()) {
          std::string known;
          for (const auto& r : rules) known += (known.empty() ? "" : ", ") + std::string(r.name);
          fail(at + "." + key, "unknown field; known fields here: " + known);
        }
        if (rule->boolean ? !member.is_boolean() : !member.is_string()) {
          fail(at + "." + key, rule->boolean ? "must be true or false" : "must be a string");
        }
      }
      for (const auto& r : rules) {
        if (r.required && !ref.contains(std::string(r.name)))
          fail(at + "." + std::string(r.name), "missing");
      }
    };
    if (value.contains("fieldRef")) {
      check_source("fieldRef", {{"fieldPath", true, false}, {"apiVersion", false, false}});
    } else if (value.contains("resourceFieldRef")) {
      check_source(
          "resourceFieldRef",
          {{"resource", true, false}, {"containerName", false, false}, {"divisor", false, false}});
    } else {
      const auto source = value.contains("secretKeyRef") ? "secretKeyRef" : "configMapKeyRef";
      check_source(source,
                   {{"name", true, false}, {"key", true, false}, {"optional", false, true}});
    }
    auto compiled = template_json::compile(value);
    if (!compiled) fail(field, compiled.message());
    json normalized = value;
    // The apiserver defaults fieldRef.apiVersion to v1; writing it keeps reinvocation silent.
    if (normalized.contains("fieldRef") && !normalized["fieldRef"].contains("apiVersion")) {
      normalized["fieldRef"]["apiVersion"] = "v1";
      compiled = template_json::compile(normalized);
    }
    return std::move(compiled).value();
  }

  void parse_port(const json& item, const std::string& field) {
    require_object(item, field);
    check_keys(item, field, {"containerPort", "name", "protocol", "roles"});
    port_item port;
    if (!item.contains("containerPort"))
      fail(field + ".containerPort", "missing; e.g. \"${masterPort}\"");
    const auto& cp = item["containerPort"];
    port.container_port =
        cp.is_number_integer()
            ? require_template(
                  json(std::to_string(require_int(cp, field + ".containerPort", 1, 65535))), field)
            : require_template(cp, field + ".containerPort");
    if (port.container_port.is_literal()) {
      if (!parse_decimal(port.container_port.source(), 65535).value_or(0)) {
        fail(field + ".containerPort",
             "must be a port number from 1 to 65535 or a template such as \"${masterPort}\"");
      }
    }
    if (item.contains("name")) {
      port.name = require_string(item["name"], field + ".name");
      if (!is_port_name(port.name)) {
        fail(field + ".name", "\"" + port.name +
                                  "\" is not a valid port name; use at most 15 "
                                  "lower-case letters, digits and '-'");
      }
    }
    if (item.contains("protocol")) {
      port.protocol = require_string(item["protocol"], field + ".protocol");
      if (port.protocol != "TCP" && port.protocol != "UDP" && port.protocol != "SCTP") {
        fail(field + ".protocol", "must be TCP, UDP or SCTP");
      }
    }
    port.roles = parse_roles(item, field);
    check_training_only(
        port.roles,
        port.container_port.uses(variable::rank) || port.container_port.uses(variable::world_size),
        field);
    p_.ports.push_back(std::move(port));
  }

  policy& p_;
};

}  // namespace

bool is_dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  const auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  };
  return std::all_of(s.begin(), s.end(), ok) && s.front() != '-' && s.back() != '-';
}

std::optional<std::int64_t> parse_decimal(std::string_view s, std::int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n > max) return std::nullopt;
  return n;
}

std::optional<nproc_setting> nproc_setting::parse(std::string_view text) {
  if (text == "auto") return nproc_setting{mode::automatic, 0};
  if (text == "cpu") return nproc_setting{mode::cpu, 0};
  if (text == "gpu") return nproc_setting{mode::gpu, 0};
  const auto n = parse_decimal(text, 1'000'000);
  if (!n || *n < 1) return std::nullopt;
  return nproc_setting{mode::count, *n};
}

bool role_scope::matches(std::string_view role, bool is_training_role) const {
  if (all || (training && is_training_role)) return true;
  return std::find(names.begin(), names.end(), role) != names.end();
}

bool policy::is_training_role(std::string_view role) const {
  return std::find(training_roles.begin(), training_roles.end(), role) != training_roles.end();
}

result<policy> parse_policy(const json& document, std::string_view source) {
  policy out;
  out.source = std::string(source);
  try {
    parser(out).parse(document);
  } catch (const policy_error& e) {
    return error{std::string(source) + ": " + e.message};
  }
  return out;
}

result<policy_set> policy_set::build(std::vector<policy> policies) {
  policy_set set;
  set.policies_ = std::move(policies);
  for (std::size_t i = 0; i < set.policies_.size(); ++i) {
    const auto& p = set.policies_[i];
    if (auto [it, inserted] = set.by_name_.emplace(p.name, i); !inserted) {
      return error{p.source + ": metadata.name: policy \"" + p.name + "\" is already defined in " +
                   set.policies_[it->second].source + "; give each policy its own name"};
    }
    for (const auto& framework : p.frameworks) {
      if (auto [it, inserted] = set.by_framework_.emplace(framework, i); !inserted) {
        const auto& owner = set.policies_[it->second];
        return error{p.source + ": spec.frameworks: \"" + framework +
                     "\" is already claimed by policy \"" + owner.name + "\" (" + owner.source +
                     "); a framework value selects one policy"};
      }
    }
    if (p.is_default) {
      if (set.default_) {
        const auto& other = set.policies_[*set.default_];
        return error{p.source + ": spec.default: policy \"" + other.name + "\" (" + other.source +
                     ") is already the default; mark only one policy default: true"};
      }
      set.default_ = i;
    }
  }
  return set;
}

const policy* policy_set::by_name(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &policies_[it->second];
}

const policy* policy_set::by_framework(std::string_view framework) const {
  auto it = by_framework_.find(framework);
  return it == by_framework_.end() ? nullptr : &policies_[it->second];
}

const policy* policy_set::default_policy() const {
  return default_ ? &policies_[*default_] : nullptr;
}

}  // namespace trainenv::core
