#include "trainenv/core/decide/wait_plan.hpp"

#include <algorithm>
#include <array>

#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/policy/policy_objects.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// The switches that say how the pod checks (docs/contract.md §3.1), the first that says
// something winning: serve --wait off, trainenv.io/wait on the pod or an owner, the policy's
// check for the pod's role. None: each row's own check.
struct switched {
  std::optional<wait_check> forced;
  std::string decided_by;
};

result<switched> read_switches(const wait_request& r) {
  const auto annotated = find_job_annotation(r.pod, r.owners, keys::wait);
  std::optional<wait_check> check;
  if (annotated) {
    check = parse_wait_check(annotated->value);
    if (!check) {
      return error{"trainenv: " + annotated->describe(keys::wait) + " is " +
                   quote(annotated->value) +
                   "; expected off, dns (the names resolve) or connect (and their ports accept)"};
    }
  }
  const auto policy_text = "policy " + quote(r.p.name);
  if (!r.enabled) return switched{wait_check::off, "serve --wait off"};
  if (check) return switched{check, annotated->describe(keys::wait)};
  if (r.p.wait) {
    for (const auto& [role, role_check] : r.p.wait->roles) {
      if (role == r.t.role) return switched{role_check, policy_text + " for role " + quote(role)};
    }
  }
  return switched{std::nullopt, policy_text};
}

result<std::int64_t> read_timeout(const wait_request& r) {
  if (const auto annotated = find_job_annotation(r.pod, r.owners, keys::wait_timeout)) {
    const auto seconds = parse_duration_seconds(annotated->value, max_wait_seconds);
    if (!seconds) {
      return error{"trainenv: " + annotated->describe(keys::wait_timeout) + " is " +
                   quote(annotated->value) +
                   "; expected seconds or a duration from 1 s to 24h, e.g. \"600\" or \"10m\""};
    }
    return *seconds;
  }
  return r.p.wait ? r.p.wait->timeout_seconds : wait_block{}.timeout_seconds;
}

// A hostNetwork pod resolves with the node's DNS unless its dnsPolicy is ClusterFirstWithHostNet
// (ClusterFirst, what the API server writes when none is given, means the node's for it): it
// would never find its peers' names. The one value trainenv overwrites (docs/contract.md §3.1).
void host_network_dns(const wait_request& r, wait_outcome& out) {
  const auto spec = r.pod.spec();
  if (!member(spec, "hostNetwork").is_true() || r.t.layout.node_count() <= 1) return;
  const auto policy = string_member(spec, "dnsPolicy");
  if (!policy || *policy == "ClusterFirst") {
    out.dns_policy = "ClusterFirstWithHostNet";
    out.warnings.push_back("trainenv: set dnsPolicy ClusterFirstWithHostNet (was " +
                           std::string(policy ? *policy : "none") +
                           "): with ClusterFirst a hostNetwork pod cannot resolve its peers");
  } else if (*policy != "ClusterFirstWithHostNet") {
    out.warnings.push_back("trainenv: kept dnsPolicy " + std::string(*policy) +
                           " on a hostNetwork pod: its peers' names resolve only in the "
                           "cluster's DNS");
  }
}

// Names published only once Ready, and a readiness probe on the trainer: a peer that dials it
// before it is Ready (its probe may wait for the very rendezvous) finds no name.
void ready_only_names(const wait_request& r, wait_outcome& out) {
  const auto& layout = r.t.layout;
  if (layout.not_ready_published.value_or(true) || layout.node_count() <= 1) return;
  const auto container = r.pod.containers()[r.t.container];
  if (!member(container, "readinessProbe")) return;
  out.warnings.push_back("trainenv: container " + quote(string_or_empty(container, "name"), 32) +
                         " has a readinessProbe, and its name is published only once Ready: "
                         "publish not-ready addresses");
}

// A service mesh whose proxy runs as a regular container (not a native sidecar): its init
// container or CNI plugin redirects every connection, an init container's too, to a proxy that
// is not running yet.
enum class mesh : std::uint8_t { none, istio, other };

