#include "trainenv/core/decide/render.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Whether an item applies to this pod: its roles, then its condition.
result<bool> applies(const item_scope& scope, const topology& t, const variable_values& values) {
  if (!t.in_scope(scope.roles)) return false;
  if (!scope.when) return true;
  return scope.when->evaluate(values);
}

result<std::string> render_lines(const annotation_item& item, const variable_values& values) {
  constexpr std::int64_t max_lines = 100'000;
  auto count = item.line_count->evaluate(values);
  if (!count) return std::move(count).take_error();
  if (*count < 0 || *count > max_lines)
    return error{"trainenv: annotation " + item.name + " asks for " + std::to_string(*count) +
                 " lines"};
  variable_values per_line = values;
  std::string text;
  for (std::int64_t i = 0; i < *count; ++i) {
    per_line.set(variable::line, i);
    auto line = item.line->render(per_line);
    if (!line) return std::move(line).take_error();
    text += *line;
    text += '\n';
  }
  return text;
}

const std::string& name_or(const json& entry) {
  return string_or_empty(entry, "name");
}

}  // namespace

std::vector<std::string_view> command_line(const json_ref& container) {
  std::vector<std::string_view> line;
  for (const auto* key : {"command", "args"}) {
    for (const auto token : member(container, key)) line.emplace_back(token.string());
  }
  return line;
}

namespace {

// torchrun's flags that take no value (`tune run` passes its flags to torchrun); any other flag
// written without '=' takes the next word as its value.
bool is_switch(std::string_view flag) {
  constexpr std::array<std::string_view, 8> switches = {
      "--standalone", "--no-python", "--no_python", "-m",
      "--module",     "--run-path",  "--run_path",  "--help"};
  return std::find(switches.begin(), switches.end(), flag) != switches.end();
}

bool is_flag(std::string_view token) {
  return token.size() > 1 && token.front() == '-';
}

}  // namespace

std::optional<args_site> args_site_after(const json_ref& container,
                                         const std::vector<std::string>& prefix) {
  const auto line = command_line(container);
  if (line.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), line.begin()))
    return std::nullopt;
  const auto command = member(container, "command");
  const std::size_t command_size = command.is_array() ? command.size() : 0;
  args_site site;
  site.flags_begin = prefix.size();
  std::size_t i = site.flags_begin;
  while (i < line.size() && is_flag(line[i])) {
    const bool takes_value = line[i].find('=') == std::string_view::npos && !is_switch(line[i]) &&
                             i + 1 < line.size() && !is_flag(line[i + 1]);
    i += takes_value ? 2 : 1;
  }
  site.flags_end = i;
  if (prefix.size() < command_size) {
    site.list = "command";
    site.at = prefix.size();
  } else {
    site.at = prefix.size() - command_size;
  }
  return site;
}

