#include "trainenv/core/decide/diff.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_patch.hpp"
#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/json_text.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::size_t max_warning_length = 120;

// Sidecars get the same env and mounts as the target container: the summary names them once.
void note_once(std::vector<std::string>& names, std::string name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
}

// The member `key` (null included), for contains over the pod's JSON and over a copy of it.
const json* find_member(const json& object, const std::string& key) {
  const auto it = object.find(key);
  return it != object.end() ? &*it : nullptr;
}
json_ref find_member(const json_ref& object, const std::string& key) {
  return object.find(key);
}
bool equal(const json& value, const json& wanted) {
  return value == wanted;
}
bool equal(const json_ref& value, const json& wanted) {
  return same_value(value, wanted);
}

// True when every member `wanted` sets is present in `existing` with the same value: the
// apiserver's defaulting may add members (fieldRef.apiVersion, protocol) on reinvocation.
template <class Existing>
bool contains(const Existing& existing, const json& wanted) {
  if (wanted.is_object()) {
    if (!existing.is_object()) return false;
    const auto items = wanted.items();
    return std::all_of(items.begin(), items.end(), [&](const auto& item) {
      const auto found = find_member(existing, item.key());
      return found && contains(*found, item.value());
    });
  }
  if (wanted.is_array()) {
    if (!existing.is_array() || existing.size() != wanted.size()) return false;
    std::size_t i = 0;
    for (const auto& item : existing) {
      if (!contains(item, wanted[i++])) return false;
    }
    return true;
  }
  return equal(existing, wanted);
}

// A rendered entry's name (env, mount, volume): every one has one.
const std::string& name_of(const json& entry) {
  return string_or_empty(entry, "name");
}

std::string describe_env(const json_ref& env) {
  if (const auto value = string_member(env, "value"))
    return "=" + std::string(value->substr(0, 40));
  return " (valueFrom)";
}

json_ref find_by(const json_ref& list, std::string_view key, std::string_view value) {
  for (const auto item : list) {
    if (const auto v = string_member(item, key); v && *v == value) return item;
  }
  return {};
}

