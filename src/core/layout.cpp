#include "trainenv/core/layout.hpp"

#include <algorithm>

#include "trainenv/core/keys.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// master, worker and node lead the node order, in that order; every other role follows in the
// owner's own order.
int order_of(std::string_view role) {
  if (role == "master") return 0;
  if (role == "worker") return 1;
  if (role == "node") return 2;
  return 3;
}

// Where the rule's varying numbers go in a rendered name.
constexpr char number_marker = '\x1f';

}  // namespace

const layout_role* job_layout::find(std::string_view role) const {
  const auto at = index_of(role);
  return at ? &roles[*at] : nullptr;
}

layout_role* job_layout::find(std::string_view role) {
  const auto at = index_of(role);
  return at ? &roles[*at] : nullptr;
}

std::optional<std::size_t> job_layout::index_of(std::string_view role) const {
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i].name == role) return i;
  }
  return std::nullopt;
}

std::int64_t job_layout::node_count() const {
  std::int64_t n = 0;
  for (const auto r : nodes) n += roles[r].pods;
  return n;
}

std::int64_t job_layout::training_pods() const {
  std::int64_t n = 0;
  for (const auto& r : roles) {
    if (r.training) n += r.pods;
  }
  return n;
}

std::optional<std::int64_t> job_layout::node_rank(std::size_t role, std::int64_t position) const {
  std::int64_t before = 0;
  for (const auto r : nodes) {
    if (r == role) return before + position;
    before += roles[r].pods;
  }
  return std::nullopt;
}

std::string host_group::name(std::int64_t position) const {
  const auto per_job = std::max<std::int64_t>(pods_per_job, 1);
  return prefix + (jobs ? std::to_string(position / per_job) : std::string()) + middle +
         std::to_string(position % per_job) + suffix;
}

result<host_group> job_layout::names_of(std::size_t role) const {
  if (naming == nullptr || !unnamed.empty()) return error{unnamed};
  const auto& r = roles[role];
  variable_values values;
  values.set(variable::job, job);
  values.set(variable::role, r.name);
  auto marked = naming->hostname.render_marked(
      values, variable_bit(variable::job_index) | variable_bit(variable::index), number_marker);
  if (!marked) return std::move(marked).take_error();
  // "<prefix>\x1f<middle>\x1f" with a Job number, "<prefix>\x1f" without (the rule ends in the
  // index, and names a Job at most once: both checked when the kind is read).
  host_group group;
  const auto first = marked->find(number_marker);
  const auto second = marked->find(number_marker, first + 1);
  group.prefix = marked->substr(0, first);
  if (second != std::string::npos) {
    group.jobs = r.jobs;
    group.middle = marked->substr(first + 1, second - first - 1);
  }
  group.pods_per_job = group.jobs ? r.pods_per_job() : r.pods;
  group.suffix = "." + subdomain;
  return group;
}

result<std::string> job_layout::dns_name(std::size_t role, std::int64_t position) const {
  if (self && self->first == role && self->second == position) return self_name;
  auto group = names_of(role);
  if (!group) return std::move(group).take_error();
  const auto& r = roles[role];
  if (!r.jobs_known && group->jobs && position >= group->pods_per_job) {
    return error{"trainenv: the pods of role " + quote(r.name) + " past its first Job have names " +
                 "only " + source + "'s owner can tell"};
  }
  return group->name(position);
}

result<std::string> job_layout::master() const {
  for (const auto r : nodes) {
    if (roles[r].pods > 0) return dns_name(r, 0);
  }
  return error{no_nodes};
}

result<std::vector<host_group>> job_layout::host_groups() const {
  std::vector<host_group> groups;
  for (const auto r : nodes) {
    const auto& role = roles[r];
    if (role.pods == 0) continue;
    auto group = names_of(r);
    if (!group) return std::move(group).take_error();
    if (!role.jobs_known && group->jobs && role.pods > group->pods_per_job) {
      return error{"trainenv: role " + quote(role.name) + " runs " + std::to_string(role.pods) +
                   " pods in Jobs whose count only " + source + "'s owner can tell"};
    }
    groups.push_back(std::move(*group));
  }
  return groups;
}