namespace {

// Calls `take(item)` for each item of `items` whose scope applies to this pod; the first error
// (of a condition or of `take`) ends the walk.
template <class Item, class Take>
result<bool> each_applying(const std::vector<Item>& items, const topology& t,
                           const variable_values& values, Take take) {
  for (const auto& item : items) {
    auto ok = applies(item.scope, t, values);
    if (!ok) return std::move(ok).take_error();
    if (!*ok) continue;
    if (auto taken = take(item); !taken) return std::move(taken).take_error();
  }
  return true;
}

result<bool> render_env(const policy& p, const topology& t, const variable_values& values,
                        container_wants& target) {
  // The names rendered so far, beside the entries: comparing names is cheaper than reading
  // each rendered entry's name member again for every item.
  std::vector<const std::string*> names;
  return each_applying(p.env, t, values, [&](const env_item& item) -> result<bool> {
    // Two entries of one name with `when`s that both hold: the first wins.
    if (std::any_of(names.begin(), names.end(),
                    [&](const std::string* name) { return *name == item.name; }))
      return true;
    names.push_back(&item.name);
    env_want env;
    env.name = item.name;
    if (item.value) {
      auto value = item.value->render(values);
      if (!value) return std::move(value).take_error();
      env.value = std::move(*value);
    } else {
      auto value_from = item.value_from->render(values);
      if (!value_from) return std::move(value_from).take_error();
      env.value_from = std::move(*value_from);
    }
    target.env.push_back(std::move(env));
    return true;
  });
}

result<bool> render_ports(const policy& p, const topology& t, const variable_values& values,
                          container_wants& target) {
  return each_applying(p.ports, t, values, [&](const port_item& item) -> result<bool> {
    auto number = item.container_port.evaluate(values);
    if (!number) return std::move(number).take_error();
    if (*number < 1 || *number > 65535) {
      return error{"trainenv: policy \"" + p.name + "\" gives containerPort \"" +
                   std::to_string(*number) +
                   "\"; expected a port number from 1 to 65535 (check annotation " +
                   std::string(keys::master_port) + ")"};
    }
    json port = {{"containerPort", *number}, {"protocol", item.protocol}};
    if (!item.name.empty()) port["name"] = item.name;
    target.ports.push_back(std::move(port));
    return true;
  });
}

// Renders `item.<field>` (a template_json) of each applying item into `out`.
template <class Item, class Field>
result<bool> render_json_items(const std::vector<Item>& items, Field field, const topology& t,
                               const variable_values& values, std::vector<json>& out) {
  return each_applying(items, t, values, [&](const Item& item) -> result<bool> {
    auto rendered = (item.*field).render(values);
    if (!rendered) return std::move(rendered).take_error();
    out.push_back(std::move(*rendered));
    return true;
  });
}

result<bool> render_args(const policy& p, const topology& t, const variable_values& values,
                         const json_ref& container, container_wants& target,
                         std::vector<std::string>& warnings) {
  auto ok = each_applying(p.args, t, values, [&](const arg_item& item) -> result<bool> {
    auto arg = item.value.render(values);
    if (!arg) return std::move(arg).take_error();
    target.args.push_back(std::move(*arg));
    return true;
  });
  if (!ok || target.args.empty() || p.args_after.empty()) return ok;
  target.args_at = args_site_after(container, p.args_after);
  if (!target.args_at) {
    std::string prefix;
    for (const auto& token : p.args_after) prefix += (prefix.empty() ? "" : " ") + token;
    warnings.push_back("trainenv: args not added: the command does not start with \"" + prefix +
                       "\"");
    target.args.clear();
  }
  return true;
}

// Extra containers (a sidecar, an init container) get the env and mounts too; with
// allContainers, every container of the pod does but the known sidecars: a mesh's proxy that
// another webhook inserts later, and then reinvokes trainenv, is left alone.
void add_extra_containers(const policy& p, const topology& t, const pod_view& pod,
                          const std::vector<std::string>& sidecars, const container_wants& target,
                          std::vector<container_wants>& out) {
  if (p.all_containers) {
    std::size_t i = 0;
    for (const auto c : pod.containers()) {
      const auto at = i++;
      if (at == t.container || is_sidecar(c, sidecars)) continue;
      container_wants more;
      more.index = at;
      more.env = target.env;
      more.mounts = target.mounts;
      out.push_back(std::move(more));
    }
  }
  for (const auto& extra : p.extra_containers) {
    std::size_t i = 0;
    for (const auto c : member(pod.spec(), extra.init ? "initContainers" : "containers")) {
      const auto at = i++;
      const auto name = string_member(c, "name");
      if (!name || *name != extra.name || (!extra.init && at == t.container)) continue;
      container_wants more;
      more.list = extra.init ? "initContainers" : "containers";
      more.index = at;
      more.env = target.env;
      more.mounts = target.mounts;
      out.push_back(std::move(more));
    }
  }
}

result<bool> render_annotations(const policy& p, const topology& t, const variable_values& values,
                                json& out) {
  auto ok =
      each_applying(p.annotations, t, values, [&](const annotation_item& item) -> result<bool> {
        auto text = item.value ? item.value->render(values) : render_lines(item, values);
        if (!text) return std::move(text).take_error();
        out[item.name] = std::move(*text);
        return true;
      });
  out[std::string(keys::injected)] = p.name;
  return ok;
}

// The hostfile's volume: the name Kubeflow Trainer gives its ConfigMap's, so that either is seen.
constexpr std::string_view hostfile_volume = "mpi-hostfile";

// The bytes a pod's annotations take as the API server counts them (keys and values).
std::size_t annotation_bytes(const pod_view& pod) {
  std::size_t bytes = 0;
  for (const auto& e : pod.annotations().entries()) bytes += e.key.size() + e.value.size();
  return bytes;
}

std::size_t decimal_digits(std::int64_t n) {
  std::size_t digits = 1;
  for (; n >= 10; n /= 10) ++digits;
  return digits;
}

json downward_api_volume(std::string_view name, std::string_view file, std::string_view key) {
  json item = {
      {"path", file},
      {"fieldRef",
       {{"apiVersion", "v1"}, {"fieldPath", "metadata.annotations['" + std::string(key) + "']"}}},
      {"mode", 0444}};
  return {{"name", name}, {"downwardAPI", {{"items", json::array({std::move(item)})}}}};
}

// Whether the container mounts something where the hostfile goes: Trainer's ConfigMap (or
// trainenv's own, on reinvocation) is the hostfile; another volume there is the user's to answer
// for, and said so in `warnings`.
bool mounts_at(const json_ref& container, const std::string& dir, const std::string& path,
               std::vector<std::string>& warnings) {
  for (const auto m : member(container, "volumeMounts")) {
    const auto at = string_or_empty(m, "mountPath");
    const auto trimmed = at.size() > 1 && at.back() == '/' ? at.substr(0, at.size() - 1) : at;
    if (trimmed != dir && trimmed != path) continue;
    if (string_or_empty(m, "name") != hostfile_volume) {
      warnings.push_back("trainenv: kept user-set mount " + std::string(at) + " of volume " +
                         quote(string_or_empty(m, "name")) + " in container " +
                         quote(string_or_empty(container, "name")) + "; no hostfile added");
    }
    return true;
  }
  return false;
}

// The init container that expands the hostfile's rule into dir/file as the pod starts, in the
// launcher's own image.
json hostfile_expander(std::string_view image, const std::string& dir, const std::string& file,
                       const json_ref& container) {
  json init = {{"name", "trainenv-hostfile"},
               {"image", image},
               {"command",
                {"/bin/sh", "-c", std::string(hostfile_expand_script()), "sh",
                 "/etc/trainenv/hostfile-rule/rule", dir + "/" + file}},
               {"resources",
                {{"requests", {{"cpu", "10m"}, {"memory", "16Mi"}}},
                 {"limits", {{"cpu", "500m"}, {"memory", "64Mi"}}}}},
               {"volumeMounts",
                {{{"name", "mpi-hostfile-rule"},
                  {"mountPath", "/etc/trainenv/hostfile-rule"},
                  {"readOnly", true}},
                 {{"name", hostfile_volume}, {"mountPath", dir}}}}};
  // As the launcher runs: a restricted namespace admits the init container on the same terms.
  if (const auto security = member(container, "securityContext"))
    init["securityContext"] = to_json(security);
  return init;
}

// The bytes of the hostfile written out line by line, counted without writing it, up to just
// past the inline limit: `around` is what each line adds beside the host's name.
std::size_t inline_hostfile_bytes(const std::vector<host_group>& groups, std::size_t around) {
  std::size_t bytes = 0;
  for (const auto& g : groups) {
    const auto fixed = around + g.prefix.size() + g.middle.size() + g.suffix.size() + 1;
    for (std::int64_t i = 0; i < g.pods() && bytes <= hostfile_inline_limit; ++i) {
      const auto per_job = std::max<std::int64_t>(g.pods_per_job, 1);
      bytes += fixed + decimal_digits(i % per_job) + (g.jobs ? decimal_digits(i / per_job) : 0);
    }
  }
  return bytes;
}

// The policy's hostfile, one line per node in node order: as the pod's own annotation mounted
// through the downward API while it is small; past that, as a compact rule (one line per Job of
// nodes) that an init container in the launcher's own image expands into an emptyDir as the pod
// starts. Nothing when the pod already mounts a hostfile there (Kubeflow Trainer's ConfigMap).
result<bool> render_hostfile(const policy& p, const topology& t, const variable_values& values,
                             const pod_view& pod, wants& out, container_wants& target) {
  if (!p.hostfile) return true;
  const auto& h = *p.hostfile;
  auto ok = applies(h.scope, t, values);
  if (!ok || !*ok) return ok;
  const auto slash = h.path.rfind('/');
  const std::string dir = h.path.substr(0, slash);
  const std::string file = h.path.substr(slash + 1);
  const auto container = pod.containers()[t.container];
  if (mounts_at(container, dir, h.path, out.warnings)) return true;
  auto groups = t.layout.host_groups();
  if (!groups) return std::move(groups).take_error();
  // The line around ${host}: rendered once, with a marker where the host goes.
  constexpr std::string_view marker = "\x1f";
  variable_values per_line = values;
  per_line.set(variable::host, std::string(marker));
  auto line = h.line.render(per_line);
  if (!line) return std::move(line).take_error();
  const auto at = line->find(marker);
  const std::string head = line->substr(0, at);
  const std::string tail = line->substr(at + marker.size());

  const auto inline_bytes = inline_hostfile_bytes(*groups, head.size() + tail.size());
  std::string key;
  std::string text;
  // Inline while it is small and fits beside the pod's other annotations; else the rule, which
  // is as short as the job has node roles.
  const auto others = annotation_bytes(pod);
  if (inline_bytes <= hostfile_inline_limit &&
      others + hostfile_annotation.size() + inline_bytes <= annotations_limit) {
    key = hostfile_annotation;
    text.reserve(inline_bytes);
    for (const auto& g : *groups) {
      for (std::int64_t i = 0; i < g.pods(); ++i)
        text.append(head).append(g.name(i)).append(tail).push_back('\n');
    }
    out.volumes.push_back(downward_api_volume(hostfile_volume, file, key));
  } else {
    // One line per node role: "jobs|pods per Job|head|middle|tail", jobs "-" when the names
    // carry no Job number.
    key = hostfile_rule_annotation;
    for (const auto& g : *groups) {
      text.append(g.jobs ? std::to_string(*g.jobs) : "-").append("|");
      text.append(std::to_string(g.pods_per_job)).append("|").append(head).append(g.prefix);
      text.append("|").append(g.middle).append("|").append(g.suffix).append(tail).push_back('\n');
    }
    if (text.size() > hostfile_inline_limit) {
      return error{"trainenv: the hostfile of " + std::to_string(t.num_nodes) + " nodes in " +
                   std::to_string(groups->size()) + " roles does not fit the pod's annotations " +
                   "even as a rule (" + std::to_string(text.size()) +
                   " bytes); mount a ConfigMap " + "with the hostfile at " + dir +
                   " (as Kubeflow Trainer's " + t.job +
                   "-mpi-hostfile), and trainenv leaves it alone"};
    }
    const auto image = string_member(container, "image");
    if (!image || image->empty()) {
      return error{"trainenv: the hostfile of " + std::to_string(t.num_nodes) +
                   " nodes is expanded by an init container in the target container's image, " +
                   "and that container names no image"};
    }
    out.volumes.push_back(downward_api_volume("mpi-hostfile-rule", "rule", key));
    out.volumes.push_back({{"name", hostfile_volume}, {"emptyDir", json::object()}});
    out.init_containers.push_back(
        init_container_want::of(hostfile_expander(*image, dir, file, container)));
  }
  if (others + key.size() + text.size() > annotations_limit) {
    return error{"trainenv: the pod's annotations would exceed the API server's " +
                 std::to_string(annotations_limit / 1024) + " KiB with the hostfile's " +
                 std::to_string(text.size()) + " bytes; mount a ConfigMap with the hostfile at " +
                 dir + " and trainenv leaves it alone"};
  }
  out.annotations[key] = std::move(text);
  target.mounts.push_back({{"name", hostfile_volume}, {"mountPath", dir}, {"readOnly", true}});
  return true;
}

}  // namespace