json_ref find_port(const json_ref& list, const json& wanted) {
  const auto* wanted_name = string_member(wanted, "name");
  for (const auto item : list) {
    const auto protocol = string_member(item, "protocol");
    const bool same_port = same_value(item.find("containerPort"), wanted["containerPort"]) &&
                           wanted["protocol"] == std::string(protocol.value_or("TCP"));
    const auto name = string_member(item, "name");
    if (same_port || (wanted_name != nullptr && name && *name == *wanted_name)) return item;
  }
  return {};
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

// Whether `existing` says what `wanted` says once the members the apiserver fills in when
// absent (`defaults`: a port's protocol, a fieldRef's apiVersion) are filled in: a pod that says
// the same thing in fewer words agrees, and so does one the apiserver already defaulted.
bool agrees(const json_ref& existing, const json& wanted, const json* defaults = nullptr) {
  // Filling in members never undoes agreement: only a disagreeing entry is copied and filled.
  if (contains(existing, wanted)) return true;
  if (defaults == nullptr) return false;
  json defaulted = to_json(existing);
  fill_defaults(defaulted, *defaults);
  return contains(defaulted, wanted);
}

void write_item(std::string& out, const json& item) {
  append_json(out, item);
}

void write_item(std::string& out, const init_container_want& item) {
  out += item.text;
}

// Adds each wanted entry of the list `key` that the pod lacks (by `find`); an entry the pod
// already has is kept, with the warning `disagreement(existing, wanted)` gives (none when they
// agree). `record` notes each added entry in the decision's summary.
template <class Item, class Find, class Disagreement, class Record>
void merge_list(const json_ref& parent, const std::string& path, std::string_view key,
                const std::vector<Item>& wanted, Find find, Disagreement disagreement,
                Record record, patch_builder& patch, std::vector<std::string>& warnings) {
  std::vector<const Item*> added;
  const auto existing_list = member(parent, key);
  for (const auto& item : wanted) {
    if (const auto existing = existing_list ? find(existing_list, item) : json_ref()) {
      if (auto warning = disagreement(existing, item)) warnings.push_back(make_warning(*warning));
      continue;
    }
    record(item);
    added.push_back(&item);
  }
  patch.append(existing_list != nullptr, path, key, added,
               [](std::string& out, const Item& item) { write_item(out, item); });
}

// "--nproc_per_node=4" and "--nproc-per-node 4" name the same flag: compare what precedes '=',
// with '_' read as '-'.
std::string arg_key(std::string_view arg) {
  std::string key(arg.substr(0, arg.find('=')));
  if (key.rfind("--", 0) == 0) std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void merge_args(const json_ref& container, const std::string& path, const container_wants& want,
                const std::string& where, patch_builder& patch, decision& d) {
  // The flags already given: the launcher's own (between the prefix and the program) at a site;
  // every arg without one.
  const auto line = command_line(container);
  const auto args = member(container, "args");
  std::size_t begin = line.size() - (args.is_array() ? args.size() : 0);
  std::size_t end = line.size();
  if (want.args_at) {
    begin = want.args_at->flags_begin;
    end = want.args_at->flags_end;
  }
  std::vector<json> added;
  for (const auto& arg : want.args) {
    const auto key = arg_key(arg);
    std::optional<std::string_view> given;
    for (std::size_t i = begin; i < end; ++i) {
      if (arg_key(line[i]) == key) given = line[i];
    }
    if (!given) {
      added.emplace_back(arg);
      d.injected.args.push_back(arg);
    } else if (*given != arg) {
      d.warnings.push_back(
          make_warning("trainenv: kept user-set arg " + std::string(given->substr(0, 40)) + where));
    }
  }
  if (added.empty()) return;
  if (!want.args_at || !member(container, want.args_at->list)) {
    std::vector<const json*> items;
    items.reserve(added.size());
    for (const auto& arg : added) items.push_back(&arg);
    patch.append(member(container, "args") != nullptr, path, "args", items);
    return;
  }
  // Inserted in order right after the command prefix, ahead of the launcher's own flags.
  std::size_t at = want.args_at->at;
  for (const auto& arg : added)
    patch.add(path + "/" + want.args_at->list + "/" + std::to_string(at++), arg);
}

// A wanted mount is already there when the container mounts something at its path, or mounts its
// volume anywhere: Kubeflow Trainer mounts its hostfile ConfigMap at /etc/mpi and the SSH keys
// at the runtime's sshAuthMountPath (/home/mpiuser/.ssh), and a second mount of the same volume
// would only shadow or duplicate them. Only another volume at the wanted path is worth a warning.
json_ref find_mount(const json_ref& list, const json& wanted) {
  if (const auto at_path = find_by(list, "mountPath", string_or_empty(wanted, "mountPath")))
    return at_path;
  return find_by(list, "name", name_of(wanted));
}

// Whether an env entry the pod has says what `w` says.
bool env_agrees(const pod_view& pod, const json_ref& e, const env_want& w) {
  // What the pod's entry must say: w's name, and its value or valueFrom (the apiserver fills in a
  // fieldRef's apiVersion).
  static const json field_ref_defaults = {{"fieldRef", {{"apiVersion", "v1"}}}};
  if (string_member(e, "name") == w.name &&
      (w.value_from ? agrees(e.find("valueFrom"), *w.value_from, &field_ref_defaults)
                    : string_member(e, "value") == w.value))
    return true;
  // Kubeflow Trainer writes PET_NODE_RANK as a fieldRef to the completion index: the same number
  // as trainenv's literal node rank in its layout.
  const auto resolved = field_ref_value(pod, e);
  return !w.value_from && resolved && w.value == *resolved;
}

const written_entry* written_at(const container_wants& want, std::size_t index) {
  for (const auto& e : want.written) {
    if (e.index == index) return &e;
  }
  return nullptr;
}

// The env: what the pod lacks is appended; a user's entry is kept (with a warning when it
// differs); an entry its controller wrote is replaced when it disagrees, and removed when the
// policy wants none of that name for this pod or it duplicates the template's (docs/contract.md
// §4). Replacements by index first, removals from the last index down, then the appends, so
// that every index an operation names is the one read.
void merge_env(const pod_view& pod, const json_ref& container, const std::string& path,
               const container_wants& want, const wants& all, const std::string& where,
               patch_builder& patch, decision& d) {
  const auto list = member(container, "env");
  const auto by = [&]() { return " (" + all.writer->writer + "'s; " + all.decided_by + ")"; };
  std::vector<const env_want*> added;
  std::vector<std::size_t> removed;
  for (const auto& w : want.env) {
    json_ref user;
    std::optional<std::size_t> controllers;
    std::size_t i = 0;
    for (const auto entry : list) {
      const auto at = i++;
      if (string_or_empty(entry, "name") != w.name) continue;
      const auto* written = written_at(want, at);
      if (written == nullptr) {
        user = user ? user : entry;
      } else if (!written->duplicate && !controllers) {
        controllers = at;
      }
    }
    if (user) {
      if (!env_agrees(pod, user, w)) {
        d.kept_env.push_back(w.name);
        d.warnings.push_back(
            make_warning("trainenv: kept user-set " + w.name + describe_env(user) + where));
      }
      continue;
    }
    if (controllers) {
      const auto e = list[*controllers];
      if (env_agrees(pod, e, w)) continue;
      std::string text;
      w.append_json(text);
      patch.replace(path + "/env/" + std::to_string(*controllers), text);
      note_once(d.injected.env, w.name);
      d.replaced_env.push_back(w.name);
      d.warnings.push_back(make_warning("trainenv: replaced " + w.name + describe_env(e) +
                                        " with " + w.value.substr(0, 40) + where + by()));
      continue;
    }
    note_once(d.injected.env, w.name);
    added.push_back(&w);
  }
  for (const auto& e : want.written) {
    const bool wanted = std::any_of(want.env.begin(), want.env.end(),
                                    [&](const env_want& w) { return w.name == e.name; });
    const bool owned =
        std::find(all.owned_env.begin(), all.owned_env.end(), e.name) != all.owned_env.end();
    const bool kept = std::find(all.writer->keep.begin(), all.writer->keep.end(), e.name) !=
                      all.writer->keep.end();
    if (!e.duplicate && (wanted || !owned || kept)) continue;
    removed.push_back(e.index);
    d.injected.removed_env.push_back(e.name);
    d.warnings.push_back(make_warning(
        "trainenv: removed " + e.name + describe_env(list[e.index]) + " (" + all.writer->writer +
        "'s)" + where + ": " + (e.duplicate ? "the template sets it" : all.removed_because)));
  }
  std::sort(removed.rbegin(), removed.rend());
  for (const auto i : removed) patch.remove(path + "/env/" + std::to_string(i));
  patch.append(list != nullptr, path, "env", added,
               [](std::string& out, const env_want& item) { item.append_json(out); });
}

void diff_container(const pod_view& pod, const json_ref& container, const container_wants& want,
                    const wants& all, patch_builder& patch, decision& d,
                    std::set<std::string>& mounted_volumes) {
  auto& warnings = d.warnings;
  const std::string path = "/spec/" + want.list + "/" + std::to_string(want.index);
  const auto name = string_member(container, "name");
  const std::string where =
      " in container " + quote(name ? std::string(*name) : std::to_string(want.index));
  using warning = std::optional<std::string>;

  merge_env(pod, container, path, want, all, where, patch, d);
  merge_list(
      container, path, "ports", want.ports, find_port,
      [&](const json_ref& e, const json& w) -> warning {
        static const json port_defaults = {{"protocol", "TCP"}};
        if (agrees(e, w, &port_defaults)) return {};
        return "trainenv: kept user-set port " + to_json(e.find("containerPort")).dump() +
               " (wanted " + w["containerPort"].dump() + ")" + where;
      },
      [&](const json& w) { d.injected.ports.push_back(w["containerPort"].get<std::int64_t>()); },
      patch, warnings);
  merge_list(
      container, path, "volumeMounts", want.mounts, find_mount,
      [&](const json_ref& e, const json& w) -> warning {
        const auto volume = string_member(e, "name");
        if (volume && *volume == name_of(w)) return {};
        return "trainenv: kept user-set mount " + string_or_empty(w, "mountPath") + " of volume " +
               (volume ? std::string(*volume) : std::string("?")) + where;
      },
      [&](const json& w) {
        note_once(d.injected.mounts, string_or_empty(w, "mountPath"));
        mounted_volumes.insert(name_of(w));
      },
      patch, warnings);
  merge_args(container, path, want, where, patch, d);
}

// The names of the volumes the pod's containers and init containers mount.
std::set<std::string, std::less<>> mounted_volumes(const json_ref& spec) {
  std::set<std::string, std::less<>> names;
  for (const auto* list_name : {"containers", "initContainers"}) {
    for (const auto c : member(spec, list_name)) {
      for (const auto m : member(c, "volumeMounts")) {
        if (const auto name = string_member(m, "name")) names.emplace(*name);
      }
    }
  }
  return names;
}

void diff_annotations(const pod_view& pod, const json& wanted, patch_builder& patch, decision& d) {
  json added = json::object();
  const auto& existing = pod.annotations();
  for (const auto& [key, value] : wanted.items()) {
    const auto* current = existing.find(key);
    if (current == nullptr) {
      added[key] = value;
      d.injected.annotations.push_back(key);
    } else if (!value.is_string() || *current != value.get_ref<const std::string&>()) {
      d.warnings.push_back(make_warning("trainenv: kept user-set annotation " + key + "=" +
                                        std::string(current->substr(0, 40))));
    }
  }
  // check_pod_shape denied annotations that are there but not an object.
  patch.add_members("/metadata/annotations", existing.kind() == string_map::shape::object, added);
}

// The search domains the pod lacks, added to what it lists (docs/contract.md §3, Hydra): the whole
// dnsConfig when it has none, its searches when it has no list, else each one appended.
void diff_dns_searches(const json_ref& spec, const std::vector<std::string>& wanted,
                       patch_builder& patch, decision& d) {
  const auto dns = member(spec, "dnsConfig");
  const auto existing = member(dns, "searches");
  std::vector<json> added;
  for (const auto& domain : wanted) {
    const bool listed = std::any_of(existing.begin(), existing.end(), [&](const json_ref& s) {
      return s.is_string() && s.string() == domain;
    });
    const bool repeated =
        std::any_of(added.begin(), added.end(), [&](const json& s) { return s == domain; });
    if (listed || repeated) continue;
    added.emplace_back(domain);
    d.injected.dns_searches.push_back(domain);
  }
  if (added.empty()) return;
  if (!dns) {
    patch.add("/spec/dnsConfig", json{{"searches", added}});
    return;
  }
  std::vector<const json*> items;
  items.reserve(added.size());
  for (const auto& s : added) items.push_back(&s);
  patch.append(existing != nullptr, "/spec/dnsConfig", "searches", items);
}

}  // namespace

std::string make_warning(std::string text) {
  for (auto& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  if (text.size() > max_warning_length) text = text.substr(0, max_warning_length - 3) + "...";
  return text;
}

decision build_patch(const pod_view& pod, const wants& want, const std::string& policy) {
  decision d;
  d.policy = policy;
  for (const auto& w : want.warnings) d.warnings.push_back(make_warning(w));
  patch_builder patch;
  // The volumes a mount added by this patch needs: a volume of the pod's own by that name is
  // then worth a warning when it differs, because the mount relies on it.
  std::set<std::string> mounted_by_patch;
  const auto& spec = pod.spec();
  for (const auto& c : want.containers)
    diff_container(pod, member(spec, c.list)[c.index], c, want, patch, d, mounted_by_patch);
  // An init container of trainenv's own (the hostfile's expander) is added whole, unless the
  // pod has one of that name; the volumes it mounts are then the patch's too.
  merge_list(
      spec, "/spec", "initContainers", want.init_containers,
      [](const json_ref& list, const init_container_want& w) {
        return find_by(list, "name", w.name);
      },
      [](const json_ref&, const init_container_want&) -> std::optional<std::string> { return {}; },
      [&](const init_container_want& w) {
        d.injected.init_containers.push_back(w.name);
        mounted_by_patch.insert(w.volumes.begin(), w.volumes.end());
      },
      patch, d.warnings);
  // A volume nothing mounts is not added (the pod mounts its own at the wanted path).
  const auto mounted = mounted_volumes(spec);
  std::vector<json> volumes;
  for (const auto& v : want.volumes) {
    const auto& name = name_of(v);
    if (mounted_by_patch.count(name) != 0 || mounted.count(name) != 0) volumes.push_back(v);
  }
  merge_list(
      spec, "/spec", "volumes", volumes,
      [](const json_ref& list, const json& w) { return find_by(list, "name", name_of(w)); },
      [&](const json_ref& e, const json& w) -> std::optional<std::string> {
        const auto& name = name_of(w);
        if (mounted_by_patch.count(name) == 0 || agrees(e, w)) return {};
        return "trainenv: kept user-set volume " + name;
      },
      [&](const json& w) { d.injected.volumes.push_back(name_of(w)); }, patch, d.warnings);
  diff_dns_searches(spec, want.dns_searches, patch, d);
  if (const auto policy = string_member(spec, "dnsPolicy");
      !want.dns_policy.empty() && policy != want.dns_policy) {
    // The one value trainenv overwrites (docs/contract.md §3.1: hostNetwork), said in a warning.
    if (policy) {
      patch.replace("/spec/dnsPolicy", json(want.dns_policy).dump());
    } else {
      patch.add("/spec/dnsPolicy", json(want.dns_policy));
    }
    d.injected.dns_policy = want.dns_policy;
  }
  diff_annotations(pod, want.annotations, patch, d);
  d.patch_ops = patch.size();
  d.patch_text = patch.take();
  return d;
}

}  // namespace trainenv::core
