// The policy parser (parse_policy in policy.hpp): a TrainingPolicy document, field by field,
// into a policy, with the rules that cross fields (scopes, variables, duplicates). The typed
// reads are policy_fields; the Kubernetes objects a policy writes whole, policy_objects.
#include <algorithm>

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/policy/policy_objects.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Internal to the parser: unwinds to parse_policy, which turns it into an error value. The
// first problem ends the parse, and a throw keeps each rule to one line.
struct policy_error {
  std::string message;
};

[[noreturn]] void fail(const std::string& field, const std::string& problem) {
  throw policy_error{field_error(field, problem).message};
}

void check(std::optional<error> problem) {
  if (problem) throw policy_error{std::move(problem->message)};
}

template <class T>
T take(result<T> r) {
  if (!r) throw policy_error{std::move(r).take_error().message};
  return std::move(r).value();
}

void check_keys(const json& object, const std::string& field,
                std::initializer_list<std::string_view> known) {
  check(check_fields(object, field, known));
}

const json& require_object(const json& value, const std::string& field) {
  check(expect_object(value, field));
  return value;
}

const json& require_array(const json& value, const std::string& field) {
  check(expect_array(value, field));
  return value;
}

std::string require_string(const json& value, const std::string& field) {
  return take(read_string(value, field));
}

bool require_bool(const json& value, const std::string& field) {
  return take(read_bool(value, field));
}

template_string require_template(const json& value, const std::string& field) {
  auto compiled = template_string::compile(require_string(value, field));
  if (!compiled) fail(field, compiled.message());
  return std::move(compiled).value();
}

