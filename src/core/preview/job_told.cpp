#include "job_preview_detail.hpp"

#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

// What each previewed pod was told, read back from the pod as admitted: the values a preview
// shows and the checks compare.
namespace trainenv::core {
namespace {

using nlohmann::json;

// The values a preview shows for each pod: what its place in the job decides.
constexpr variable_mask shown_variables = layout_variables | variable_bit(variable::master_port) |
                                          variable_bit(variable::nproc_per_node) |
                                          elastic_variables;

std::optional<std::int64_t> whole_number(const std::string& text) {
  const auto n = parse_decimal(text, 1'000'000'000);
  return n ? std::optional(*n) : std::nullopt;
}

// The final value of each env entry of `container`, fieldRefs to the pod itself resolved.
std::map<std::string, std::string, std::less<>> final_env(const pod_view& pod,
                                                          const json_ref& container) {
  std::map<std::string, std::string, std::less<>> out;
  for (const auto e : member(container, "env")) {
    const auto name = string_member(e, "name");
    if (!name) continue;
    if (const auto value = string_member(e, "value")) {
      out[std::string(*name)] = *value;
    } else if (const auto resolved = field_ref_value(pod, e)) {
      out[std::string(*name)] = *resolved;
    }
  }
  return out;
}

}  // namespace

std::pair<std::string, std::string> split_endpoint(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return {endpoint, {}};
  return {endpoint.substr(0, colon), endpoint.substr(colon + 1)};
}

namespace {

// The hostfile's host names: the first word of each line, without a Hydra ":slots".
std::vector<std::string> hosts_of(const std::string& text) {
  std::vector<std::string> hosts;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    auto line = text.substr(start, end - start);
    start = end + 1;
    const auto word_end = line.find_first_of(" \t");
    auto host = line.substr(0, word_end);
    if (const auto colon = host.find(':'); colon != std::string::npos) host.resize(colon);
    if (!host.empty()) hosts.push_back(std::move(host));
  }
  return hosts;
}

// The hostfile the pod's container finds at `path`, from whichever volume is mounted there:
// trainenv's annotation (downward API), trainenv's rule (expanded into an emptyDir), or a
// ConfigMap among the job's objects (Trainer's).
std::optional<std::string> hostfile_text(const pod_view& pod, const json_ref& container,
                                         const std::string& path,
                                         const std::vector<json>& objects) {
  const auto dir = path.substr(0, path.rfind('/'));
  const auto volumes = member(pod.spec(), "volumes");
  for (const auto m : member(container, "volumeMounts")) {
    if (string_or_empty(m, "mountPath") != dir) continue;
    const auto volume_name = string_or_empty(m, "name");
    for (const auto v : volumes) {
      if (string_or_empty(v, "name") != volume_name) continue;
      if (member(v, "downwardAPI") != nullptr) {
        const auto* text = pod.annotation(hostfile_annotation);
        return text != nullptr ? std::optional(std::string(*text)) : std::nullopt;
      }
      if (member(v, "emptyDir") != nullptr) {
        const auto* rule = pod.annotation(hostfile_rule_annotation);
        return rule != nullptr ? std::optional(expand_hostfile_rule(*rule)) : std::nullopt;
      }
      if (const auto cm = member(v, "configMap")) {
        const auto* ns = pod.namespace_name();
        const owner_ref ref{"v1",
                            "ConfigMap",
                            ns != nullptr ? std::string(*ns) : "",
                            std::string(string_or_empty(cm, "name")),
                            {}};
        const auto* object = find_object(objects, ref);
        const auto* data = object != nullptr ? member(*object, "data") : nullptr;
        const auto* text = data != nullptr ? string_member(*data, "hostfile") : nullptr;
        return text != nullptr ? std::optional(*text) : std::nullopt;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

// What the pod was told, by meaning: the policy's env items whose templates are one of the
// layout's values, read back from the pod's final env.
void read_values(previewed_pod& p, const policy& pol, const std::vector<std::string>& sidecars,
                 const std::vector<json>& objects) {
  const pod_view view(p.admitted);
  const auto target = choose_container(view, pol, sidecars).index;
  if (!target) return;
  const auto container = view.containers()[*target];
  const auto env = final_env(view, container);
  for (const auto& item : pol.env) {
    if (!item.value) continue;
    const auto found = env.find(item.name);
    if (found == env.end()) continue;
    const auto& source = item.value->source();
    const auto& value = found->second;
    // The ranks have columns of their own; every other value of the layout is shown.
    if (source == "${nodeRank}") {
      p.node_rank = whole_number(value);
      continue;
    }
    if (source == "${rank}") {
      p.rank = whole_number(value);
      continue;
    }
    if ((item.value->used() & shown_variables) != 0) p.values.emplace_back(item.name, value);
    // An item in another mode (a static and an elastic PET_NNODES) reads the same env var: its
    // value's form says which one the pod got.
    const bool bounds_form = value.find(':') != std::string::npos;
    if (source == "${worldSize}") p.world_size = value;
    if (source == "${numNodes}" && !bounds_form) p.num_nodes = value;
    if (source == "${masterPort}") p.master_port = value;
    if (source == "${masterAddr}") p.master = value;
    if (source == "${masterAddr}:${masterPort}") {
      auto [host, port] = split_endpoint(value);
      p.master = host;
      p.master_port = port;
    }
    if (source == "${minNodes}:${maxNodes}" && bounds_form) p.bounds = value;
    if (source == "${rdzvEndpoint}:${masterPort}") p.rendezvous = value;
    if (source == "${rdzvId}") p.rendezvous_id = value;
  }
  if (pol.hostfile) {
    if (auto text = hostfile_text(view, container, pol.hostfile->path, objects)) {
      p.hostfile = hosts_of(*text);
      p.has_hostfile = true;
      p.values.emplace_back("hostfile", std::to_string(p.hostfile.size()) + " hosts");
    }
  }
}

}  // namespace trainenv::core