mesh classic_mesh(const pod_view& pod) {
  constexpr std::array<std::string_view, 2> istio_init = {"istio-init", "istio-validation"};
  constexpr std::array<std::string_view, 2> linkerd_init = {"linkerd-init",
                                                            "linkerd-network-validator"};
  bool istio_redirect = false;
  bool linkerd_redirect = false;
  for (const auto c : member(pod.spec(), "initContainers")) {
    const auto name = string_or_empty(c, "name");
    const bool native = string_or_empty(c, "restartPolicy") == "Always";
    if (name == "istio-proxy" || name == "linkerd-proxy") {
      if (native) return mesh::none;  // the wait runs after it, through it
    }
    istio_redirect =
        istio_redirect || std::find(istio_init.begin(), istio_init.end(), name) != istio_init.end();
    linkerd_redirect = linkerd_redirect || std::find(linkerd_init.begin(), linkerd_init.end(),
                                                     name) != linkerd_init.end();
  }
  for (const auto c : pod.containers()) {
    const auto name = string_or_empty(c, "name");
    if (name == "istio-proxy") return mesh::istio;
    if (name == "linkerd-proxy") return mesh::other;
  }
  return istio_redirect ? mesh::istio : linkerd_redirect ? mesh::other : mesh::none;
}

// The port the workers' sshd listens on: trainenv.io/ssh-port, else the one a job plugin opens,
// else the workers' readinessProbe.tcpSocket.port (Trainer's DeepSpeed runtime: 2222), else 22.
result<std::int64_t> ssh_port(const wait_request& r) {
  if (const auto annotated = find_job_annotation(r.pod, r.owners, keys::ssh_port)) {
    const auto port = parse_decimal(annotated->value, 65535);
    if (!port || *port < 1) {
      return error{"trainenv: " + annotated->describe(keys::ssh_port) + " is " +
                   quote(annotated->value) + "; expected a port number from 1 to 65535"};
    }
    return *port;
  }
  const auto& layout = r.t.layout;
  if (layout.plugin_ssh_port) return *layout.plugin_ssh_port;
  for (const auto role : layout.nodes) {
    const auto* pod_template = layout.roles[role].pod_template;
    if (pod_template == nullptr || layout.roles[role].name == launcher_role) continue;
    const auto* spec = member(*pod_template, "spec");
    const auto* containers = spec != nullptr ? member(*spec, "containers") : nullptr;
    if (containers == nullptr || !containers->is_array() || containers->empty()) continue;
    const json* target = &containers->front();
    for (const auto& c : *containers) {
      if (c.is_object() && string_or_empty(c, "name") == r.p.container) target = &c;
    }
    if (!target->is_object()) continue;
    const auto* probe = member(*target, "readinessProbe");
    const auto* socket =
        probe != nullptr && probe->is_object() ? member(*probe, "tcpSocket") : nullptr;
    const auto* port = socket != nullptr && socket->is_object() ? member(*socket, "port") : nullptr;
    if (port != nullptr && port->is_number_integer()) return port->get<std::int64_t>();
    const auto* ports = member(*target, "ports");
    if (port == nullptr || !port->is_string() || ports == nullptr || !ports->is_array()) continue;
    for (const auto& named : *ports) {  // a named port of the container
      const auto* number = named.is_object() ? member(named, "containerPort") : nullptr;
      if (string_or_empty(named, "name") == port->get_ref<const std::string&>() &&
          number != nullptr && number->is_number_integer())
        return number->get<std::int64_t>();
    }
  }
  return default_ssh_port;
}