template_json require_template_json(const json& value, const std::string& field) {
  auto compiled = template_json::compile(value);
  if (!compiled) fail(field, compiled.message());
  return std::move(compiled).value();
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
                "trainingRoles", "strictTrainingRoles", "allContainers", "defaults", "env", "ports",
                "args", "volumes", "volumeMounts", "annotations", "dnsSearches", "hostfile"});
    if (spec.contains("frameworks"))
      p_.frameworks = take(read_names(spec["frameworks"], "spec.frameworks"));
    if (spec.contains("default")) {
      p_.is_default = require_bool(spec["default"], "spec.default");
    }
    if (spec.contains("replaces"))
      parse_replaces(require_object(spec["replaces"], "spec.replaces"));
    if (spec.contains("when")) {
      p_.when_source = require_string(spec["when"], "spec.when");
      auto compiled = condition::compile(p_.when_source);
      if (!compiled) fail("spec.when", compiled.message());
      constexpr auto per_pod = variable_bit(variable::rank) | variable_bit(variable::world_size) |
                               variable_bit(variable::node_rank) | variable_bit(variable::host) |
                               variable_bit(variable::line);
      if ((compiled->used() & per_pod) != 0)
        fail("spec.when", "may not use ${rank}, ${nodeRank}, ${worldSize}, ${host} or ${i}");
      p_.when = std::move(*compiled);
    }
    if (spec.contains("container")) {
      p_.container = require_string(spec["container"], "spec.container");
      if (!is_dns_label(p_.container)) fail("spec.container", "must be a container name");
    }
    if (spec.contains("allContainers"))
      p_.all_containers = require_bool(spec["allContainers"], "spec.allContainers");
    each(spec, "extraContainers", [&](const json& item, const std::string& field) {
      check_keys(item, field, {"name", "init"});
      extra_container extra;
      if (!item.contains("name")) fail(field + ".name", "missing");
      extra.name = require_string(item["name"], field + ".name");
      if (!is_dns_label(extra.name)) fail(field + ".name", "must be a container name");
      if (item.contains("init")) {
        extra.init = require_bool(item["init"], field + ".init");
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
    if (spec.contains("trainingRoles") && spec["trainingRoles"] == json::array({"*"})) {
      p_.training_roles.clear();
      p_.every_role_trains = true;
    } else if (spec.contains("trainingRoles")) {
      p_.training_roles = take(read_names(spec["trainingRoles"], "spec.trainingRoles"));
      if (p_.training_roles.empty()) {
        fail("spec.trainingRoles",
             "names no role; list the roles that train, e.g. [master, worker]");
      }
    }
    if (spec.contains("strictTrainingRoles")) {
      p_.strict_training_roles =
          require_bool(spec["strictTrainingRoles"], "spec.strictTrainingRoles");
      if (p_.strict_training_roles && p_.every_role_trains)
        fail("spec.strictTrainingRoles", "needs trainingRoles that name roles, not [\"*\"]");
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
    each(spec, "dnsSearches",
         [&](const json& item, const std::string& field) { parse_dns_search(item, field); });
    if (spec.contains("hostfile"))
      parse_hostfile(require_object(spec["hostfile"], "spec.hostfile"));
  }

  void parse_dns_search(const json& item, const std::string& field) {
    check_keys(item, field, {"value", "roles", "when"});
    if (!item.contains("value"))
      fail(field + ".value", "missing; e.g. \"${subdomain}.${namespace}.svc.${clusterDomain}\"");
    dns_search_item search;
    search.value = require_template(item["value"], field + ".value");
    search.scope = parse_scope(item, field);
    check_variables(search.scope, search.value.used(), field);
    p_.dns_searches.push_back(std::move(search));
  }

  void parse_hostfile(const json& item) {
    const std::string field = "spec.hostfile";
    check_keys(item, field, {"path", "line", "roles", "when"});
    hostfile_item hostfile;
    if (item.contains("path")) {
      hostfile.path = require_string(item["path"], field + ".path");
      const auto slash = hostfile.path.rfind('/');
      if (hostfile.path.empty() || hostfile.path.front() != '/' || slash == 0 ||
          slash + 1 == hostfile.path.size() || hostfile.path.find("..") != std::string::npos)
        fail(field + ".path",
             "must be an absolute file path in a directory, e.g. /etc/mpi/hostfile");
    }
    if (!item.contains("line")) fail(field + ".line", "missing; e.g. \"${host} slots=${slots}\"");
    hostfile.line = require_template(item["line"], field + ".line");
    if (!hostfile.line.uses_once(variable::host)) {
      fail(field + ".line", "must use ${host} once, alone, e.g. \"${host} slots=${slots}\"");
    }
    if (hostfile.line.source().find_first_of("|\n") != std::string::npos)
      fail(field + ".line", "may not hold '|' or a line break");
    hostfile.scope = parse_scope(item, field);
    if (!item.contains("roles")) {
      hostfile.scope.roles.all = false;
      hostfile.scope.roles.names = {std::string(launcher_role)};
    }
    check_variables(hostfile.scope, hostfile.line.used(), field, false, true);
    p_.hostfile = std::move(hostfile);
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
    check_keys(defaults, "spec.defaults",
               {"masterPort", "numNodes", "nprocPerNode", "replicas", "sshAuthMountPath"});
    if (defaults.contains("sshAuthMountPath")) {
      p_.default_ssh_auth_mount_path =
          require_string(defaults["sshAuthMountPath"], "spec.defaults.sshAuthMountPath");
      if (p_.default_ssh_auth_mount_path.empty() || p_.default_ssh_auth_mount_path.front() != '/')
        fail("spec.defaults.sshAuthMountPath", "must be an absolute path, e.g. /root/.ssh");
    }
    if (defaults.contains("masterPort")) {
      p_.default_master_port =
          take(read_int(defaults["masterPort"], "spec.defaults.masterPort", 1, max_port));
    }
    if (defaults.contains("numNodes")) {
      p_.default_num_nodes =
          take(read_int(defaults["numNodes"], "spec.defaults.numNodes", 1, 1'000'000));
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
      return require_template(json(std::to_string(take(read_int(value, field, 0, 1'000'000)))),
                              field);
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
      for (auto& name : take(read_names(list, field + ".roles"))) {
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
  // roles (the Volcano fix), a node rank only for the roles an item names, ${i} only inside an
  // annotation's lines and ${host} only in a hostfile's line.
  void check_variables(const item_scope& scope, std::uint32_t used, const std::string& field,
                       bool in_lines = false, bool in_hostfile = false) {
    if (scope.when) used |= scope.when->used();
    if ((used & variable_bit(variable::node_rank)) != 0 && (used & elastic_variables) != 0) {
      fail(field,
           "uses ${nodeRank} beside an elastic job's ${minNodes} or ${maxNodes}: an elastic job's "
           "ranks come from its rendezvous; write two items, with when: \"elastic == 0\" and "
           "\"elastic == 1\"");
    }
    if ((used & variable_bit(variable::node_rank)) != 0 && scope.roles.all) {
      fail(field,
           "uses ${nodeRank}, which exists only for the job's nodes; add roles: [training] (or "
           "the roles that are nodes)");
    }
    if (!in_hostfile && (used & variable_bit(variable::host)) != 0) {
      fail(field, "uses ${host}, which exists only inside spec.hostfile.line");
    }
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
      env.value_from = require_template_json(
          take(env_var_source(item["valueFrom"], field + ".valueFrom")), field + ".valueFrom");
      used = env.value_from->used();
    }
    check_variables(env.scope, used, field);
    p_.env.push_back(std::move(env));
  }

  void parse_port(const json& item, const std::string& field) {
    check_keys(item, field, {"containerPort", "name", "protocol", "roles", "when"});
    port_item port;
    if (!item.contains("containerPort"))
      fail(field + ".containerPort", "missing; e.g. \"${masterPort}\"");
    port.container_port =
        require_count_template(item["containerPort"], field + ".containerPort", ~0U);
    if (port.container_port.is_literal() &&
        !parse_decimal(port.container_port.source(), max_port).value_or(0)) {
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
      if (!is_port_protocol(port.protocol)) fail(field + ".protocol", "must be TCP, UDP or SCTP");
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
    json body = take(volume_body(item, field, volume.name));
    for (const auto& other : p_.volumes) {
      if (other.name == volume.name)
        fail(field + ".name", "\"" + volume.name + "\" is defined twice");
    }
    volume.scope = parse_scope(item, field);
    volume.volume = require_template_json(body, field);
    check_variables(volume.scope, volume.volume.used(), field);
    p_.volumes.push_back(std::move(volume));
  }

  void parse_mount(const json& item, const std::string& field) {
    check_keys(item, field, {"name", "mountPath", "readOnly", "subPath", "roles", "when"});
    mount_item mount;
    const json body = take(volume_mount_body(item, field));
    mount.mount_path = body["mountPath"];
    mount.scope = parse_scope(item, field);
    mount.mount = require_template_json(body, field);
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

result<policy> parse_policy(const json& document, std::string_view source) {
  policy out;
  out.source = std::string(source);
  try {
    parser(out).parse(document);
  } catch (const policy_error& e) {
    return error{std::string(source) + ": " + e.message};
  }
  out.variables_used = variables_used_by(out);
  return out;
}

result<std::vector<std::string>> parse_sidecar_list(const json& document, std::string_view source) {
  const auto fail_at = [&](const std::string& field, const std::string& problem) {
    return error{std::string(source) + ": " + field + ": " + problem};
  };
  if (auto e = check_fields(document, "document", {"apiVersion", "kind", "metadata", "spec"}))
    return error{std::string(source) + ": " + e->message};
  const auto* api_version = string_member(document, "apiVersion");
  if (api_version == nullptr || *api_version != policy_api_version)
    return fail_at("apiVersion", "must be \"" + std::string(policy_api_version) + "\"");
  const auto* spec = member(document, "spec");
  if (spec == nullptr || !spec->is_object())
    return fail_at("spec", "missing; write spec: {containers: [istio-proxy, ...]}");
  if (auto e = check_fields(*spec, "spec", {"containers"}))
    return error{std::string(source) + ": " + e->message};
  const auto* containers = member(*spec, "containers");
  if (containers == nullptr) return fail_at("spec.containers", "missing; list container names");
  auto names = read_names(*containers, "spec.containers");
  if (!names) return error{std::string(source) + ": " + names.message()};
  return std::move(*names);
}

}  // namespace trainenv::core
