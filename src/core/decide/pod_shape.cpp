#include "trainenv/core/decide/pod_shape.hpp"

#include <algorithm>
#include <string_view>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// A list the pod already has must be a list of objects for the patch to apply cleanly.
const char* check_object_list(const json_ref& container, std::string_view key, bool needs_name) {
  const auto list = member(container, key);
  if (!list) return nullptr;
  if (!list.is_array()) return "must be a list";
  for (const auto item : list) {
    if (!item.is_object()) return "must be a list of objects";
    if (needs_name && !string_member(item, "name")) return "has an entry without a name";
  }
  return nullptr;
}

// A container trainenv injects into: env, ports and mounts are merged, args may be inserted.
std::string check_container(const json_ref& container, std::string_view list, std::size_t index) {
  const std::string where =
      "trainenv: spec." + std::string(list) + "[" + std::to_string(index) + "]";
  if (!container.is_object()) return where + " must be an object";
  if (const char* why = check_object_list(container, "env", true)) return where + ".env " + why;
  if (const char* why = check_object_list(container, "ports", false))
    return where + ".ports " + why;
  if (const char* why = check_object_list(container, "volumeMounts", false))
    return where + ".volumeMounts " + why;
  for (const char* key : {"command", "args"}) {
    if (const auto strings = member(container, key)) {
      if (!strings.is_array() || !std::all_of(strings.begin(), strings.end(),
                                              [](const json_ref& a) { return a.is_string(); })) {
        return where + "." + key + " must be a list of strings";
      }
    }
  }
  return {};
}

std::optional<std::string_view> container_name(const json_ref& container) {
  return string_member(container, "name");
}

std::optional<std::size_t> named(const json_ref& containers, std::string_view name) {
  std::size_t i = 0;
  for (const auto c : containers) {
    if (container_name(c) == name) return i;
    ++i;
  }
  return std::nullopt;
}

// The container holding the most of the policy's variables, on a pod trainenv already mutated:
// another webhook (a service mesh) may have put its proxy first since. A known sidecar holds them
// too when the policy or a controller (Volcano's plugin) writes every container: any other
// container that holds some wins over it.
std::optional<std::size_t> holding_injected(const pod_view& pod, const policy& p,
                                            const std::vector<std::string>& sidecars) {
  if (pod.annotation(keys::injected) == nullptr || p.env.empty()) return std::nullopt;
  std::optional<std::size_t> best;
  std::size_t most = 0;
  bool best_is_sidecar = false;
  std::size_t i = 0;
  for (const auto c : pod.containers()) {
    const auto at = i++;
    const auto env = member(c, "env");
    if (!env.is_array()) continue;
    std::size_t held = 0;
    for (const auto e : env) {
      const auto name = string_member(e, "name");
      if (!name) continue;
      held += static_cast<std::size_t>(std::count_if(
          p.env.begin(), p.env.end(), [&](const env_item& item) { return item.name == *name; }));
    }
    const bool sidecar = is_sidecar(c, sidecars);
    bool better = held > most;
    if (best && sidecar != best_is_sidecar) better = !sidecar && held > 0;
    if (better) {
      most = held;
      best = at;
      best_is_sidecar = sidecar;
    }
  }
  return best;
}

std::string names_of(const json_ref& containers) {
  std::string out;
  for (const auto c : containers) {
    if (!out.empty()) out += ", ";
    out += container_name(c).value_or("?");
  }
  return out;
}

}  // namespace

bool is_sidecar(const json_ref& container, const std::vector<std::string>& sidecars) {
  const auto n = container_name(container);
  return n && std::find(sidecars.begin(), sidecars.end(), *n) != sidecars.end();
}