void settle_roles(job_layout& layout, const policy& p, bool read_from_owner) {
  std::stable_sort(layout.roles.begin(), layout.roles.end(),
                   [](const layout_role& a, const layout_role& b) {
                     return order_of(a.name) < order_of(b.name);
                   });
  bool any_training = false;
  for (auto& r : layout.roles) {
    r.training = r.listed && p.is_training_role(r.name);
    any_training = any_training || r.training;
  }
  if ((!any_training && read_from_owner) || p.every_role_trains) {
    // A job whose roles the policy does not name (JobSet's `workers`, a `trainer`), or a policy
    // whose every role trains (MPI's workers): every role trains but the launcher and the roles
    // Trainer marks as another step (its initializers).
    for (auto& r : layout.roles) {
      r.training = r.listed && r.name != launcher_role && (r.step.empty() || r.step == "trainer");
    }
  }
  layout.nodes.clear();
  std::optional<std::size_t> launcher;
  for (std::size_t i = 0; i < layout.roles.size(); ++i) {
    auto& r = layout.roles[i];
    r.node = r.training;
    if (r.name == launcher_role && layout.launcher_is_node) {
      r.node = true;
      launcher = i;
    } else if (r.node) {
      layout.nodes.push_back(i);
    }
  }
  if (launcher) layout.nodes.push_back(*launcher);
  if (layout.node_count() == 0) {
    std::string roles;
    for (const auto& r : layout.roles) {
      if (r.listed) roles += (roles.empty() ? "" : ", ") + r.name + "=" + std::to_string(r.pods);
    }
    std::string trains = p.every_role_trains ? std::string("every role but the launcher") : "";
    for (const auto& r : p.training_roles) trains += (trains.empty() ? "" : ", ") + r;
    layout.no_nodes = "trainenv: " + layout.source + " runs no pod in a node role (it has " +
                      (roles.empty() ? std::string("no role") : roles) + "; policy " +
                      quote(p.name) + " trains " + trains +
                      "): the job has nothing to train on, and no master";
  }
}

void set_naming(job_layout& layout, const owner_kind& kind, const json* owner, std::string_view job,
                const std::string_view* pod_subdomain) {
  layout.naming_kind = kind.kind;
  layout.job = job;
  if (!kind.naming) {
    layout.unnamed = "trainenv: trainenv has no naming rule for the pods of a " + kind.kind +
                     " (owner kind " + quote(kind.name) + " has no naming)";
    return;
  }
  layout.naming = &*kind.naming;
  const auto& naming = *kind.naming;
  const json* subdomain =
      owner != nullptr && !naming.subdomain.empty() ? find_path(*owner, naming.subdomain) : nullptr;
  if (subdomain != nullptr && subdomain->is_string() &&
      !subdomain->get_ref<const std::string&>().empty()) {
    layout.subdomain = subdomain->get<std::string>();
  } else if (owner == nullptr && pod_subdomain != nullptr && !pod_subdomain->empty()) {
    // Not read: the subdomain the controller wrote into the pod is the job's.
    layout.subdomain = *pod_subdomain;
  } else if (naming.subdomain_default) {
    variable_values values;
    values.set(variable::job, std::string(job));
    auto rendered = naming.subdomain_default->render(values);
    if (rendered) layout.subdomain = std::move(*rendered);
  }
  if (layout.subdomain.empty()) {
    layout.unnamed =
        "trainenv: the pods of " + kind.kind + " " + std::string(job) +
        " have no DNS names: it sets no subdomain" +
        (naming.subdomain.empty() ? std::string() : " (" + path_text(naming.subdomain) + ")") +
        "; set one, with a headless Service of that name";
  }
}

}  // namespace trainenv::core
