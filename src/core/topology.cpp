#include "trainenv/core/topology.hpp"

#include <algorithm>
#include <cctype>

#include "trainenv/core/keys.hpp"
#include "trainenv/core/quantity.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::int64_t max_count = 1'000'000;

const std::string* non_empty(const std::string* s) {
  return s != nullptr && !s->empty() ? s : nullptr;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The first present, non-empty source wins.
struct sourced {
  const std::string* value = nullptr;
  std::string source;  // "annotation X" / "label X"
};

sourced first_of(std::initializer_list<sourced> candidates) {
  for (const auto& c : candidates) {
    if (non_empty(c.value) != nullptr) return c;
  }
  return {};
}

std::string label_name(std::string_view key) {
  return "label " + std::string(key);
}
std::string annotation_name(std::string_view key) {
  return "annotation " + std::string(key);
}

sourced label_or_annotation(const pod_view& pod, std::string_view key) {
  if (const auto* v = non_empty(pod.label(key))) return {v, label_name(key)};
  return {non_empty(pod.annotation(key)), annotation_name(key)};
}

result<std::string> resolve_job(const pod_view& pod) {
  const auto volcano = label_or_annotation(pod, keys::volcano_job);
  const auto found = first_of({
      {pod.label(keys::jobset_name), ""},
      {pod.label(keys::trainjob_name), ""},
      volcano,
      {pod.subdomain(), ""},
  });
  if (found.value == nullptr) {
    return error{"trainenv: cannot tell the job name: set label " + std::string(keys::jobset_name) +
                 " (or label " + std::string(keys::trainjob_name) + ", label " +
                 std::string(keys::volcano_job) + ", or spec.subdomain)"};
  }
  return *found.value;
}

}  // namespace

std::string pod_role(const pod_view& pod) {
  const auto found = first_of({
      label_or_annotation(pod, keys::role),
      {pod.label(keys::replicated_job), ""},
      label_or_annotation(pod, keys::volcano_task),
  });
  return found.value != nullptr ? *found.value : std::string("node");
}

std::int64_t owner_nodes(const owner_counts& owners, const policy& p, std::string_view role) {
  std::int64_t nodes = 0;
  if (owners.every_role) {
    for (const auto& training : p.training_roles) {
      if (const auto* r = owners.find(training)) nodes += r->pods;
    }
  }
  if (nodes > 0) return nodes;
  const auto* own = owners.find(role);  // a plain Job knows only the pod's own role
  return own != nullptr ? own->pods : 0;
}

bool has_explicit_counts(const pod_view& pod) {
  return pod.annotation(keys::num_nodes) != nullptr || pod.annotation(keys::replicas) != nullptr;
}

namespace {

// nullopt value with no error: no source present.
result<std::optional<std::int64_t>> read_index(const pod_view& pod) {
  const auto found = first_of({
      {pod.annotation(keys::completion_index), annotation_name(keys::completion_index)},
      {pod.label(keys::completion_index), label_name(keys::completion_index)},
      {pod.label(keys::volcano_index), label_name(keys::volcano_index)},
  });
  if (found.value != nullptr) {
    const auto n = parse_decimal(trim(*found.value), max_count);
    if (!n) {
      return error{"trainenv: " + found.source + " is " + quote(*found.value) +
                   "; expected a whole number >= 0"};
    }
    return std::optional<std::int64_t>(*n);
  }
  // A pod named "<job>-worker-3" (Volcano, StatefulSet-like naming) carries its index.
  if (const auto* name = pod.name()) {
    const auto dash = name->find_last_of('-');
    if (dash != std::string::npos) {
      if (const auto n = parse_decimal(std::string_view(*name).substr(dash + 1), max_count)) {
        return std::optional<std::int64_t>(*n);
      }
    }
  }
  return std::optional<std::int64_t>();
}

result<std::int64_t> read_int_annotation(const pod_view& pod, std::string_view key,
                                         std::int64_t fallback, std::int64_t min,
                                         std::int64_t max) {
  const auto* text = pod.annotation(key);
  if (text == nullptr) return fallback;
  const auto n = parse_decimal(trim(*text), max);
  if (!n || *n < min) {
    return error{"trainenv: annotation " + std::string(key) + " is " + quote(*text) +
                 "; expected a whole number from " + std::to_string(min) + " to " +
                 std::to_string(max)};
  }
  return *n;
}

std::int64_t replicas_of(const std::vector<std::pair<std::string, std::int64_t>>& replicas,
                         std::string_view role, std::int64_t absent) {
  for (const auto& [name, count] : replicas) {
    if (name == role) return count;
  }
  return absent;
}

}  // namespace