std::string_view hostfile_expand_script() {
  // POSIX sh only (dash, busybox): the launcher's image is all there is. Job-major, as the
  // nodes are ordered.
  return R"(set -eu
out="$2"
: > "$out.tmp"
while IFS='|' read -r jobs pods head middle tail; do
  j=0
  while :; do
    number=$j
    [ "$jobs" = - ] && number=
    i=0
    while [ "$i" -lt "$pods" ]; do
      printf '%s%s%s%s%s\n' "$head" "$number" "$middle" "$i" "$tail"
      i=$((i + 1))
    done
    j=$((j + 1))
    if [ "$jobs" = - ] || [ "$j" -ge "$jobs" ]; then break; fi
  done
done < "$1" >> "$out.tmp"
mv "$out.tmp" "$out"
)";
}

std::string expand_hostfile_rule(std::string_view rule) {
  constexpr std::size_t max_bytes = std::size_t{64} << 20;
  std::string out;
  std::int64_t lines = 0;
  std::size_t start = 0;
  // As `read` does, a last line without its newline is not read.
  for (auto end = rule.find('\n'); end != std::string_view::npos;
       start = end + 1, end = rule.find('\n', start)) {
    // IFS='|' read -r jobs pods head middle tail: the tail takes the rest, bars and all ...
    std::array<std::string_view, 5> fields;
    auto rest = rule.substr(start, end - start);
    for (std::size_t f = 0; f + 1 < fields.size(); ++f) {
      const auto bar = rest.find('|');
      fields[f] = rest.substr(0, bar);
      rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
    }
    // ... less one bar that ends it when it holds no other (POSIX field splitting: a last
    // delimiter ends a field, it does not start one; dash and bash agree).
    if (!rest.empty() && rest.find('|') == rest.size() - 1) rest.remove_suffix(1);
    fields[4] = rest;
    const bool numbered = fields[0] != "-";
    // The script's loop runs once before it compares j with jobs.
    constexpr auto any = std::numeric_limits<std::int64_t>::max();
    const auto jobs =
        numbered ? std::max<std::int64_t>(parse_decimal(fields[0], any).value_or(1), 1) : 1;
    const auto pods = parse_decimal(fields[1], any).value_or(0);
    for (std::int64_t j = 0; j < jobs; ++j) {
      const auto number = numbered ? std::to_string(j) : std::string();
      for (std::int64_t i = 0; i < pods; ++i) {
        if (++lines > max_count || out.size() > max_bytes) return out;
        out.append(fields[2]).append(number).append(fields[3]).append(std::to_string(i));
        out.append(fields[4]).push_back('\n');
      }
    }
  }
  return out;
}

