// The items a TrainingPolicy's spec lists (env, ports, args, volumes, mounts, annotations), each
// with its scope, and the rules on what variables an item in that scope may use.
#include "policy_parse_detail.hpp"

#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core::policy_parse_detail {

using nlohmann::json;

// A whole number, or a template over `allowed` variables that renders to one.
template_string parser::require_count_template(const json& value, const std::string& field,
                                               variable_mask allowed) {
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
      if ((allowed & (variable_mask{1} << i)) != 0)
        names += (names.empty() ? "" : ", ") + std::string(variable_name(static_cast<variable>(i)));
    }
    fail(field, "may use only " + names + " (e.g. \"${numNodes - 1}\")");
  }
  return text;
}

item_scope parser::parse_scope(const json& item, const std::string& field) {
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
void parser::check_variables(const item_scope& scope, variable_mask used, const std::string& field,
                             bool in_lines, bool in_hostfile) {
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

void parser::parse_env(const json& item, const std::string& field) {
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
  variable_mask used = 0;
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

void parser::parse_port(const json& item, const std::string& field) {
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

void parser::parse_args(const json& args) {
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

void parser::parse_volume(const json& item, const std::string& field) {
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

void parser::parse_mount(const json& item, const std::string& field) {
  check_keys(item, field, {"name", "mountPath", "readOnly", "subPath", "roles", "when"});
  mount_item mount;
  const json body = take(volume_mount_body(item, field));
  mount.mount_path = body["mountPath"];
  mount.scope = parse_scope(item, field);
  mount.mount = require_template_json(body, field);
  check_variables(mount.scope, mount.mount.used(), field);
  p_.volume_mounts.push_back(std::move(mount));
}

void parser::parse_annotation(const json& item, const std::string& field) {
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
}  // namespace trainenv::core::policy_parse_detail