// The volume mount that gives the launcher its hostfile (Trainer's ConfigMap, trainenv's own, or
// the user's): the wait reads the same file, read-only. None when no volume holds it.
std::optional<json> hostfile_mount(const wait_request& r, const wants& want) {
  const auto& path = r.p.hostfile->path;
  const auto dir = path.substr(0, path.rfind('/'));
  const auto covers = [&](std::string_view at) {
    while (at.size() > 1 && at.back() == '/') at.remove_suffix(1);
    return at == dir || at == path;
  };
  for (const auto m : member(r.pod.containers()[r.t.container], "volumeMounts")) {
    if (!covers(string_or_empty(m, "mountPath"))) continue;
    json mount = {{"name", string_or_empty(m, "name")},
                  {"mountPath", string_or_empty(m, "mountPath")},
                  {"readOnly", true}};
    if (const auto sub = string_member(m, "subPath")) mount["subPath"] = *sub;
    return mount;
  }
  for (const auto& m : want.containers.front().mounts) {
    if (covers(string_or_empty(m, "mountPath"))) {
      json mount = m;
      mount["readOnly"] = true;
      return mount;
    }
  }
  return std::nullopt;
}

// The pod's own name as its peers dial it: the one its layout gives its place, else its own.
std::string own_name(const topology& t) {
  if (t.counts_known && t.index && *t.index < t.layout.roles[t.role_at].pods) {
    if (auto name = t.layout.dns_name(t.role_at, *t.index)) return *name;
  }
  return t.own_name;
}

wait_check applied(wait_check row, const switched& s) {
  return s.forced ? *s.forced : row;
}

// The rows of docs/contract.md §3.1's table that apply to this pod, into `plan`; the reason in
// words when none does.
result<std::string> fill_rows(const wait_request& r, const wants& want, const switched& s,
                              wait_plan& plan) {
  const auto& t = r.t;
  const auto& block = *r.p.wait;
  const bool own_before_ready = t.layout.not_ready_published.value_or(false);
  if (t.launches && block.hostfile && r.p.hostfile) {
    const auto self = own_name(t);
    const bool is_node = t.node_rank.has_value();
    if (t.layout.node_count() - (is_node ? 1 : 0) <= 0)
      return std::string("its hostfile names no host but itself");
    auto mount = hostfile_mount(r, want);
    if (!mount) return std::string("its hostfile is in no volume the wait could read");
    auto port = ssh_port(r);
    if (!port) return std::move(port).take_error();
    plan.hostfile = r.p.hostfile->path;
    plan.hostfile_port = applied(*block.hostfile, s) == wait_check::connect ? *port : 0;
    plan.skip = self;
    if (own_before_ready && !self.empty()) plan.targets.push_back({self, 0});
    return std::string();
  }
  if (!block.master) return std::string("policy " + quote(r.p.name) + " has no master row");
  if (!t.node_rank) return "role " + quote(t.role) + " is not a node of the job";
  if (t.layout.node_count() <= 1) return std::string("a world of one pod");
  const bool rank0 = *t.node_rank == 0;
  auto name = t.elastic || t.c10d ? t.rendezvous_host() : t.master;
  if (!name) return "its master has no DNS name (" + name.message() + ")";
  if (rank0) {
    // It dials its own name too; waiting on it where it needs this pod Ready is a deadlock.
    if (!own_before_ready)
      return std::string("node rank 0, whose own name its owner publishes only once Ready");
    plan.targets.push_back({*name, 0});
    return std::string();
  }
  const auto row = t.elastic ? wait_check::connect : *block.master;
  plan.targets.push_back({*name, applied(row, s) == wait_check::connect ? t.master_port : 0});
  return std::string();
}

// Which of the two waits the pod's init containers hold already: Volcano's and trainenv's own.
struct present_waits {
  bool volcano = false;
  bool own = false;
};

present_waits waits_present(const pod_view& pod) {
  present_waits found;
  for (const auto c : member(pod.spec(), "initContainers")) {
    const auto name = string_or_empty(c, "name");
    found.volcano = found.volcano || name == "wait-for-master";
    found.own = found.own || name == wait_container_name;
  }
  return found;
}