result<std::vector<std::pair<std::string, std::int64_t>>> parse_replicas(std::string_view text) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto bad = [&](std::string_view why) {
    return error{"trainenv: annotation " + std::string(keys::replicas) + " is " + quote(text) +
                 "; " + std::string(why) + " (expected role=count pairs, e.g. master=1,worker=3)"};
  };
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto item = trim(rest.substr(0, comma));
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return bad("\"" + std::string(item) + "\" has no '='");
    const auto role = trim(item.substr(0, eq));
    const auto count = parse_decimal(trim(item.substr(eq + 1)), max_count);
    if (!is_dns_label(role)) return bad("\"" + std::string(role) + "\" is not a role name");
    if (!count) return bad("the count for " + std::string(role) + " is not a whole number");
    for (const auto& [name, n] : out) {
      if (name == role) return bad(std::string(role) + " is listed twice");
    }
    out.emplace_back(std::string(role), *count);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

namespace {

// Processes per node, the processes-per-node count and the GPUs: annotation, else the policy's
// default, resolved against the target container's resources.
result<bool> resolve_processes(const pod_view& pod, const policy& p, const json& target,
                               topology& t) {
  nproc_setting nproc = p.default_nproc;
  if (const auto* text = pod.annotation(keys::nproc_per_node)) {
    const auto parsed = nproc_setting::parse(trim(*text));
    if (!parsed) {
      return error{"trainenv: annotation " + std::string(keys::nproc_per_node) + " is " +
                   quote(*text) + "; expected a whole number >= 1, auto, cpu or gpu"};
    }
    nproc = *parsed;
  }
  if (nproc.kind == nproc_setting::mode::count) t.nproc_count = nproc.count;
  if (auto gpus = gpu_count(target)) {
    t.gpus_per_node = *gpus;
  } else {
    t.gpus_unknown_reason = gpus.message();
  }
  auto resolved = resolve_nproc(nproc, target);
  if (!resolved) return std::move(resolved).take_error();
  t.nproc_per_node = *resolved;
  return true;
}

// Replicas per role: the annotation, else the policy's default (e.g. Volcano's
// master=1,worker=<nodes-1>), else the pod's own role with the number of nodes.
result<bool> resolve_replicas(const pod_view& pod, const policy& p, topology& t) {
  if (const auto* given = pod.annotation(keys::replicas)) {
    auto parsed = parse_replicas(*given);
    if (!parsed) return std::move(parsed).take_error();
    t.replicas = std::move(*parsed);
  } else if (!p.default_replicas.empty()) {
    // The policy's own default, e.g. Volcano's master=1,worker=<nodes-1>.
    variable_values nodes;
    nodes.set(variable::num_nodes, t.num_nodes);
    for (const auto& [role, count] : p.default_replicas) {
      auto n = count.evaluate(nodes);
      if (!n || *n < 0 || *n > max_count) {
        return error{"trainenv: policy " + quote(p.name) + " gives role " + quote(role) + " " +
                     (n ? quote(std::to_string(*n)) : n.message()) + " replicas for " +
                     std::to_string(t.num_nodes) + " nodes; set annotation " +
                     std::string(keys::replicas)};
      }
      t.replicas.emplace_back(role, *n);
    }
  } else {
    t.replicas = {{t.role, t.num_nodes}};
  }
  return true;
}

// The GPUs of one worker as the training role's pod template in the owner asks for them: what a
// launcher's MPI slots count. nullopt when no template says.
std::optional<std::int64_t> template_gpus(const owner_counts& owners, const policy& p) {
  for (const auto& role : p.training_roles) {
    const auto* r = owners.find(role);
    if (r == nullptr || r->pod_template == nullptr) continue;
    const auto* spec = member(*r->pod_template, "spec");
    const auto* containers = spec != nullptr ? member(*spec, "containers") : nullptr;
    if (containers == nullptr || !containers->is_array() || containers->empty()) continue;
    const json* chosen = &(*containers)[0];
    for (const auto& c : *containers) {
      if (const auto* name = string_member(c, "name"); name != nullptr && *name == p.container)
        chosen = &c;
    }
    if (auto gpus = gpu_count(*chosen)) return *gpus;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string replicas_text(const std::vector<std::pair<std::string, std::int64_t>>& replicas) {
  std::string out;
  for (const auto& [role, count] : replicas)
    out += (out.empty() ? "" : ",") + role + "=" + std::to_string(count);
  return out;
}

// Replicas of every role the owner knows, and the number of nodes as the pods of the policy's
// training roles added up (an MPI launcher counts its workers, not itself).
result<bool> apply_owner_counts(const owner_counts& owners, const policy& p, topology& t) {
  const auto* own = owners.find(t.role);
  if (own == nullptr) {
    std::string roles;
    for (const auto& r : owners.roles) roles += (roles.empty() ? "" : ", ") + r.role;
    return error{"trainenv: " + owners.owner + " has no role " + quote(t.role) + " (it has " +
                 (roles.empty() ? std::string("none") : roles) + "); set label " +
                 std::string(keys::role) + " or annotation " + std::string(keys::replicas)};
  }
  for (const auto& r : owners.roles) t.replicas.emplace_back(r.role, r.pods);
  const auto nodes = owner_nodes(owners, p, t.role);
  if (nodes < 1 || nodes > max_count) {
    return error{"trainenv: " + owners.owner + " gives " + std::to_string(nodes) +
                 " pods to the training roles; set annotation " + std::string(keys::num_nodes)};
  }
  t.num_nodes = nodes;
  t.sources.push_back({"numNodes", std::to_string(nodes), owners.owner});
  t.sources.push_back({"replicas", replicas_text(t.replicas), owners.owner});
  if (!t.training_role) {
    if (const auto gpus = template_gpus(owners, p)) {
      t.worker_gpus = *gpus;
      t.sources.push_back({"workerGpus", std::to_string(*gpus), owners.owner + " pod template"});
    }
  }
  return true;
}

// A JobSet replicatedJob with several Jobs: the pod's index in its role is its completion index
// plus its Job's index times the pods of one Job.
result<bool> add_job_index(const pod_view& pod, const owner_counts& owners, topology& t) {
  const auto* own = owners.find(t.role);
  if (own == nullptr || !own->several_jobs || !t.index) return true;
  const auto* text = pod.label(keys::job_index);
  const auto job = text != nullptr ? parse_decimal(trim(*text), max_count) : std::nullopt;
  if (!job) {
    return error{"trainenv: role " + quote(t.role) + " of " + owners.owner + " runs " +
                 std::to_string(own->pods / std::max<std::int64_t>(own->pods_per_job, 1)) +
                 " Jobs, and label " + std::string(keys::job_index) + " is " +
                 (text != nullptr ? quote(*text) : std::string("missing")) +
                 "; expected a whole number >= 0"};
  }
  t.index = *job * own->pods_per_job + *t.index;
  return true;
}

// The counts from the pod alone: its annotations, else the policy's defaults (a bare pod).
result<bool> apply_pod_counts(const pod_view& pod, const policy& p, topology& t) {
  auto nodes = read_int_annotation(pod, keys::num_nodes, p.default_num_nodes, 1, max_count);
  if (!nodes) return std::move(nodes).take_error();
  t.num_nodes = *nodes;
  t.sources.push_back({"numNodes", std::to_string(t.num_nodes),
                       pod.annotation(keys::num_nodes) != nullptr
                           ? annotation_name(keys::num_nodes)
                           : "policy " + quote(p.name) + " default"});
  if (auto replicas = resolve_replicas(pod, p, t); !replicas)
    return std::move(replicas).take_error();
  t.sources.push_back({"replicas", replicas_text(t.replicas),
                       pod.annotation(keys::replicas) != nullptr ? annotation_name(keys::replicas)
                       : p.default_replicas.empty() ? "the pod's role with numNodes replicas"
                                                    : "policy " + quote(p.name) + " default"});
  return true;
}

}  // namespace

result<topology> resolve_topology(const pod_view& pod, const policy& p, std::size_t target_index,
                                  const owner_counts* owners) {
  topology t;
  t.container = target_index;
  const auto& target = (*pod.containers())[t.container];

  auto job = resolve_job(pod);
  if (!job) return std::move(job).take_error();
  t.job = std::move(*job);
  if (const auto* ns = pod.namespace_name()) t.namespace_name = *ns;
  t.role = pod_role(pod);
  t.training_role = p.is_training_role(t.role);

  auto port = read_int_annotation(pod, keys::master_port, p.default_master_port, 1, 65535);
  if (!port) return std::move(port).take_error();
  t.master_port = *port;

  if (auto nproc = resolve_processes(pod, p, target, t); !nproc)
    return std::move(nproc).take_error();

  const bool replicas_given = pod.annotation(keys::replicas) != nullptr;
  const bool from_owners = owners != nullptr && !has_explicit_counts(pod);
  if (from_owners) {
    if (auto ok = apply_owner_counts(*owners, p, t); !ok) return std::move(ok).take_error();
  } else if (auto ok = apply_pod_counts(pod, p, t); !ok) {
    return std::move(ok).take_error();
  }
  constexpr std::int64_t unknown = -1;
  const std::int64_t role_replicas = replicas_of(t.replicas, t.role, unknown);
  if (role_replicas == unknown && t.training_role) {
    return error{"trainenv: annotation " + std::string(keys::replicas) +
                 " does not list this pod's role " + quote(t.role) + "; add " + t.role +
                 "=<count>"};
  }

  auto index = read_index(pod);
  if (!index) return std::move(index).take_error();
  t.index = *index;
  if (from_owners) {
    if (auto ok = add_job_index(pod, *owners, t); !ok) return std::move(ok).take_error();
  }
  if (!t.index && role_replicas == 1) t.index = 0;
  if (!t.index) {
    t.index_unknown_reason =
        "trainenv: cannot tell this pod's index in role " + quote(t.role) +
        (role_replicas > 1 ? " (" + std::to_string(role_replicas) + " replicas)" : std::string()) +
        ": set annotation " + std::string(keys::completion_index) + " or label " +
        std::string(keys::volcano_index);
  }
  // A policy that uses no count never learns the job's size (no owner is read for it), so an
  // index past the default replicas says nothing about the pod.
  if (t.index && role_replicas != unknown && *t.index >= role_replicas && uses_counts(p)) {
    const std::string source = from_owners ? owners->owner
                               : replicas_given
                                   ? "annotation " + std::string(keys::replicas)
                                   : "annotation " + std::string(keys::num_nodes) + " (default " +
                                         std::to_string(p.default_num_nodes) + ")";
    return error{"trainenv: index " + std::to_string(*t.index) + " of role " + quote(t.role) +
                 " is out of range: " + source + " gives it " + std::to_string(role_replicas) +
                 " replica(s); set " +
                 (replicas_given ? std::string(keys::replicas) : std::string(keys::num_nodes)) +
                 " to the real count"};
  }

  if (t.training_role) {
    std::int64_t world = 0;
    std::int64_t before = 0;
    bool past_own_role = false;
    for (const auto& role : p.training_roles) {
      const auto n = replicas_of(t.replicas, role, 0);
      world += n;
      if (role == t.role) past_own_role = true;
      if (!past_own_role) before += n;
    }
    t.world_size = world;
    if (t.index) t.rank = before + *t.index;
  }
  return t;
}

variable_values topology::variables() const {
  variable_values v;
  // A number when known, else the reason it is not, which a policy item needing it reports.
  const auto set_number = [&v](variable var, std::optional<std::int64_t> value,
                               const std::string& reason) {
    if (value) {
      v.set(var, *value);
    } else {
      v.set_unavailable(var, reason);
    }
  };
  v.set(variable::job, job);
  v.set(variable::namespace_name, namespace_name);
  v.set(variable::role, role);
  set_number(variable::index, index, index_unknown_reason);
  v.set(variable::num_nodes, num_nodes);
  v.set(variable::nproc_per_node, nproc_per_node.text());
  v.set(variable::master_port, master_port);
  // Policies are validated so that only items scoped to training roles use these two.
  const std::string not_training = "trainenv: role " + quote(role) + " is not a training role";
  set_number(variable::world_size, world_size, not_training);
  set_number(variable::rank, rank, training_role ? index_unknown_reason : not_training);
  set_number(variable::gpus_per_node, gpus_per_node, gpus_unknown_reason);
  const auto gpus_or_one =
      gpus_per_node ? std::optional(std::max<std::int64_t>(*gpus_per_node, 1)) : std::nullopt;
  // MPI slots: the processes-per-node setting when a number, else the GPUs, else 1.
  const auto worker = worker_gpus ? worker_gpus : gpus_per_node;
  const auto worker_or_one =
      worker ? std::optional(std::max<std::int64_t>(*worker, 1)) : std::nullopt;
  set_number(variable::slots, nproc_count ? nproc_count : worker_or_one, gpus_unknown_reason);
  // Processes per node as a number: the resolved count, or for auto/gpu the GPUs (at least 1).
  set_number(variable::processes_per_node,
             nproc_per_node.count ? nproc_per_node.count : gpus_or_one, gpus_unknown_reason);
  v.set_unavailable(variable::line, "trainenv: ${i} exists only inside an annotation's lines");
  v.set_replicas(replicas);
  return v;
}

}  // namespace trainenv::core
