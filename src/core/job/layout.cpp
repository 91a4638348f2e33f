#include "trainenv/core/job/layout.hpp"

#include <algorithm>

#include "trainenv/core/text/command_flags.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

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

std::optional<std::size_t> job_layout::index_of_entry(std::string_view entry) const {
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i].entry == entry) return i;
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
  // In node order, before the coordinator moves to the front.
  const auto in_order = [this](std::size_t r, std::int64_t at) -> std::optional<std::int64_t> {
    std::int64_t before = 0;
    for (const auto n : nodes) {
      if (n == r) return before + at;
      before += roles[n].pods;
    }
    return std::nullopt;
  };
  const auto rank = in_order(role, position);
  if (!rank || !coordinator) return rank;
  if (coordinator->first == role && coordinator->second == position) return 0;
  const auto moved = in_order(coordinator->first, coordinator->second);
  return moved && *rank < *moved ? *rank + 1 : *rank;
}

std::string host_group::name(std::int64_t position) const {
  const auto per_job = std::max<std::int64_t>(pods_per_job, 1);
  return prefix + (jobs ? std::to_string(position / per_job) : std::string()) + middle +
         std::to_string(position % per_job) + suffix;
}

namespace {

const std::string& template_subdomain(const layout_role& r) {
  static const std::string none;
  const auto* spec = r.pod_template != nullptr ? member(*r.pod_template, "spec") : nullptr;
  const auto* subdomain = spec != nullptr ? string_member(*spec, "subdomain") : nullptr;
  return subdomain != nullptr ? *subdomain : none;
}

// The subdomain by the controller's rule, before it is checked as a DNS label.
result<std::string> rule_subdomain(const job_layout& layout, std::size_t role) {
  if (layout.naming == nullptr || !layout.unnamed.empty()) return error{layout.unnamed};
  const auto& r = layout.roles[role];
  const auto& own = template_subdomain(r);
  if (!layout.templates_only.empty()) {
    if (!own.empty()) return own;
    return error{"trainenv: the pods of role " + quote(r.name) + " of " + layout.naming_kind + " " +
                 layout.job + " have no DNS names: " + layout.templates_only +
                 ", and the role's pod template sets no spec.subdomain; set one, with a headless " +
                 "Service of that name"};
  }
  if (layout.template_first && !own.empty()) return own;
  if (!layout.subdomain.empty()) return layout.subdomain;
  if (!own.empty()) return own;
  const auto& rule = layout.naming->subdomain;
  return error{"trainenv: the pods of " + layout.naming_kind + " " + layout.job +
               " have no DNS names: it sets no subdomain" +
               (rule.empty() ? std::string() : " (" + path_text(rule) + ")") +
               "; set one, with a headless Service of that name"};
}

}  // namespace

result<std::string> job_layout::subdomain_of(std::size_t role) const {
  auto domain = rule_subdomain(*this, role);
  // It becomes a part of host names and a DNS search domain: a DNS label, or nothing of it is
  // used.
  if (domain && !is_dns_label(*domain)) {
    return error{"trainenv: the pods of role " + quote(roles[role].name) +
                 " would have the subdomain " + quote(*domain) +
                 ", not a DNS label (at most 63 of a-z, 0-9 and '-')"};
  }
  return domain;
}

result<host_group> job_layout::names_of(std::size_t role) const {
  auto domain = subdomain_of(role);
  if (!domain) return std::move(domain).take_error();
  const auto& r = roles[role];
  variable_values values;
  values.set(variable::job, job);
  values.set(variable::role, r.entry);
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
  group.suffix = "." + *domain;
  // Only DNS names reach a hostfile line, an address or a search domain. Numbers are all that
  // vary within a group, so its longest name stands for all of them.
  const auto longest = group.name(std::max<std::int64_t>(group.pods() - 1, 0));
  const auto host = std::string_view(longest).substr(0, longest.find('.'));
  if (!is_dns_label(host)) {
    return error{"trainenv: the pods of role " + quote(r.name) + " would be named " +
                 quote(longest.substr(0, 120)) +
                 ", not a DNS name (a hostname and a subdomain, each a DNS label of at most 63 "
                 "characters)"};
  }
  return group;
}

result<std::string> job_layout::dns_name(std::size_t role, std::int64_t position) const {
  auto group = names_of(role);
  if (!group) return std::move(group).take_error();
  const auto& r = roles[role];
  if (!r.jobs_known && group->jobs && position >= group->pods_per_job) {
    return error{"trainenv: the pods of role " + quote(r.name) + " past its first Job have names " +
                 "only " + source + "'s owner can tell"};
  }
  return group->name(position);
}

result<std::string> job_layout::rank0_name() const {
  if (coordinator) return dns_name(coordinator->first, coordinator->second);
  for (const auto r : nodes) {
    if (roles[r].pods > 0) return dns_name(r, 0);
  }
  return error{no_nodes};
}

