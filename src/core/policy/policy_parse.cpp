// The policy parser (parse_policy in policy.hpp): a TrainingPolicy document, field by field,
// into a policy: the document, its spec and defaults here; the items the spec lists, with the
// rules that cross fields (scopes, variables, duplicates), in policy_parse_items.cpp. The typed
// reads are policy_fields; the Kubernetes objects a policy writes whole, policy_objects.
#include <algorithm>

#include "policy_parse_detail.hpp"

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/policy/policy_objects.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/core/text/quantity.hpp"

namespace trainenv::core {
namespace policy_parse_detail {

using nlohmann::json;

void parser::parse(const json& doc) {
  require_object(doc, "document");
  check_keys(doc, "document", {"apiVersion", "kind", "metadata", "spec"});
  if (!doc.contains("apiVersion") || doc["apiVersion"] != policy_api_version) {
    fail("apiVersion", "must be \"" + std::string(policy_api_version) + "\"");
  }
  if (!doc.contains("kind") || doc["kind"] != policy_kind) {
    fail("kind", "must be \"" + std::string(policy_kind) + "\"");
  }
  if (!doc.contains("metadata")) fail("metadata", "missing; write metadata: {name: <policy name>}");
  const auto& metadata = require_object(doc["metadata"], "metadata");
  check_keys(metadata, "metadata", {"name", "annotations", "labels"});
  if (!metadata.contains("name")) fail("metadata.name", "missing; every policy needs a name");
  p_.name = require_string(metadata["name"], "metadata.name");
  if (!is_dns_label(p_.name)) {
    fail("metadata.name", "\"" + p_.name +
                              "\" is not a valid name; use lower-case letters, digits and '-', at "
                              "most 63 characters");
  }
  if (!doc.contains("spec")) fail("spec", "missing");
  parse_spec(require_object(doc["spec"], "spec"));
}

void parser::parse_spec(const json& spec) {
  check_keys(spec, "spec",
             {"frameworks", "default", "replaces", "when", "container", "extraContainers",
              "trainingRoles", "strictTrainingRoles", "allContainers", "defaults", "env", "ports",
              "args", "volumes", "volumeMounts", "annotations", "dnsSearches", "hostfile", "wait"});
  if (spec.contains("frameworks"))
    p_.frameworks = take(read_names(spec["frameworks"], "spec.frameworks"));
  if (spec.contains("default")) {
    p_.is_default = require_bool(spec["default"], "spec.default");
  }
  if (spec.contains("replaces")) parse_replaces(require_object(spec["replaces"], "spec.replaces"));
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
      fail("spec.trainingRoles", "names no role; list the roles that train, e.g. [master, worker]");
    }
  }
  if (spec.contains("strictTrainingRoles")) {
    p_.strict_training_roles =
        require_bool(spec["strictTrainingRoles"], "spec.strictTrainingRoles");
    if (p_.strict_training_roles && p_.every_role_trains)
      fail("spec.strictTrainingRoles", "needs trainingRoles that name roles, not [\"*\"]");
  }
  if (spec.contains("defaults")) parse_defaults(require_object(spec["defaults"], "spec.defaults"));
  each(spec, "env", [&](const json& item, const std::string& field) { parse_env(item, field); });
  each(spec, "ports", [&](const json& item, const std::string& field) { parse_port(item, field); });
  if (spec.contains("args")) parse_args(require_object(spec["args"], "spec.args"));
  each(spec, "volumes",
       [&](const json& item, const std::string& field) { parse_volume(item, field); });
  each(spec, "volumeMounts",
       [&](const json& item, const std::string& field) { parse_mount(item, field); });
  each(spec, "annotations",
       [&](const json& item, const std::string& field) { parse_annotation(item, field); });
  each(spec, "dnsSearches",
       [&](const json& item, const std::string& field) { parse_dns_search(item, field); });
  if (spec.contains("hostfile")) parse_hostfile(require_object(spec["hostfile"], "spec.hostfile"));
  if (spec.contains("wait")) parse_wait(require_object(spec["wait"], "spec.wait"));
}