// The container's args, what `trainenv wait` reads (docs/contract.md §3.1), appended to `text` as
// JSON strings; one scratch string for all of them.
void append_wait_args(std::string& text, const wait_plan& plan, std::string_view doctor,
                      std::string_view namespace_name) {
  std::string arg;
  bool first = true;
  const auto add = [&](std::string_view flag, std::string_view value, std::int64_t port = 0) {
    arg.assign(flag);
    arg += value;
    if (port != 0) {
      arg += ':';
      arg += std::to_string(port);
    }
    if (!first) text += ',';
    first = false;
    append_json_string(text, arg, json::error_handler_t::replace);
  };
  add("--timeout=", std::to_string(plan.timeout_seconds));
  if (!doctor.empty()) add("--job=", doctor);
  if (!namespace_name.empty()) add("--namespace=", namespace_name);
  for (const auto& target : plan.targets) {
    if (target.port == 0) {
      add("--resolve=", target.host);
    } else {
      add("--connect=", target.host, target.port);
    }
  }
  if (!plan.hostfile.empty()) {
    add("--hostfile=", plan.hostfile);
    if (plan.hostfile_port != 0) add("--hostfile-port=", std::to_string(plan.hostfile_port));
    if (!plan.skip.empty()) add("--skip=", plan.skip);
  }
}

// The init container as the patch carries it: the policy's text, this pod's arguments, image,
// user and, for an MPI launcher, its hostfile's mount (docs/contract.md §3.1).
init_container_want wait_container(const wait_request& r, const wants& want, const wait_plan& plan,
                                   std::int64_t user) {
  const auto& parts = r.p.wait->container;
  init_container_want out{std::string(wait_container_name), R"({"args":[)", {}};
  auto& text = out.text;
  append_wait_args(text, plan, r.doctor, r.t.namespace_name);
  text += ']';
  text += parts.after_args;
  append_json_string(text, r.image, json::error_handler_t::replace);
  text += parts.after_image;
  text += user == wait_user ? parts.security : wait_security_context(user).dump();
  text += parts.tail;
  if (!plan.hostfile.empty()) {
    if (auto mount = hostfile_mount(r, want)) {
      out.volumes.push_back(string_or_empty(*mount, "name"));
      text += R"(,"volumeMounts":[)";
      append_json(text, *mount);
      text += ']';
    }
  }
  text += '}';
  return out;
}

}  // namespace

result<wait_outcome> plan_wait(const wait_request& r, const wants& want) {
  wait_outcome out;
  // Every switch is checked whatever the others say: a bad value is refused, not ignored.
  auto s = read_switches(r);
  if (!s) return std::move(s).take_error();
  auto timeout = read_timeout(r);
  if (!timeout) return std::move(timeout).take_error();
  host_network_dns(r, out);
  ready_only_names(r, out);
  const auto none = [&out](no_wait reason, std::string why) {
    out.reason = reason;
    out.why = std::move(why);
    return std::move(out);
  };
  if (!r.p.wait) return none(no_wait::no_policy_wait, "policy " + quote(r.p.name) + " has none");
  if (s->forced == wait_check::off) return none(no_wait::switched_off, s->decided_by + " says off");
  const auto present = waits_present(r.pod);
  if (present.volcano) return none(no_wait::waits_already, "it has Volcano's wait-for-master");

  wait_plan plan;
  plan.timeout_seconds = *timeout;
  plan.decided_by = s->decided_by;
  auto why = fill_rows(r, want, *s, plan);
  if (!why) return std::move(why).take_error();
  if (plan.targets.empty() && plan.hostfile.empty()) return none(no_wait::nothing_to_dial, *why);

  std::int64_t user = wait_user;
  const bool connects = plan.hostfile_port != 0 ||
                        std::any_of(plan.targets.begin(), plan.targets.end(),
                                    [](const wait_target& target) { return target.port != 0; });
  switch (connects ? classic_mesh(r.pod) : mesh::none) {
    case mesh::istio:
      user = istio_proxy_user;
      break;
    case mesh::other:
      for (auto& target : plan.targets) target.port = 0;
      plan.hostfile_port = 0;
      out.warnings.emplace_back(
          "trainenv: trainenv-wait checks names only: the mesh proxy is not a native sidecar and "
          "would take its connections");
      break;
    case mesh::none:
      break;
  }
  plan.present = present.own;
  if (!plan.present) out.container = wait_container(r, want, plan, user);
  out.plan = std::move(plan);
  return out;
}

}  // namespace trainenv::core