result<std::string> job_layout::master() const {
  // A world of one pod rendezvous with itself: its own hostname.subdomain would resolve only once
  // its DNS record is published (the pod Ready, or the Service publishing not-ready addresses).
  if (node_count() == 1) return std::string("localhost");
  return rank0_name();
}

result<std::string> job_layout::launcher_subdomain() const {
  if (const auto launcher = index_of(launcher_role)) return subdomain_of(*launcher);
  if (coordinator) return subdomain_of(coordinator->first);
  for (const auto r : nodes) {
    if (roles[r].pods > 0) return subdomain_of(r);
  }
  return error{no_nodes};
}

result<std::vector<host_group>> job_layout::host_groups() const {
  std::vector<std::size_t> in_owner_order = nodes;
  std::stable_sort(
      in_owner_order.begin(), in_owner_order.end(),
      [this](std::size_t a, std::size_t b) { return roles[a].owner_order < roles[b].owner_order; });
  std::vector<host_group> groups;
  for (const auto r : in_owner_order) {
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

namespace {

// Why a role is out of the world whatever the policy (docs/contract.md §2.2); empty when it is
// not.
std::string outside_reason(const layout_role& r) {
  if (!r.left_out.empty()) return r.left_out;
  if (!r.step.empty() && r.step != "trainer")
    return "its templates are step " + quote(r.step) + " (label " +
           std::string(keys::ancestor_step) + ")";
  if (r.opted_out)
    return "its pod template opts out (annotation " + std::string(keys::inject) + ": \"false\")";
  if (!r.completes_before.empty())
    return "it completes before role " + quote(r.completes_before) +
           " starts (dependsOn, status Complete)";
  return {};
}

// The coordinator's place, when it names a pod of a node role; else why not (a warning).
void place_coordinator(job_layout& layout, const coordinator_pod& c) {
  const auto at = layout.index_of_entry(c.role);
  const std::string named =
      quote(c.role) + " Job " + std::to_string(c.job_index) + " pod " + std::to_string(c.pod_index);
  if (!at) {
    layout.coordinator_note = "trainenv: the coordinator " + named + " is not a role of " +
                              layout.source + "; the master is the first node";
    return;
  }
  const auto& r = layout.roles[*at];
  const auto position = c.job_index * r.pods_per_job() + c.pod_index;
  if (!r.node || c.job_index >= r.jobs || c.pod_index >= r.pods_per_job()) {
    layout.coordinator_note =
        "trainenv: the coordinator " + named + " is not in the world (" +
        (r.outside.empty() ? std::string(r.node ? "no such pod" : "its role does not train")
                           : r.outside) +
        "); the master is the first node";
    return;
  }
  layout.coordinator = std::pair(*at, position);
}

// Why a layout runs no pod in a node role (nothing to train on, no master): its roles and what
// the policy trains.
std::string no_nodes_message(const job_layout& layout, const policy& p, bool strict,
                             const world_rules& rules) {
  std::string roles;
  for (const auto& r : layout.roles) {
    if (r.listed) roles += (roles.empty() ? "" : ", ") + r.name + "=" + std::to_string(r.pods);
  }
  std::string trains = p.every_role_trains ? std::string("every role but the launcher") : "";
  for (const auto& r : p.training_roles) trains += (trains.empty() ? "" : ", ") + r;
  if (!strict && rules.read_from_owner && !p.every_role_trains) trains = "every role in the world";
  return "trainenv: " + layout.source + " runs no pod in a node role (it has " +
         (roles.empty() ? std::string("no role") : roles) + "; policy " + quote(p.name) +
         " trains " + trains + "): the job has nothing to train on, and no master";
}

}  // namespace

void settle_roles(job_layout& layout, const policy& p, const world_rules& rules,
                  const std::optional<coordinator_pod>& coordinator) {
  std::stable_sort(layout.roles.begin(), layout.roles.end(),
                   [](const layout_role& a, const layout_role& b) {
                     return order_of(a.name) < order_of(b.name);
                   });
  // Strict training roles hold where their master is: a job with no master role (a worker-only
  // Volcano Job, whose pytorch plugin then writes nothing) trains every role the world rule
  // leaves, its first pod the master, as any other owner's.
  const bool strict =
      p.strict_training_roles &&
      std::any_of(layout.roles.begin(), layout.roles.end(), [](const layout_role& r) {
        return r.listed && r.pods > 0 && r.name == "master";
      });
  // The label rule: where some roles carry Trainer's trainer label, the others are side roles.
  const bool some_labelled =
      std::any_of(layout.roles.begin(), layout.roles.end(),
                  [](const layout_role& r) { return r.listed && r.step == "trainer"; });
  for (auto& r : layout.roles) {
    r.outside = r.listed ? outside_reason(r) : "trainenv.io/replicas leaves it out";
    const bool candidate = r.outside.empty() && r.name != launcher_role;
    if (p.every_role_trains) {
      // An MPI job's workers need not be training pods themselves: no label rule.
      r.training = candidate && (!rules.trainer_workers || r.name == "node");
    } else if (rules.read_from_owner) {
      if (candidate && some_labelled && r.step.empty()) {
        r.outside = "its templates do not carry label " + std::string(keys::ancestor_step) +
                    ": trainer, which other roles' do";
      }
      r.training = r.outside.empty() && candidate && (!strict || p.is_training_role(r.name));
    } else {
      r.training =
          candidate && ((p.strict_training_roles && !strict) || p.is_training_role(r.name));
    }
  }
  layout.nodes.clear();
  std::optional<std::size_t> launcher;
  for (std::size_t i = 0; i < layout.roles.size(); ++i) {
    auto& r = layout.roles[i];
    r.node = r.training;
    if (r.name == launcher_role && layout.launcher_is_node && r.listed) {
      r.node = true;
      launcher = i;
    } else if (r.node) {
      layout.nodes.push_back(i);
    }
  }
  if (launcher) layout.nodes.push_back(*launcher);
  if (layout.node_count() == 0) layout.no_nodes = no_nodes_message(layout, p, strict, rules);
  layout.coordinator.reset();
  layout.coordinator_note.clear();
  if (coordinator) place_coordinator(layout, *coordinator);
}

namespace {

bool publishes_not_ready(const pod_naming::not_ready_rule& rule, const json& owner) {
  if (!rule.at.empty()) {
    const auto* on = find_path(owner, rule.at);
    return on != nullptr && on->is_boolean() ? on->get<bool>() : rule.by_default;
  }
  const auto* args = find_path(owner, rule.plugin);
  const auto given = args != nullptr ? bool_flag_value(*args, rule.flag) : std::nullopt;
  return given.value_or(rule.by_default);
}

}  // namespace

void set_naming(job_layout& layout, const owner_kind& kind, const json* owner, std::string_view job,
                const std::string_view* pod_subdomain, bool has_owner) {
  layout.naming_kind = kind.kind;
  layout.kind = &kind;
  layout.job = job;
  if (!kind.naming) {
    layout.unnamed = "trainenv: trainenv has no naming rule for the pods of a " + kind.kind +
                     " (owner kind " + quote(kind.name) + " has no naming)";
    return;
  }
  layout.naming = &*kind.naming;
  const auto& naming = *kind.naming;
  layout.template_first = naming.template_subdomain == pod_naming::template_rule::first;
  if (owner == nullptr) {
    // Not read: the subdomain the controller wrote into the pod is the job's.
    if (pod_subdomain != nullptr && !pod_subdomain->empty()) {
      layout.subdomain = *pod_subdomain;
      layout.template_first = false;
      return;
    }
    // A controller that names pods only when asked to (Volcano's svc plugin), or that can be
    // told not to (JobSet's DNS hostnames), wrote no subdomain into this one: it names none. A
    // bare pod has no controller to ask.
    if ((!naming.requires_any.empty() || !naming.dns_switch.empty()) && has_owner) {
      layout.unnamed = "trainenv: the pod has no spec.subdomain, so its " + kind.kind + " " +
                       std::string(job) + " names no pod";
      return;
    }
  } else {
    if (!naming.requires_any.empty() &&
        std::none_of(naming.requires_any.begin(), naming.requires_any.end(),
                     [&](const member_path& path) { return find_path(*owner, path) != nullptr; })) {
      std::string wanted;
      for (const auto& path : naming.requires_any)
        wanted += (wanted.empty() ? "" : ", ") + path_text(path);
      layout.unnamed = "trainenv: the pods of " + kind.kind + " " + std::string(job) +
                       " have no DNS names: it sets none of " + wanted +
                       " (the controller names its pods only with one of them)";
      return;
    }
    if (!naming.dns_switch.empty()) {
      const auto* on = find_path(*owner, naming.dns_switch);
      if (on != nullptr && on->is_boolean() && !on->get<bool>()) {
        layout.templates_only = kind.kind + " " + std::string(job) + " sets " +
                                path_text(naming.dns_switch) + ": false";
        return;
      }
    }
    if (naming.not_ready)
      layout.not_ready_published = publishes_not_ready(*naming.not_ready, *owner);
    const json* subdomain =
        !naming.subdomain.empty() ? find_path(*owner, naming.subdomain) : nullptr;
    if (subdomain != nullptr && subdomain->is_string() &&
        !subdomain->get_ref<const std::string&>().empty()) {
      layout.subdomain = subdomain->get<std::string>();
      return;
    }
  }
  if (naming.subdomain_default) {
    variable_values values;
    values.set(variable::job, std::string(job));
    auto rendered = naming.subdomain_default->render(values);
    if (rendered) layout.subdomain = std::move(*rendered);
  }
}

}  // namespace trainenv::core
