#include "trainenv/core/job/topology.hpp"

#include <algorithm>
#include <cctype>

#include "topology_detail.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/core/text/quantity.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;
using namespace topology_detail;  // NOLINT(google-build-using-namespace): this file's own detail

result<std::string> resolve_job(const pod_view& pod, const owner_kind_set& kinds) {
  const auto found = first_of({
      controller_label(pod, kinds, &pod_labels::job),
      {pod.subdomain(), "spec.subdomain", {}},
  });
  if (found.value == nullptr) {
    return error{"trainenv: cannot tell the job name: set " +
                 pod_label_names(kinds, &pod_labels::job) + ", or spec.subdomain"};
  }
  // It names hosts, hostfile lines, Secrets and ConfigMaps: a DNS name, or nothing of it is used.
  if (!is_dns_subdomain(*found.value)) {
    return error{"trainenv: " + found.source() + " is " + quote(*found.value) +
                 ": not a DNS name (lower-case letters, digits, '-' and '.')"};
  }
  return std::string(*found.value);
}

using role_counts = std::vector<std::pair<std::string, std::int64_t>>;

}  // namespace

std::string pod_role(const pod_view& pod, const owner_kind_set& kinds) {
  const auto found = first_of({
      label_or_annotation(pod, keys::role),
      controller_label(pod, kinds, &pod_labels::role),
  });
  return found.value != nullptr ? std::string(*found.value) : std::string("node");
}

bool topology::in_scope(const role_scope& roles) const {
  return roles.matches(role, training_role) || (launches && roles.matches(launcher_role, false));
}

std::string pod_entry(const pod_view& pod, const owner_kind_set& kinds) {
  const auto found = controller_label(pod, kinds, &pod_labels::role);
  return found.value != nullptr ? std::string(*found.value) : pod_role(pod, kinds);
}