init_container_want init_container_want::of(const json& container) {
  init_container_want out{string_or_empty(container, "name"), {}, {}};
  core::append_json(out.text, container);
  if (const auto* mounts = member(container, "volumeMounts")) {
    for (const auto& m : *mounts) out.volumes.push_back(string_or_empty(m, "name"));
  }
  return out;
}

void env_want::append_json(std::string& out) const {
  // Members in key order, as a json object writes them: name, then value or valueFrom.
  out += R"({"name":)";
  append_json_string(out, name, json::error_handler_t::strict);
  if (value_from) {
    out += R"(,"valueFrom":)";
    core::append_json(out, *value_from);
  } else {
    out += R"(,"value":)";
    append_json_string(out, value, json::error_handler_t::strict);
  }
  out += '}';
}

result<wants> render(const policy& p, const topology& t, const pod_view& pod,
                     const std::vector<std::string>& sidecars, const written_env* written) {
  const auto values = t.variables();
  wants out;
  if (p.when) {
    auto ok = p.when->evaluate(values);
    if (!ok) return std::move(ok).take_error();
    if (!*ok) {
      out.applies = false;
      return out;
    }
  }
  container_wants target;
  target.index = t.container;
  for (auto step :
       {render_env(p, t, values, target), render_ports(p, t, values, target),
        render_json_items(p.volume_mounts, &mount_item::mount, t, values, target.mounts),
        render_args(p, t, values, pod.containers()[t.container], target, out.warnings)}) {
    if (!step) return std::move(step).take_error();
  }
  for (const auto& mount : target.mounts) {
    const auto& path = string_or_empty(mount, "mountPath");
    if (path.empty() || path.front() != '/') {
      return error{"trainenv: policy " + quote(p.name) + " mounts " + quote(name_or(mount)) +
                   " at " + quote(path) + "; expected an absolute path (check the runtime's " +
                   "sshAuthMountPath)"};
    }
  }
  add_extra_containers(p, t, pod, sidecars, target, out.containers);
  out.containers.insert(out.containers.begin(), std::move(target));
  if (auto ok = render_json_items(p.volumes, &volume_item::volume, t, values, out.volumes); !ok)
    return std::move(ok).take_error();
  if (auto ok = render_annotations(p, t, values, out.annotations); !ok)
    return std::move(ok).take_error();
  if (auto ok = each_applying(p.dns_searches, t, values,
                              [&](const dns_search_item& item) -> result<bool> {
                                auto domain = item.value.render(values);
                                if (!domain) return std::move(domain).take_error();
                                out.dns_searches.push_back(std::move(*domain));
                                return true;
                              });
      !ok)
    return std::move(ok).take_error();
  if (auto ok = render_hostfile(p, t, values, pod, out, out.containers.front()); !ok)
    return std::move(ok).take_error();
  if (written != nullptr && written->writes != nullptr) {
    out.writer = written->writes;
    for (const auto& item : p.env) out.owned_env.push_back(item.name);
    out.decided_by = t.layout.source;
    out.removed_because = t.elastic          ? "elastic, ranked by its rendezvous"
                          : !t.training_role ? "role " + quote(t.role) + " does not train"
                                             : "not for this pod";
    for (auto& c : out.containers) {
      if (c.list == "containers") c.written = written->in(c.index);
    }
  }
  return out;
}

}  // namespace trainenv::core