// spec.wait: {master, hostfile, timeout, resources: {cpu, memory}, roles: {ROLE: CHECK}}.
void parser::parse_wait(const json& item) {
  const std::string field = "spec.wait";
  check_keys(item, field, {"master", "hostfile", "timeout", "resources", "roles"});
  wait_block wait;
  const auto read_check = [&](const json& value, const std::string& at, bool off_allowed) {
    const auto text = require_string(value, at);
    const auto check = parse_wait_check(text);
    if (!check || (!off_allowed && *check == wait_check::off))
      fail(at, quote(text) + " is not a check; write " + (off_allowed ? "off, " : "") +
                   "dns (the name resolves) or connect (it resolves and its port accepts)");
    return *check;
  };
  if (item.contains("master")) wait.master = read_check(item["master"], field + ".master", false);
  if (item.contains("hostfile")) {
    wait.hostfile = read_check(item["hostfile"], field + ".hostfile", false);
    if (!p_.hostfile) fail(field + ".hostfile", "needs spec.hostfile: the hosts it waits on");
  }
  if (!wait.master && !wait.hostfile)
    fail(field, "names no row; set master (dns|connect) or hostfile (dns|connect)");
  if (item.contains("timeout")) {
    const auto& value = item["timeout"];
    const auto text = value.is_number_integer() ? std::to_string(value.get<std::int64_t>())
                                                : require_string(value, field + ".timeout");
    const auto seconds = parse_duration_seconds(text, max_wait_seconds);
    if (!seconds)
      fail(field + ".timeout", quote(text) +
                                   " is not a bound; write seconds or a duration from 1 s "
                                   "to 24h, e.g. 600 or 10m");
    wait.timeout_seconds = *seconds;
  }
  if (item.contains("resources")) {
    const auto& resources = require_object(item["resources"], field + ".resources");
    check_keys(resources, field + ".resources", {"cpu", "memory"});
    for (auto [key, target] : {std::pair{"cpu", &wait.cpu}, std::pair{"memory", &wait.memory}}) {
      if (!resources.contains(key)) continue;
      const std::string at = field + ".resources." + key;
      *target = require_string(resources[key], at);
      const auto q = parse_quantity(*target);
      if (!q || q->is_zero() || q->negative)
        fail(at, quote(*target) + " is not a positive quantity, e.g. 50m or 64Mi");
    }
  }
  if (item.contains("roles")) {
    const auto& roles = require_object(item["roles"], field + ".roles");
    for (const auto& [role, value] : roles.items()) {
      if (!is_dns_label(role)) fail(field + ".roles", quote(role) + " is not a role name");
      wait.roles.emplace_back(role, read_check(value, field + ".roles." + role, true));
    }
  }
  wait.container = wait_container_parts(wait.cpu, wait.memory);
  p_.wait = std::move(wait);
}

void parser::parse_dns_search(const json& item, const std::string& field) {
  check_keys(item, field, {"value", "roles", "when"});
  if (!item.contains("value"))
    fail(field + ".value", "missing; e.g. \"${subdomain}.${namespace}.svc.${clusterDomain}\"");
  dns_search_item search;
  search.value = require_template(item["value"], field + ".value");
  search.scope = parse_scope(item, field);
  check_variables(search.scope, search.value.used(), field);
  p_.dns_searches.push_back(std::move(search));
}

