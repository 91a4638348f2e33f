// The job's layout as the pod's owner gives it (its roles, their pods and Jobs, how they are
// named), or as the pod's own annotations and labels give it when no owner was read; the pod's
// role in it. resolve_topology (topology.cpp) places the pod in this layout.
#include "topology_detail.hpp"

#include <algorithm>

#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

namespace trainenv::core::topology_detail {
namespace {

using nlohmann::json;

}  // namespace

// The ports the owner's job plugins name (Volcano's pytorch plugin's --port=23457: the master's;
// its mpi plugin's: sshd's).
void read_plugin_ports(const owner_kind& kind, const json& owner, job_layout& layout) {
  const auto port = [&](const job_plugin& plugin, const std::string& flag,
                        std::optional<std::int64_t>& into) {
    const auto value = plugin_flag(plugin, owner, flag);
    if (!value) return;
    if (const auto n = parse_decimal(*value, 65535); n && *n >= 1) into = *n;
  };
  for (const auto& plugin : kind.plugins) {
    port(plugin, plugin.master_port_flag, layout.plugin_master_port);
    port(plugin, plugin.ssh_port_flag, layout.plugin_ssh_port);
  }
}

// The layout the pod's owner gives: every role's pods and Jobs, named by the owner's kind.
job_layout layout_from_owner(const owner_counts& owners) {
  job_layout layout;
  layout.source = owners.owner;
  for (const auto& r : owners.roles) {
    layout_role role;
    role.name = r.role;
    role.entry = r.entry;
    role.pods = r.pods;
    role.jobs = std::max<std::int64_t>(r.jobs, 1);
    role.step = r.step;
    role.opted_out = r.opted_out;
    role.left_out = r.left_out;
    role.owner_order = layout.roles.size();
    role.pod_template = r.pod_template;
    layout.roles.push_back(std::move(role));
  }
  // A role another waits for until it is Complete has finished before that one starts.
  for (const auto& r : owners.roles) {
    for (const auto& [entry, status] : r.depends_on) {
      const auto before = layout.index_of_entry(entry);
      if (before && status == "Complete" && layout.roles[*before].completes_before.empty())
        layout.roles[*before].completes_before = r.role;
    }
  }
  set_naming(layout, *owners.kind, owners.object, owners.name, nullptr, true);
  for (const auto& member : owners.kind->ssh_keys) {
    if (find_path(*owners.object, member) != nullptr) {
      layout.ssh_keys_by = path_text(member) + " of " + owners.owner;
      break;
    }
  }
  read_plugin_ports(*owners.kind, *owners.object, layout);
  return layout;
}

// Whether a hand-written MPI job runs its launcher as a node: the annotation on the launcher's
// pod template (read from the owner) or on the launcher pod itself.
bool launcher_runs_as_node(const pod_view& pod, const std::string& role, const job_layout& layout) {
  const auto says_so = [](const auto* value) { return value != nullptr && *value == "true"; };
  if (role == launcher_role && says_so(pod.annotation(keys::run_launcher_as_node))) return true;
  const auto* launcher = layout.find(launcher_role);
  return says_so(object_annotation(launcher != nullptr ? launcher->pod_template : nullptr,
                                   keys::run_launcher_as_node));
}

// The roles the pod's annotations give, else (a pod with no owner to ask) the policy's defaults,
// else the pod's own role with the number of nodes.
result<bool> roles_from_pod(const pod_view& pod, const policy& p, const std::string& role,
                            const std::string& entry, std::int64_t num_nodes, bool has_owner,
                            job_layout& layout) {
  const auto add = [&](std::string name, std::int64_t pods) {
    layout_role r;
    r.entry = name == role ? entry : name;
    r.name = std::move(name);
    r.pods = pods;
    r.jobs_known = !has_owner;  // only the owner knows how many Jobs another role runs
    r.owner_order = layout.roles.size();
    layout.roles.push_back(std::move(r));
  };
  if (const auto* given = pod.annotation(keys::replicas)) {
    auto parsed = parse_replicas(*given);
    if (!parsed) return std::move(parsed).take_error();
    for (auto& [name, count] : *parsed) add(std::move(name), count);
    layout.source = annotation_name(keys::replicas);
    return true;
  }
  if (!has_owner && !p.default_replicas.empty()) {
    variable_values nodes;
    nodes.set(variable::num_nodes, num_nodes);
    for (const auto& [name, count] : p.default_replicas) {
      auto n = count.evaluate(nodes);
      if (!n || *n < 0 || *n > max_count) {
        return error{"trainenv: policy " + quote(p.name) + " gives role " + quote(name) + " " +
                     (n ? quote(std::to_string(*n)) : n.message()) + " replicas for " +
                     std::to_string(num_nodes) + " nodes; set annotation " +
                     std::string(keys::replicas)};
      }
      add(name, *n);
    }
    layout.source = "policy " + quote(p.name) + " default";
    return true;
  }
  add(role, num_nodes);
  layout.source = pod.annotation(keys::num_nodes) != nullptr
                      ? annotation_name(keys::num_nodes)
                      : "policy " + quote(p.name) + " default";
  return true;
}

// The Jobs of the pod's own role, from the label JobSet puts on its pods, when the owner that
// knows them is not read.
result<bool> own_jobs_from_labels(const pod_view& pod, const owner_kind_set& kinds, std::size_t own,
                                  job_layout& layout) {
  const auto jobs_label = controller_label(pod, kinds, &pod_labels::jobs);
  auto jobs = read_number(jobs_label.value, jobs_label.source(), 1, max_count);
  if (!jobs) return std::move(jobs).take_error();
  auto& role = layout.roles[own];
  role.jobs_known = true;
  if (!*jobs) return true;
  role.jobs = **jobs;
  if (role.pods % role.jobs != 0) {
    return error{"trainenv: role " + quote(role.name) + " has " + std::to_string(role.pods) +
                 " pods (" + layout.source + "), which " + jobs_label.source() + " = " +
                 std::to_string(role.jobs) + " Jobs cannot share evenly; set annotation " +
                 std::string(keys::replicas) + " to the role's pods in all"};
  }
  return true;
}

// trainenv.io/replicas over the owner's roles: each role it names has that many pods; a role the
// owner lacks is added.
result<bool> apply_replicas_annotation(const pod_view& pod, const std::string& role,
                                       const std::string& entry, job_layout& layout) {
  const auto* given = pod.annotation(keys::replicas);
  if (given == nullptr) return true;
  auto parsed = parse_replicas(*given);
  if (!parsed) return std::move(parsed).take_error();
  for (auto& [name, count] : *parsed) {
    if (auto* r = layout.find(name)) {
      if (count % r->jobs != 0) {
        return error{"trainenv: annotation " + std::string(keys::replicas) + " gives role " +
                     quote(name) + " " + std::to_string(count) + " pods, but " + layout.source +
                     " runs it in " + std::to_string(r->jobs) + " Jobs; give a multiple of " +
                     std::to_string(r->jobs)};
      }
      r->pods = count;
    } else {
      layout_role added;
      added.entry = name == role ? entry : name;
      added.name = std::move(name);
      added.pods = count;
      added.owner_order = layout.roles.size();
      layout.roles.push_back(std::move(added));
    }
  }
  return true;
}

// trainenv.io/num-nodes over the owner's layout: a job with one role of nodes (besides a
// launcher run as one) runs that many; with several, the annotation names the number of nodes
// alone (and the owner's disagreement is warned about).
result<bool> apply_num_nodes(std::int64_t nodes, job_layout& layout) {
  layout_role* only = nullptr;
  for (const auto r : layout.nodes) {
    if (layout.roles[r].name == launcher_role && layout.launcher_is_node) continue;
    if (only != nullptr) return true;
    only = &layout.roles[r];
  }
  if (only == nullptr) return true;
  const auto pods = nodes - (layout.launcher_is_node ? 1 : 0);
  if (pods < 1 || pods % only->jobs != 0) {
    return error{"trainenv: annotation " + std::string(keys::num_nodes) + " is " +
                 std::to_string(nodes) + ", but role " + quote(only->name) + " of " +
                 layout.source + " runs in " + std::to_string(only->jobs) + " Jobs" +
                 (layout.launcher_is_node ? " beside a launcher that is a node" : "") +
                 "; give a number they can share evenly"};
  }
  only->pods = pods;
  return true;
}

// The layout: the owner's when it was read (with trainenv.io/replicas over it), else what the
// pod's annotations and labels say, named by the kind its labels name.
result<bool> build_layout(const pod_view& pod, const policy& p, const topology_sources& src,
                          const std::string& role, std::int64_t nodes, job_layout& layout) {
  const auto& kinds = kinds_of(src);
  const auto entry = pod_entry(pod, kinds);
  if (src.owners != nullptr) {
    layout = layout_from_owner(*src.owners);
    if (auto ok = apply_replicas_annotation(pod, role, entry, layout); !ok) return ok;
  } else {
    if (auto ok = roles_from_pod(pod, p, role, entry, nodes, src.has_owner, layout); !ok) return ok;
    const std::string_view* job_name = nullptr;
    if (const auto* kind = kind_by_labels(pod, kinds, &job_name)) {
      set_naming(layout, *kind, nullptr, *job_name, pod.subdomain(), src.has_owner);
    } else {
      layout.unnamed = "trainenv: cannot name the job's pods: the pod has no owner and none of " +
                       pod_label_names(kinds, &pod_labels::job);
    }
  }
  layout.launcher_is_node = src.trainer != nullptr ? src.trainer->run_launcher_as_node
                                                   : launcher_runs_as_node(pod, role, layout);
  return true;
}

// The pod's role in the layout: a role the owner lacks is a violation naming its roles; a
// non-training role trainenv.io/replicas leaves out is added, counting no pods. Whether it was
// listed.
result<bool> find_own_role(const pod_view& pod, const policy& p, const topology_sources& src,
                           const std::string& role, job_layout& layout) {
  if (layout.index_of(role)) return true;
  if (src.owners != nullptr) {
    std::string roles;
    for (const auto& r : layout.roles) roles += (roles.empty() ? "" : ", ") + r.name;
    return error{"trainenv: " + src.owners->owner + " has no role " + quote(role) + " (it has " +
                 (roles.empty() ? std::string("none") : roles) + "); set label " +
                 std::string(keys::role) + " or annotation " + std::string(keys::replicas)};
  }
  if (p.is_training_role(role) && pod.annotation(keys::replicas) != nullptr) {
    return error{"trainenv: annotation " + std::string(keys::replicas) +
                 " does not list this pod's role " + quote(role) + "; add " + role + "=<count>"};
  }
  layout_role unlisted;
  unlisted.name = role;
  unlisted.entry = pod_entry(pod, kinds_of(src));
  unlisted.listed = false;
  unlisted.owner_order = layout.roles.size();
  layout.roles.push_back(std::move(unlisted));
  return false;
}

}  // namespace trainenv::core::topology_detail