container_choice choose_container(const pod_view& pod, const policy& p,
                                  const std::vector<std::string>& sidecars) {
  container_choice out;
  const auto& containers = pod.containers();
  if (containers.empty()) {
    out.violation =
        "trainenv: spec.containers is empty or missing; the pod has no container to inject into";
    return out;
  }
  if (const auto* wanted = pod.annotation(keys::container)) {
    out.index = named(containers, *wanted);
    if (!out.index) {
      out.violation = "trainenv: annotation " + std::string(keys::container) + " is " +
                      quote(*wanted) + ", which names no container of the pod (it has " +
                      names_of(containers) + ")";
    }
    return out;
  }
  if ((out.index = holding_injected(pod, p, sidecars))) return out;
  if ((out.index = named(containers, p.container))) return out;
  if (const auto* preferred = pod.annotation(keys::default_container)) {
    if ((out.index = named(containers, *preferred))) return out;
    out.warning = "trainenv: ignored annotation " + std::string(keys::default_container) + "=" +
                  std::string(*preferred) + ": no container has that name";
  }
  std::size_t i = 0;
  for (const auto c : containers) {
    if (!is_sidecar(c, sidecars)) {
      out.index = i;
      return out;
    }
    ++i;
  }
  out.index = 0;
  return out;
}

namespace {

// The containers the policy writes into: the target (every one but the known sidecars with
// allContainers) and the extra containers it names.
std::string check_written_containers(const json_ref& spec, const pod_view& pod, const policy& p,
                                     const std::vector<std::string>& sidecars, std::size_t target) {
  std::size_t i = 0;
  for (const auto c : pod.containers()) {
    const auto at = i++;
    if (at != target && (!p.all_containers || is_sidecar(c, sidecars))) continue;
    if (auto problem = check_container(c, "containers", at); !problem.empty()) return problem;
  }
  for (const auto& extra : p.extra_containers) {
    const std::string_view list_name = extra.init ? "initContainers" : "containers";
    std::size_t j = 0;
    for (const auto c : member(spec, list_name)) {
      const auto at = j++;
      if (string_member(c, "name") != extra.name) continue;
      if (auto problem = check_container(c, list_name, at); !problem.empty()) return problem;
    }
  }
  return {};
}

// What the policy adds beside the containers: volumes, a hostfile's init container, search
// domains appended to the pod's dnsConfig.
std::string check_pod_lists(const json_ref& spec, const policy& p) {
  if (!p.volumes.empty() || p.hostfile) {
    if (const char* why = check_object_list(spec, "volumes", true))
      return std::string("trainenv: spec.volumes ") + why;
  }
  if (p.hostfile) {  // a large hostfile comes with an init container
    if (const char* why = check_object_list(spec, "initContainers", true))
      return std::string("trainenv: spec.initContainers ") + why;
  }
  const auto dns = p.dns_searches.empty() ? json_ref() : member(spec, "dnsConfig");
  if (!dns) return {};
  if (!dns.is_object()) return "trainenv: spec.dnsConfig must be an object";
  const auto searches = member(dns, "searches");
  if (searches &&
      (!searches.is_array() || !std::all_of(searches.begin(), searches.end(),
                                            [](const json_ref& s) { return s.is_string(); })))
    return "trainenv: spec.dnsConfig.searches must be a list of strings";
  return {};
}

}  // namespace

std::string check_pod_shape(const pod_view& pod, const policy& p,
                            const std::vector<std::string>& sidecars, std::size_t& target,
                            std::string& warning) {
  const auto metadata = member(pod.json(), "metadata");
  if (!metadata.is_object()) return "trainenv: metadata must be an object";
  if (pod.annotations().kind() == string_map::shape::not_object)
    return "trainenv: metadata.annotations must be an object of strings";
  // Every container is an object before any is read for its name.
  std::size_t i = 0;
  for (const auto c : pod.containers()) {
    if (!c.is_object())
      return "trainenv: spec.containers[" + std::to_string(i) + "] must be an object";
    ++i;
  }
  auto choice = choose_container(pod, p, sidecars);
  if (!choice.index) return choice.violation;
  target = *choice.index;
  warning = std::move(choice.warning);
  const auto& spec = pod.spec();  // an object: choose_container found a list in it
  if (auto problem = check_written_containers(spec, pod, p, sidecars, target); !problem.empty())
    return problem;
  return check_pod_lists(spec, p);
}

}  // namespace trainenv::core
