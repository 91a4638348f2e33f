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

// Conservative: two items are disjoint only with a `when` each, or two explicit lists of plain
// role names that share none.
bool scopes_overlap(const item_scope& a, const item_scope& b) {
  if (a.when && b.when) return false;
  const auto& x = a.roles;
  const auto& y = b.roles;
  if (x.all || y.all || x.training || y.training) return true;
  return std::any_of(x.names.begin(), x.names.end(), [&](const auto& r) {
    return std::find(y.names.begin(), y.names.end(), r) != y.names.end();
  });
}

enum class kind { string, boolean, list, object, file_mode };

struct member_rule {
  std::string_view name;
  bool required;
  kind type;
};

// Checks an object's members against Kubernetes' types: known names, right types, required ones
// present. File modes are integers 0-0777 (YAML's 0400 is octal).
void check_members(const json& value, const std::string& field,
                   std::initializer_list<member_rule> rules) {
  require_object(value, field);
  for (const auto& item : value.items()) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const auto& key = item.key();
    const auto& member = item.value();
    const auto* const rule = std::find_if(rules.begin(), rules.end(),
                                          [&](const member_rule& r) { return r.name == key; });
    if (rule == rules.end()) {
      std::string known;
      for (const auto& r : rules) known += (known.empty() ? "" : ", ") + std::string(r.name);
      fail(field + "." + key, "unknown field; known fields here: " + known);
    }
    switch (rule->type) {
      case kind::string:
        if (!member.is_string()) fail(field + "." + key, "must be a string");
        break;
      case kind::boolean:
        if (!member.is_boolean()) fail(field + "." + key, "must be true or false");
        break;
      case kind::list:
        if (!member.is_array()) fail(field + "." + key, "must be a list");
        break;
      case kind::object:
        if (!member.is_object()) fail(field + "." + key, "must be a mapping");
        break;
      case kind::file_mode:
        if (!member.is_number_integer() || member.get<std::int64_t>() < 0 ||
            member.get<std::int64_t>() > 0777) {
          fail(field + "." + key,
               "must be a file mode from 0 to 0777 (write it in octal, e.g. 0644)");
        }
        break;
    }
  }
  for (const auto& r : rules) {
    if (r.required && !value.contains(std::string(r.name)))
      fail(field + "." + std::string(r.name), "missing");
  }
}