namespace {

// nullopt value with no error: no source present.
result<std::optional<std::int64_t>> read_index(const pod_view& pod, const owner_kind_set& kinds) {
  const auto found = controller_label(pod, kinds, &pod_labels::index);
  if (found.value != nullptr) {
    const auto n = parse_decimal(trim(*found.value), max_count);
    if (!n) {
      return error{"trainenv: " + found.source() + " is " + quote(*found.value) +
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

}  // namespace

result<role_counts> parse_replicas(std::string_view text) {
  role_counts out;
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

// The instance type the pod asks to be placed on: its node selector's, else the one value of a
// required node affinity term on node.kubernetes.io/instance-type; empty when it names none.
std::string instance_type(const pod_view& pod) {
  constexpr std::string_view key = "node.kubernetes.io/instance-type";
  const auto& spec = pod.spec();
  if (const auto chosen = string_member(member(spec, "nodeSelector"), key))
    return std::string(*chosen);
  const auto terms = member(member(member(member(spec, "affinity"), "nodeAffinity"),
                                   "requiredDuringSchedulingIgnoredDuringExecution"),
                            "nodeSelectorTerms");
  for (const auto term : terms) {
    for (const auto e : member(term, "matchExpressions")) {
      const auto values = member(e, "values");
      if (string_member(e, "key") != key || string_member(e, "operator") != "In" ||
          values.size() != 1)
        continue;
      if (values[0].is_string()) return std::string(values[0].string());
    }
  }
  return {};
}

// Processes per node, the processes-per-node count and the GPUs: the annotation, else what the
// TrainJob or its runtime sets (so that Trainer's own PET_NPROC_PER_NODE agrees), else the
// policy's default, resolved against the target container's resources, and the
// accelerators of the list.
result<bool> resolve_processes(const pod_view& pod, const policy& p, const json_ref& target,
                               const trainer_settings* trainer,
                               const std::vector<accelerator>* accelerators, topology& t) {
  nproc_setting nproc = p.default_nproc;
  std::optional<std::string_view> text;
  if (const auto* given = pod.annotation(keys::nproc_per_node)) text = *given;
  const bool from_pod = text.has_value();
  std::string source = annotation_name(keys::nproc_per_node);
  if (!text && trainer != nullptr && trainer->num_proc_per_node) {
    text = *trainer->num_proc_per_node;
    source = trainer->nproc_source;
    t.nproc_one_means_gpus = trainer->nproc_one_means_gpus;
  }
  if (text) {
    const auto parsed = nproc_setting::parse(trim(*text));
    if (!parsed) {
      return error{"trainenv: " + source + " is " + quote(*text) +
                   "; expected a whole number >= 1, auto, cpu or gpu"};
    }
    nproc = *parsed;
    if (!from_pod) t.sources.push_back({"nprocPerNode", std::string(*text), source});
  }
  if (nproc.kind == nproc_setting::mode::count) t.nproc_count = nproc.count;
  if (auto gpus = gpu_count(target)) {
    t.gpus_per_node = *gpus;
  } else {
    t.gpus_unknown_reason = gpus.message();
  }
  const nproc_context context{accelerators, instance_type(pod)};
  auto resolved = resolve_nproc(nproc, target, context);
  if (!resolved) return std::move(resolved).take_error();
  t.nproc_per_node = *resolved;
  if (!resolved->counted_from.empty())
    t.sources.push_back({"nprocPerNode", resolved->text(), resolved->counted_from});
  if (!resolved->warning.empty()) t.notes.push_back(resolved->warning);
  return true;
}

// The GPUs of one pod of the layout's first node role, as its pod template in the owner asks
// for them: what a launcher's MPI slots count. nullopt when no template says.
std::optional<std::int64_t> worker_template_gpus(const job_layout& layout, const policy& p) {
  for (const auto r : layout.nodes) {
    const auto* tmpl = layout.roles[r].pod_template;
    if (tmpl == nullptr || layout.roles[r].name == launcher_role) continue;
    const auto* spec = member(*tmpl, "spec");
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

// The pod's place in its role: its completion index within its Job, plus the Jobs before its own
// (JobSet's job-index label) times the pods of one Job.
result<bool> resolve_index(const pod_view& pod, const owner_kind_set& kinds, bool jobs_known,
                           topology& t) {
  auto index = read_index(pod, kinds);
  if (!index) return std::move(index).take_error();
  const auto& role = t.layout.roles[t.role_at];
  const auto job_label = controller_label(pod, kinds, &pod_labels::job_index);
  auto job = read_number(job_label.value, job_label.source(), 0, max_count);
  if (!job) return std::move(job).take_error();
  if (jobs_known && role.jobs > 1 && !*job) {
    return error{"trainenv: role " + quote(role.name) + " of " + t.layout.source + " runs " +
                 std::to_string(role.jobs) + " Jobs, and the pod has no " +
                 pod_label_names(kinds, &pod_labels::job_index) +
                 " to say which is its own; expected a whole number >= 0"};
  }
  t.job_index = job->value_or(0);
  if (jobs_known && t.job_index > 0 && t.job_index >= role.jobs) {
    return error{"trainenv: " + job_label.source() + " is " + std::to_string(t.job_index) +
                     ", but role " + quote(role.name) + " runs " + std::to_string(role.jobs) +
                     " Job(s) (" + t.layout.source + ")",
                 contradicts_owner};
  }
  if (*index) t.index = t.job_index * role.pods_per_job() + **index;
  if (!t.index && role.pods == 1) t.index = 0;
  if (!t.index) {
    t.index_unknown_reason =
        "trainenv: cannot tell this pod's index in role " + quote(t.role) +
        (role.pods > 1 ? " (" + std::to_string(role.pods) + " pods)" : std::string()) + ": set " +
        pod_label_names(kinds, &pod_labels::index);
  }
  return true;
}

// Which variables a pod whose owners were not read cannot trust from its annotations and labels
// alone (docs/contract.md §2: an annotation fixes only what it names).
variable_mask open_without_owner(const pod_view& pod, const policy& p, const topology& t) {
  constexpr variable_mask roles_open =
      variable_bit(variable::num_nodes) | variable_bit(variable::world_size) |
      variable_bit(variable::rank) | variable_bit(variable::node_rank) |
      variable_bit(variable::master_addr) | variable_bit(variable::host) |
      variable_bit(variable::subdomain) | variable_bit(variable::slots) | replicas_bit;
  const bool replicas_given = pod.annotation(keys::replicas) != nullptr;
  const bool nodes_given = pod.annotation(keys::num_nodes) != nullptr;
  const auto& own = t.layout.roles[t.role_at];
  // Whether the owner's controller mounts the SSH keys (Volcano's ssh plugin) only it tells.
  variable_mask open = 0;
  if (!t.ssh_keys_provided && t.layout.kind != nullptr && !t.layout.kind->ssh_keys.empty())
    open |= variable_bit(variable::ssh_keys_provided);
  // Nor does any but the owner tell the port a job plugin opens for sshd.
  if (t.layout.kind != nullptr &&
      std::any_of(t.layout.kind->plugins.begin(), t.layout.kind->plugins.end(),
                  [](const job_plugin& plugin) { return !plugin.ssh_port_flag.empty(); }))
    open |= variable_bit(variable::ssh_port);
  // Only the replicas annotation names every role; the number of nodes alone names the pod's
  // own role, for a policy whose layout is that one role.
  if (!replicas_given && !(nodes_given && own.node && p.default_replicas.empty()))
    return open | roles_open;
  if (!t.layout.unnamed.empty()) {
    open |= variable_bit(variable::master_addr) | variable_bit(variable::host) |
            variable_bit(variable::subdomain);
  }
  if (!t.layout.host_groups()) open |= variable_bit(variable::host);
  if (!own.node && !t.nproc_count) open |= variable_bit(variable::slots);  // the workers' GPUs
  return open;
}

// Where the MPI SSH keys go: the runtime's sshAuthMountPath, else the pod's annotation (a
// hand-written MPI job whose user is not root), else the policy's default.
std::string ssh_mount_path(const pod_view& pod, const policy& p, const trainer_settings* trainer) {
  if (trainer != nullptr && trainer->ssh_auth_mount_path) return *trainer->ssh_auth_mount_path;
  if (const auto* given = non_empty(pod.annotation(keys::ssh_auth_mount_path)))
    return std::string(trim(*given));
  return p.default_ssh_auth_mount_path;
}

// The private key's mode (docs/contract.md §3, SSH keys): OpenSSH refuses a key its own user
// owns when others can read it, so 0600 where root reads the root-owned file; 0640 only when a
// non-root user reads it through the pod's fsGroup, away from root's home.
std::int64_t ssh_key_mode(const pod_view& pod, const std::string& mount_path) {
  const auto fs_group = member(member(pod.spec(), "securityContext"), "fsGroup");
  const bool under_root = mount_path == "/root" || mount_path.rfind("/root/", 0) == 0;
  return fs_group.is_integer() && !under_root ? 0640 : 0600;
}

// Where an MPI job's SSH keys come from (docs/contract.md §2.2): the image (trainenv.io/ssh-keys:
// "image") or the owner's controller (Volcano's ssh plugin) bring them, and nothing is mounted;
// else the Secret trainenv.io/ssh-secret names, else the policy's default over the job's name.
result<bool> resolve_ssh_keys(const pod_view& pod, const policy& p, topology& t) {
  const auto* given = non_empty(pod.annotation(keys::ssh_keys));
  if (given != nullptr) {
    if (*given != "image" && *given != "secret") {
      return error{"trainenv: annotation " + std::string(keys::ssh_keys) + " is " + quote(*given) +
                   "; expected \"image\" (the image brings its keys) or \"secret\""};
    }
    if (*given == "image") {
      t.ssh_keys_provided = true;
      t.sources.push_back({"sshKeys", "image", annotation_name(keys::ssh_keys)});
    }
  }
  // "secret": the Secret is mounted, whatever the controller brings.
  if (given == nullptr && !t.layout.ssh_keys_by.empty()) {
    t.ssh_keys_provided = true;
    t.sources.push_back({"sshKeys", "the controller's", t.layout.ssh_keys_by});
  }
  if (const auto* secret = non_empty(pod.annotation(keys::ssh_secret))) {
    if (!is_dns_subdomain(*secret)) {
      return error{"trainenv: annotation " + std::string(keys::ssh_secret) + " is " +
                   quote(*secret) + "; expected a Secret's name (a DNS subdomain)"};
    }
    t.ssh_secret = std::string(*secret);
  } else if (p.default_ssh_secret) {
    variable_values job;
    job.set(variable::job, t.job);
    auto rendered = p.default_ssh_secret->render(job);
    if (!rendered) return std::move(rendered).take_error();
    t.ssh_secret = std::move(*rendered);
  }
  return true;
}

// Whether the pod's index fits the pods its role is given and JobSet's label of its Jobs agrees
// with the owner read (docs/contract.md §2.1). `counted`: its role is listed and the counts are
// the pod's to answer for.
result<bool> check_place(const pod_view& pod, const policy& p, const topology_sources& src,
                         const topology& t, bool counted) {
  const auto& layout = t.layout;
  const auto& own = layout.roles[t.role_at];
  // A policy that uses no count never learns the job's size (no owner is read for it), so an
  // index past the pods its role is given says nothing about the pod.
  // Nor does the default count of a pod whose owners, not read, know its real count.
  if (t.index && counted && *t.index >= own.pods && uses_counts(p)) {
    const bool by_owner = src.owners != nullptr;
    return error{
        "trainenv: index " + std::to_string(*t.index) + " of role " + quote(t.role) +
            " is out of range: " + layout.source + " gives it " + std::to_string(own.pods) +
            " pod(s); set " +
            (by_owner || pod.annotation(keys::replicas) != nullptr ? std::string(keys::replicas)
                                                                   : std::string(keys::num_nodes)) +
            " to the real count",
        by_owner ? contradicts_owner : 400};
  }
  // JobSet's label of the replicas the pod's replicatedJob had when its Job was made: the owner
  // read must say the same (docs/contract.md §2.1).
  if (src.owners != nullptr) {
    const auto jobs_label = controller_label(pod, kinds_of(src), &pod_labels::jobs);
    auto labelled = read_number(jobs_label.value, jobs_label.source(), 1, max_count);
    if (labelled && *labelled && **labelled != own.jobs) {
      return error{"trainenv: " + jobs_label.source() + " is " + std::to_string(**labelled) +
                       ", but " + layout.source + " runs role " + quote(t.role) + " in " +
                       std::to_string(own.jobs) + " Job(s)",
                   contradicts_owner};
    }
  }
  return true;
}

// The pod's own DNS name, the workers' GPUs an MPI launcher counts, and where the counts came
// from (the sources the log line and the preview show).
void name_and_sources(const pod_view& pod, const policy& p, const topology_sources& src,
                      std::optional<std::int64_t> nodes_annotation, topology& t) {
  const auto& layout = t.layout;
  const auto& own = layout.roles[t.role_at];
  const auto* hostname = non_empty(pod.hostname());
  const auto* subdomain = non_empty(pod.subdomain());
  if (hostname != nullptr && subdomain != nullptr)
    t.own_name = std::string(*hostname) + "." + std::string(*subdomain);
  if (!own.node && src.owners != nullptr) {
    if (const auto gpus = worker_template_gpus(layout, p)) {
      t.worker_gpus = *gpus;
      t.sources.push_back(
          {"workerGpus", std::to_string(*gpus), src.owners->owner + " pod template"});
    }
  }
  t.sources.push_back({"numNodes", std::to_string(t.num_nodes),
                       nodes_annotation ? annotation_name(keys::num_nodes) : layout.source});
  t.sources.push_back({"replicas", replicas_text(layout), layout.source});
}

}  // namespace

result<topology> resolve_topology(const pod_view& pod, const policy& p, std::size_t target_index,
                                  const topology_sources& src) {
  topology t;
  t.container = target_index;
  const auto target = pod.containers()[t.container];

  const auto& kinds = kinds_of(src);
  auto job = resolve_job(pod, kinds);
  if (!job) return std::move(job).take_error();
  t.job = std::move(*job);
  // A pod with no namespace (a file given to preview) is created in the default one.
  const auto* ns = non_empty(pod.namespace_name());
  t.namespace_name = ns != nullptr ? std::string(*ns) : std::string("default");
  t.role = pod_role(pod, kinds);

  auto port = read_int_annotation(pod, keys::master_port, 1, 65535);
  if (!port) return std::move(port).take_error();
  if (auto nproc = resolve_processes(pod, p, target, src.trainer, src.accelerators, t); !nproc)
    return std::move(nproc).take_error();
  if (src.elastic != nullptr) {
    t.elastic = src.elastic->elastic;
    t.c10d = t.elastic || src.elastic->rendezvous_c10d;
    t.notes.insert(t.notes.end(), src.elastic->notes.begin(), src.elastic->notes.end());
  }
  t.job_uid = src.job_uid;
  t.ssh_auth_mount_path = ssh_mount_path(pod, p, src.trainer);
  t.ssh_key_mode = ssh_key_mode(pod, t.ssh_auth_mount_path);
  t.cluster_domain = src.cluster_domain;

  auto nodes_annotation = read_int_annotation(pod, keys::num_nodes, 1, max_count);
  if (!nodes_annotation) return std::move(nodes_annotation).take_error();

  if (auto ok = build_layout(pod, p, src, t.role, nodes_annotation->value_or(p.default_num_nodes),
                             t.layout);
      !ok)
    return std::move(ok).take_error();
  auto& layout = t.layout;
  // A pod whose own labels name no role plays its entry's: the owner's template or job plugin
  // may give that entry a role of its own (Volcano's mpi plugin: --master=mpimaster, the launcher).
  if (src.owners != nullptr && label_or_annotation(pod, keys::role).value == nullptr) {
    if (const auto at = layout.index_of_entry(pod_entry(pod, kinds)))
      t.role = layout.roles[*at].name;
  }
  t.master_port = port->value_or(layout.plugin_master_port.value_or(p.default_master_port));
  auto role_listed = find_own_role(pod, p, src, t.role, layout);
  if (!role_listed) return std::move(role_listed).take_error();
  world_rules rules;
  rules.read_from_owner = src.owners != nullptr;
  rules.trainer_workers = src.trainer != nullptr;
  settle_roles(layout, p, rules,
               src.owners != nullptr ? src.owners->coordinator : std::optional<coordinator_pod>());
  if (!layout.coordinator_note.empty()) t.notes.push_back(layout.coordinator_note);
  if (t.elastic && (p.variables_used & variable_bit(variable::elastic)) == 0) {
    t.notes.push_back("trainenv: policy " + quote(p.name) + " has no elastic mode: the job (" +
                      t.elastic->source + ") is wired statically, for its size now");
  }
  t.role_at = *layout.index_of(t.role);
  // The counts are the pod's to answer for when they come from its owner, its annotations, or
  // (a bare pod) the policy's defaults; not the defaults of a pod whose owner was not read.
  const bool counts_known = src.owners != nullptr || !src.has_owner ||
                            pod.annotation(keys::replicas) != nullptr || *nodes_annotation;
  if (src.owners == nullptr && counts_known) {
    if (auto ok = own_jobs_from_labels(pod, kinds, t.role_at, layout); !ok)
      return std::move(ok).take_error();
  } else if (*nodes_annotation) {
    if (auto ok = apply_num_nodes(**nodes_annotation, layout); !ok)
      return std::move(ok).take_error();
  }
  const auto& own = layout.roles[t.role_at];
  t.training_role = own.training;

  if (auto ok = resolve_index(pod, kinds, counts_known, t); !ok) return std::move(ok).take_error();
  if (auto ok = check_place(pod, p, src, t, *role_listed && counts_known); !ok)
    return std::move(ok).take_error();

  t.num_nodes = nodes_annotation->value_or(layout.node_count());
  if (t.elastic && counts_known && layout.node_count() > t.elastic->max) {
    t.notes.push_back("trainenv: the job runs " + std::to_string(layout.node_count()) +
                      " nodes, more than its elastic maximum " + std::to_string(t.elastic->max) +
                      " (" + t.elastic->source + "): torchrun admits at most that many");
  }
  t.counts_known = counts_known;
  if (t.training_role) t.world_size = layout.training_pods();
  if (t.index) t.node_rank = layout.node_rank(t.role_at, *t.index);
  t.launches = t.role == launcher_role ||
               (p.hostfile && counts_known && t.node_rank == 0 && !layout.index_of(launcher_role));
  if (auto ok = resolve_ssh_keys(pod, p, t); !ok) return std::move(ok).take_error();
  name_and_sources(pod, p, src, *nodes_annotation, t);
  if (src.owners == nullptr && src.has_owner) t.owner_open = open_without_owner(pod, p, t);
  t.master = layout.master();
  return t;
}

}  // namespace trainenv::core