void parser::parse_hostfile(const json& item) {
  const std::string field = "spec.hostfile";
  check_keys(item, field, {"path", "line", "roles", "when"});
  hostfile_item hostfile;
  if (item.contains("path")) {
    hostfile.path = require_string(item["path"], field + ".path");
    const auto slash = hostfile.path.rfind('/');
    if (hostfile.path.empty() || hostfile.path.front() != '/' || slash == 0 ||
        slash + 1 == hostfile.path.size() || hostfile.path.find("..") != std::string::npos)
      fail(field + ".path", "must be an absolute file path in a directory, e.g. /etc/mpi/hostfile");
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

void parser::parse_replaces(const json& replaces) {
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

std::vector<std::string> parser::require_tokens(const json& value, const std::string& field) {
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

void parser::parse_defaults(const json& defaults) {
  check_keys(
      defaults, "spec.defaults",
      {"masterPort", "numNodes", "nprocPerNode", "replicas", "sshAuthMountPath", "sshSecret"});
  if (defaults.contains("sshSecret")) {
    auto compiled =
        template_string::compile(require_string(defaults["sshSecret"], "spec.defaults.sshSecret"));
    if (!compiled) fail("spec.defaults.sshSecret", compiled.message());
    if ((compiled->used() & ~variable_bit(variable::job)) != 0)
      fail("spec.defaults.sshSecret",
           "may use ${job} and nothing else, e.g. \"${job}-mpi-ssh-auth\"");
    p_.default_ssh_secret = std::move(*compiled);
  }
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
}  // namespace policy_parse_detail

using nlohmann::json;

result<policy> parse_policy(const json& document, std::string_view source) {
  policy out;
  out.source = std::string(source);
  try {
    policy_parse_detail::parser(out).parse(document);
  } catch (const policy_parse_detail::policy_error& e) {
    return error{std::string(source) + ": " + e.message};
  }
  out.variables_used = variables_used_by(out);
  return out;
}

namespace {

// The one list of a list document (a SidecarList's spec.containers, an AcceleratorList's
// spec.accelerators): its apiVersion and fields checked, `example` saying what to write.
result<const json*> list_of(const json& document, std::string_view source, const std::string& name,
                            std::string_view example) {
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
    return fail_at("spec", "missing; write spec: {" + name + ": " + std::string(example) + "}");
  if (auto e = check_fields(*spec, "spec", {name}))
    return error{std::string(source) + ": " + e->message};
  return member(*spec, name);
}

}  // namespace

result<std::vector<std::string>> parse_sidecar_list(const json& document, std::string_view source) {
  const auto fail_at = [&](const std::string& field, const std::string& problem) {
    return error{std::string(source) + ": " + field + ": " + problem};
  };
  auto found = list_of(document, source, "containers", "[istio-proxy, ...]");
  if (!found) return std::move(found).take_error();
  const auto* containers = *found;
  if (containers == nullptr) return fail_at("spec.containers", "missing; list container names");
  auto names = read_names(*containers, "spec.containers");
  if (!names) return error{std::string(source) + ": " + names.message()};
  return std::move(*names);
}

result<std::vector<startup_failure>> parse_startup_failure_list(const json& document,
                                                                std::string_view source) {
  const auto fail_at = [&](const std::string& field, const std::string& problem) {
    return error{std::string(source) + ": " + field + ": " + problem};
  };
  auto found = list_of(document, source, "failures",
                       "[{name: ..., program: ..., match: [...], cause: ..., fix: ...}]");
  if (!found) return std::move(found).take_error();
  const auto* list = *found;
  if (list == nullptr || !list->is_array())
    return fail_at("spec.failures", "must be a list of {name, program, match, cause, fix}");
  // A text to find in a log line: short enough to be a phrase, not a paragraph.
  constexpr std::size_t max_match = 256;
  std::vector<startup_failure> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& entry = (*list)[i];
    const std::string at = "spec.failures[" + std::to_string(i) + "]";
    if (!entry.is_object())
      return fail_at(at, "must be an object {name, program, match, cause, fix}");
    if (auto e = check_fields(entry, at, {"name", "program", "match", "cause", "fix"}))
      return error{std::string(source) + ": " + e->message};
    startup_failure f;
    for (const auto& [key, target] : {std::pair<const char*, std::string*>{"name", &f.name},
                                      {"program", &f.program},
                                      {"cause", &f.cause},
                                      {"fix", &f.fix}}) {
      const auto* text = string_member(entry, key);
      if (text == nullptr || text->empty())
        return fail_at(at + "." + key, "must be a non-empty string");
      *target = *text;
    }
    if (!is_dns_label(f.name))
      return fail_at(at + ".name", "must be lower-case letters, digits and '-' (a DNS label)");
    const auto* match = member(entry, "match");
    if (match == nullptr || !match->is_array() || match->empty())
      return fail_at(at + ".match", "must be a non-empty list of texts one log line holds");
    for (const auto& text : *match) {
      if (!text.is_string() || text.get_ref<const std::string&>().empty() ||
          text.get_ref<const std::string&>().size() > max_match) {
        return fail_at(at + ".match", "each must be a non-empty text of at most " +
                                          std::to_string(max_match) +
                                          " characters (matched as written, not as a pattern)");
      }
      f.match.push_back(text.get<std::string>());
    }
    for (const auto& earlier : out) {
      if (earlier.name == f.name)
        return fail_at(at + ".name", "\"" + f.name + "\" is listed twice");
    }
    out.push_back(std::move(f));
  }
  return out;
}

result<std::vector<accelerator>> parse_accelerator_list(const json& document,
                                                        std::string_view source) {
  const auto fail_at = [&](const std::string& field, const std::string& problem) {
    return error{std::string(source) + ": " + field + ": " + problem};
  };
  auto found =
      list_of(document, source, "accelerators", "[{resource: ..., processesPerDevice: 1}]");
  if (!found) return std::move(found).take_error();
  const auto* list = *found;
  if (list == nullptr || !list->is_array())
    return fail_at("spec.accelerators", "must be a list of {resource, processesPerDevice}");
  // A count of processes per device: 1 to 1024 (no device runs more).
  const auto per_device = [](const json& value) -> std::optional<std::int64_t> {
    if (!value.is_number_integer()) return std::nullopt;
    const auto n = value.get<std::int64_t>();
    return n >= 1 && n <= 1024 ? std::optional(n) : std::nullopt;
  };
  std::vector<accelerator> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& entry = (*list)[i];
    const std::string at = "spec.accelerators[" + std::to_string(i) + "]";
    if (!entry.is_object()) return fail_at(at, "must be an object {resource, processesPerDevice}");
    if (auto e = check_fields(entry, at, {"resource", "processesPerDevice", "byInstanceType"}))
      return error{std::string(source) + ": " + e->message};
    accelerator a;
    const auto* resource = string_member(entry, "resource");
    if (resource == nullptr || resource->empty())
      return fail_at(at + ".resource",
                     "missing; the extended resource's name, e.g. google.com/tpu");
    a.resource = *resource;
    for (const auto& known : out) {
      if (known.resource == a.resource)
        return fail_at(at + ".resource", quote(a.resource) + " is listed twice");
    }
    const auto* count = member(entry, "processesPerDevice");
    const auto n = count != nullptr ? per_device(*count) : std::nullopt;
    if (!n) return fail_at(at + ".processesPerDevice", "must be a whole number from 1 to 1024");
    a.processes_per_device = *n;
    if (const auto* types = member(entry, "byInstanceType")) {
      if (!types->is_object())
        return fail_at(at + ".byInstanceType", "must map instance types to processes per device");
      for (const auto& [type, value] : types->items()) {
        const auto m = per_device(value);
        if (!m)
          return fail_at(at + ".byInstanceType." + type, "must be a whole number from 1 to 1024");
        a.by_instance_type.emplace_back(type, *m);
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace trainenv::core