// Kubernetes' qualified name: an optional DNS-subdomain prefix and '/', then a name of at most
// 63 of [A-Za-z0-9._-] that starts and ends with a letter or digit.
bool is_annotation_key(std::string_view key) {
  const auto slash = key.find('/');
  const auto name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos) {
    auto prefix = key.substr(0, slash);
    if (prefix.empty() || prefix.size() > 253) return false;
    while (!prefix.empty()) {
      const auto dot = prefix.find('.');
      if (!is_dns_label(prefix.substr(0, dot))) return false;
      if (dot == std::string_view::npos) break;
      prefix.remove_prefix(dot + 1);
      if (prefix.empty()) return false;
    }
  }
  const auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (name.empty() || name.size() > 63 || !alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
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
      fail("metadata.name",
           "\"" + p_.name +
               "\" is not a valid name; use lower-case letters, digits and '-', at "
               "most 63 characters");
    }
    if (!doc.contains("spec")) fail("spec", "missing");
    parse_spec(require_object(doc["spec"], "spec"));
  }

 private:
  // Runs `parse_item(item, field)` over the list at spec.<key>, if present.
  template <class F>
  void each(const json& spec, const char* key, F parse_item) {
    if (!spec.contains(key)) return;
    const std::string field = std::string("spec.") + key;
    const auto& list = require_array(spec[key], field);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string item_field = field + "[" + std::to_string(i) + "]";
      require_object(list[i], item_field);
      parse_item(list[i], item_field);
    }
  }

  void parse_spec(const json& spec) {
    check_keys(spec, "spec",
               {"frameworks", "default", "replaces", "when", "container", "extraContainers",
                "trainingRoles", "defaults", "env", "ports", "args", "volumes", "volumeMounts",
                "annotations"});
    if (spec.contains("frameworks"))
      p_.frameworks = require_names(spec["frameworks"], "spec.frameworks");
    if (spec.contains("default")) {
      if (!spec["default"].is_boolean()) fail("spec.default", "must be true or false");
      p_.is_default = spec["default"].get<bool>();
    }
    if (spec.contains("replaces"))
      parse_replaces(require_object(spec["replaces"], "spec.replaces"));
    if (spec.contains("when")) {
      p_.when_source = require_string(spec["when"], "spec.when");
      auto compiled = condition::compile(p_.when_source);
      if (!compiled) fail("spec.when", compiled.message());
      constexpr auto per_pod = variable_bit(variable::rank) | variable_bit(variable::world_size) |
                               variable_bit(variable::line);
      if ((compiled->used() & per_pod) != 0)
        fail("spec.when", "may not use ${rank}, ${worldSize} or ${i}");
      p_.when = std::move(*compiled);
    }
    if (spec.contains("container")) {
      p_.container = require_string(spec["container"], "spec.container");
      if (!is_dns_label(p_.container)) fail("spec.container", "must be a container name");
    }
    each(spec, "extraContainers", [&](const json& item, const std::string& field) {
      check_keys(item, field, {"name", "init"});
      extra_container extra;
      if (!item.contains("name")) fail(field + ".name", "missing");
      extra.name = require_string(item["name"], field + ".name");
      if (!is_dns_label(extra.name)) fail(field + ".name", "must be a container name");
      if (item.contains("init")) {
        if (!item["init"].is_boolean()) fail(field + ".init", "must be true or false");
        extra.init = item["init"].get<bool>();
      }
      for (const auto& other : p_.extra_containers) {
        if (other.name == extra.name && other.init == extra.init)
          fail(field + ".name", "\"" + extra.name + "\" is listed twice");
      }
      p_.extra_containers.push_back(std::move(extra));
    });
    for (const auto& extra : p_.extra_containers) {
      if (!extra.init && extra.name == p_.container) {
        fail("spec.extraContainers", "\"" + extra.name + "\" is the target container already");
      }
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
    each(spec, "env", [&](const json& item, const std::string& field) { parse_env(item, field); });
    each(spec, "ports",
         [&](const json& item, const std::string& field) { parse_port(item, field); });
    if (spec.contains("args")) parse_args(require_object(spec["args"], "spec.args"));
    each(spec, "volumes",
         [&](const json& item, const std::string& field) { parse_volume(item, field); });
    each(spec, "volumeMounts",
         [&](const json& item, const std::string& field) { parse_mount(item, field); });
    each(spec, "annotations",
         [&](const json& item, const std::string& field) { parse_annotation(item, field); });
  }

  void parse_replaces(const json& replaces) {
    check_keys(replaces, "spec.replaces", {"policy", "commandPrefix"});
    if (!replaces.contains("policy"))
      fail("spec.replaces.policy", "missing; name the policy this one takes over");
    if (!replaces.contains("commandPrefix")) {
      fail("spec.replaces.commandPrefix", "missing; e.g. [tune, run]");
    }
    replacement r;
    r.policy = require_string(replaces["policy"], "spec.replaces.policy");
    r.command_prefix = require_tokens(replaces["commandPrefix"], "spec.replaces.commandPrefix");
    p_.replaces = std::move(r);
  }

  static std::vector<std::string> require_tokens(const json& value, const std::string& field) {
    std::vector<std::string> out;
    const auto& list = require_array(value, field);
    if (list.empty()) fail(field, "is empty; list the command's first words, e.g. [tune, run]");
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto token = require_string(list[i], field + "[" + std::to_string(i) + "]");
      if (token.empty())
        fail(field + "[" + std::to_string(i) + "]", "is empty; list the command's words");
      out.push_back(std::move(token));
    }
    return out;
  }

  void parse_defaults(const json& defaults) {
    check_keys(defaults, "spec.defaults", {"masterPort", "numNodes", "nprocPerNode", "replicas"});
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
        fail("spec.defaults.nprocPerNode",
             "\"" + text + "\" is not valid; write a whole number >= 1, auto, cpu or gpu");
      }
      p_.default_nproc = *parsed;
    }
    if (defaults.contains("replicas")) {
      const auto& replicas = require_object(defaults["replicas"], "spec.defaults.replicas");
      for (const auto& [role, count] : replicas.items()) {
        const std::string field = "spec.defaults.replicas." + role;
        if (!is_dns_label(role)) fail(field, "\"" + role + "\" is not a role name");
        // ${numNodes} only: a default may not depend on the replicas it defines.
        auto text = require_count_template(count, field, variable_bit(variable::num_nodes));
        p_.default_replicas.emplace_back(role, std::move(text));
      }
    }
  }

  // A whole number, or a template over `allowed` variables that renders to one.
  static template_string require_count_template(const json& value, const std::string& field,
                                                std::uint32_t allowed) {
    if (value.is_number_integer()) {
      return require_template(json(std::to_string(require_int(value, field, 0, 1'000'000))), field);
    }
    auto text = require_template(value, field);
    if (!text.is_integer()) {
      fail(field,
           "must be a whole number, or one ${...} that computes one, e.g. \"${numNodes - 1}\"");
    }
    if ((text.used() & ~allowed) != 0) {
      std::string names;
      for (std::size_t i = 0; i < variable_count; ++i) {
        if ((allowed & (1U << i)) != 0)
          names +=
              (names.empty() ? "" : ", ") + std::string(variable_name(static_cast<variable>(i)));
      }
      fail(field, "may use only " + names + " (e.g. \"${numNodes - 1}\")");
    }
    return text;
  }

  static item_scope parse_scope(const json& item, const std::string& field) {
    item_scope scope;
    if (item.contains("roles")) {
      scope.roles.all = false;
      const auto& list = require_array(item["roles"], field + ".roles");
      if (list.empty()) {
        fail(field + ".roles",
             "names no role; remove it to apply to every role, or list roles such as [training] or "
             "[launcher]");
      }
      for (auto& name : require_names(list, field + ".roles")) {
        if (name == "training") {
          scope.roles.training = true;
        } else {
          scope.roles.names.push_back(std::move(name));
        }
      }
    }
    if (item.contains("when")) {
      auto compiled = condition::compile(require_string(item["when"], field + ".when"));
      if (!compiled) fail(field + ".when", compiled.message());
      scope.when = std::move(*compiled);
    }
    return scope;
  }

  // What an item's templates and condition may use: WORLD_SIZE and RANK exist only for training
  // roles (the Volcano fix), and ${i} only inside an annotation's lines.
  void check_variables(const item_scope& scope, std::uint32_t used, const std::string& field,
                       bool in_lines = false) {
    if (scope.when) used |= scope.when->used();
    if ((used & (variable_bit(variable::rank) | variable_bit(variable::world_size))) != 0) {
      const bool only_training =
          !scope.roles.all && std::all_of(scope.roles.names.begin(), scope.roles.names.end(),
                                          [&](const auto& r) { return p_.is_training_role(r); });
      if (!only_training) {
        fail(field,
             "uses ${worldSize} or ${rank}, which exist only for training roles; add roles: "
             "[training]");
      }
    }
    if (!in_lines && (used & variable_bit(variable::line)) != 0) {
      fail(field, "uses ${i}, which exists only inside an annotation's lines.text");
    }
  }

  void parse_env(const json& item, const std::string& field) {
    check_keys(item, field, {"name", "value", "valueFrom", "roles", "when"});
    env_item env;
    if (!item.contains("name")) fail(field + ".name", "missing");
    env.name = require_string(item["name"], field + ".name");
    if (!is_env_name(env.name))
      fail(field + ".name", "\"" + env.name + "\" is not a valid environment variable name");
    env.scope = parse_scope(item, field);
    for (const auto& other : p_.env) {
      if (other.name == env.name && scopes_overlap(other.scope, env.scope)) {
        fail(field + ".name",
             "\"" + env.name +
                 "\" is already set for some of the same pods; give each entry disjoint roles or "
                 "a when condition");
      }
    }
    if (item.contains("value") == item.contains("valueFrom"))
      fail(field, "needs exactly one of value or valueFrom");
    std::uint32_t used = 0;
    if (item.contains("value")) {
      env.value = require_template(item["value"], field + ".value");
      used = env.value->used();
    } else {
      env.value_from = parse_value_from(item["valueFrom"], field + ".valueFrom");
      used = env.value_from->used();
    }
    check_variables(env.scope, used, field);
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
    if (value.contains("fieldRef")) {
      check_members(value["fieldRef"], field + ".fieldRef",
                    {{"fieldPath", true, kind::string}, {"apiVersion", false, kind::string}});
    } else if (value.contains("resourceFieldRef")) {
      check_members(value["resourceFieldRef"], field + ".resourceFieldRef",
                    {{"resource", true, kind::string},
                     {"containerName", false, kind::string},
                     {"divisor", false, kind::string}});
    } else {
      const char* source = value.contains("secretKeyRef") ? "secretKeyRef" : "configMapKeyRef";
      check_members(value[source], field + "." + source,
                    {{"name", true, kind::string},
                     {"key", true, kind::string},
                     {"optional", false, kind::boolean}});
    }
    json normalized = value;
    // The apiserver defaults fieldRef.apiVersion to v1; writing it keeps reinvocation silent.
    if (normalized.contains("fieldRef") && !normalized["fieldRef"].contains("apiVersion")) {
      normalized["fieldRef"]["apiVersion"] = "v1";
    }
    auto compiled = template_json::compile(normalized);
    if (!compiled) fail(field, compiled.message());
    return std::move(compiled).value();
  }

  void parse_port(const json& item, const std::string& field) {
    check_keys(item, field, {"containerPort", "name", "protocol", "roles", "when"});
    port_item port;
    if (!item.contains("containerPort"))
      fail(field + ".containerPort", "missing; e.g. \"${masterPort}\"");
    port.container_port =
        require_count_template(item["containerPort"], field + ".containerPort", ~0U);
    if (port.container_port.is_literal() &&
        !parse_decimal(port.container_port.source(), 65535).value_or(0)) {
      fail(field + ".containerPort",
           "must be a port number from 1 to 65535 or a template such as \"${masterPort}\"");
    }
    if (item.contains("name")) {
      port.name = require_string(item["name"], field + ".name");
      if (!is_port_name(port.name)) {
        fail(field + ".name",
             "\"" + port.name +
                 "\" is not a valid port name; use at most 15 lower-case letters, digits and '-', "
                 "with at least one letter");
      }
    }
    if (item.contains("protocol")) {
      port.protocol = require_string(item["protocol"], field + ".protocol");
      if (port.protocol != "TCP" && port.protocol != "UDP" && port.protocol != "SCTP") {
        fail(field + ".protocol", "must be TCP, UDP or SCTP");
      }
    }
    port.scope = parse_scope(item, field);
    check_variables(port.scope, port.container_port.used(), field);
    p_.ports.push_back(std::move(port));
  }

  void parse_args(const json& args) {
    check_keys(args, "spec.args", {"after", "items"});
    if (args.contains("after")) p_.args_after = require_tokens(args["after"], "spec.args.after");
    if (!args.contains("items"))
      fail("spec.args.items", "missing; list the args, e.g. - value: \"--nnodes=${numNodes}\"");
    const auto& list = require_array(args["items"], "spec.args.items");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string field = "spec.args.items[" + std::to_string(i) + "]";
      require_object(list[i], field);
      check_keys(list[i], field, {"value", "roles", "when"});
      arg_item arg;
      if (!list[i].contains("value")) fail(field + ".value", "missing");
      arg.value = require_template(list[i]["value"], field + ".value");
      arg.scope = parse_scope(list[i], field);
      check_variables(arg.scope, arg.value.used(), field);
      p_.args.push_back(std::move(arg));
    }
  }

  void parse_volume(const json& item, const std::string& field) {
    check_keys(item, field,
               {"name", "secret", "configMap", "downwardAPI", "emptyDir", "roles", "when"});
    volume_item volume;
    if (!item.contains("name")) fail(field + ".name", "missing");
    volume.name = require_string(item["name"], field + ".name");
    if (!is_dns_label(volume.name))
      fail(field + ".name", "\"" + volume.name + "\" is not a valid volume name");
    json body = {{"name", volume.name}};
    int sources = 0;
    const member_rule mode = {"defaultMode", false, kind::file_mode};
    if (item.contains("secret")) {
      ++sources;
      const auto at = field + ".secret";
      check_members(item["secret"], at,
                    {{"secretName", true, kind::string},
                     mode,
                     {"items", false, kind::list},
                     {"optional", false, kind::boolean}});
      check_key_items(item["secret"], at);
      body["secret"] = item["secret"];
    }
    if (item.contains("configMap")) {
      ++sources;
      const auto at = field + ".configMap";
      check_members(item["configMap"], at,
                    {{"name", true, kind::string},
                     mode,
                     {"items", false, kind::list},
                     {"optional", false, kind::boolean}});
      check_key_items(item["configMap"], at);
      body["configMap"] = item["configMap"];
    }
    if (item.contains("downwardAPI")) {
      ++sources;
      const auto at = field + ".downwardAPI";
      check_members(item["downwardAPI"], at, {{"items", true, kind::list}, mode});
      const auto& items = item["downwardAPI"]["items"];
      for (std::size_t i = 0; i < items.size(); ++i) {
        const auto item_field = at + ".items[" + std::to_string(i) + "]";
        check_members(items[i], item_field,
                      {{"path", true, kind::string},
                       {"fieldRef", true, kind::object},
                       {"mode", false, kind::file_mode}});
        check_members(items[i]["fieldRef"], item_field + ".fieldRef",
                      {{"fieldPath", true, kind::string}, {"apiVersion", false, kind::string}});
      }
      body["downwardAPI"] = item["downwardAPI"];
      // Written out as the apiserver would default it, so reinvocation sees no change.
      for (auto& i : body["downwardAPI"]["items"]) {
        if (!i["fieldRef"].contains("apiVersion")) i["fieldRef"]["apiVersion"] = "v1";
      }
    }
    if (item.contains("emptyDir")) {
      ++sources;
      check_members(item["emptyDir"], field + ".emptyDir",
                    {{"medium", false, kind::string}, {"sizeLimit", false, kind::string}});
      body["emptyDir"] = item["emptyDir"];
    }
    if (sources != 1) fail(field, "needs exactly one of secret, configMap, downwardAPI, emptyDir");
    for (const auto& other : p_.volumes) {
      if (other.name == volume.name)
        fail(field + ".name", "\"" + volume.name + "\" is defined twice");
    }
    volume.scope = parse_scope(item, field);
    auto compiled = template_json::compile(body);
    if (!compiled) fail(field, compiled.message());
    volume.volume = std::move(*compiled);
    check_variables(volume.scope, volume.volume.used(), field);
    p_.volumes.push_back(std::move(volume));
  }

  static void check_key_items(const json& source, const std::string& field) {
    if (!source.contains("items")) return;
    const auto& items = source["items"];
    for (std::size_t i = 0; i < items.size(); ++i) {
      check_members(items[i], field + ".items[" + std::to_string(i) + "]",
                    {{"key", true, kind::string},
                     {"path", true, kind::string},
                     {"mode", false, kind::file_mode}});
    }
  }

  void parse_mount(const json& item, const std::string& field) {
    check_keys(item, field, {"name", "mountPath", "readOnly", "subPath", "roles", "when"});
    mount_item mount;
    json body = json::object();
    for (const char* key : {"name", "mountPath"}) {
      if (!item.contains(key)) fail(field + "." + key, "missing");
      body[key] = require_string(item[key], field + "." + key);
    }
    if (!is_dns_label(body["name"].get<std::string>()))
      fail(field + ".name", "must be a volume name");
    mount.mount_path = body["mountPath"];
    if (mount.mount_path.empty() || mount.mount_path[0] != '/')
      fail(field + ".mountPath", "must be an absolute path");
    if (item.contains("readOnly")) {
      if (!item["readOnly"].is_boolean()) fail(field + ".readOnly", "must be true or false");
      body["readOnly"] = item["readOnly"];
    }
    if (item.contains("subPath"))
      body["subPath"] = require_string(item["subPath"], field + ".subPath");
    mount.scope = parse_scope(item, field);
    auto compiled = template_json::compile(body);
    if (!compiled) fail(field, compiled.message());
    mount.mount = std::move(*compiled);
    check_variables(mount.scope, mount.mount.used(), field);
    p_.volume_mounts.push_back(std::move(mount));
  }

  void parse_annotation(const json& item, const std::string& field) {
    check_keys(item, field, {"name", "value", "lines", "roles", "when"});
    annotation_item annotation;
    if (!item.contains("name")) fail(field + ".name", "missing");
    annotation.name = require_string(item["name"], field + ".name");
    if (!is_annotation_key(annotation.name)) {
      fail(field + ".name",
           "\"" + annotation.name + "\" is not a valid annotation key (e.g. trainenv.io/hostfile)");
    }
    if (item.contains("value") == item.contains("lines"))
      fail(field, "needs exactly one of value or lines");
    annotation.scope = parse_scope(item, field);
    if (item.contains("value")) {
      annotation.value = require_template(item["value"], field + ".value");
      check_variables(annotation.scope, annotation.value->used(), field);
    } else {
      const auto& lines = require_object(item["lines"], field + ".lines");
      check_keys(lines, field + ".lines", {"count", "text"});
      if (!lines.contains("count")) fail(field + ".lines.count", "missing; e.g. \"${numNodes}\"");
      if (!lines.contains("text"))
        fail(field + ".lines.text", "missing; e.g. \"${job}-node-0-${i}.${job}\"");
      annotation.line_count = require_count_template(lines["count"], field + ".lines.count",
                                                     ~variable_bit(variable::line));
      annotation.line = require_template(lines["text"], field + ".lines.text");
      check_variables(annotation.scope, annotation.line_count->used(), field);
      check_variables(annotation.scope, annotation.line->used(), field, true);
    }
    p_.annotations.push_back(std::move(annotation));
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

result<policy_set> policy_set::build(std::vector<policy> policies, owner_kind_set owner_kinds) {
  policy_set set;
  set.policies_ = std::move(policies);
  set.owner_kinds_ = std::move(owner_kinds);
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
  for (const auto& p : set.policies_) {
    if (!p.replaces) continue;
    const auto* target = set.by_name(p.replaces->policy);
    if (target == nullptr) {
      return error{p.source + ": spec.replaces.policy: no policy is named \"" + p.replaces->policy +
                   "\"; name a loaded policy"};
    }
    if (target == &p)
      return error{p.source + ": spec.replaces.policy: a policy cannot replace itself"};
    set.replacements_[p.replaces->policy].push_back(&p);
  }
  return set;
}

const std::vector<const policy*>& policy_set::replacements_of(std::string_view name) const {
  static const std::vector<const policy*> none;
  auto it = replacements_.find(name);
  return it == replacements_.end() ? none : it->second;
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
