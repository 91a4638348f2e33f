#include "trainenv/core/preview/job_preview.hpp"

#include <algorithm>
#include <memory>
#include <set>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// The values a preview shows for each pod: what its place in the job decides.
constexpr std::uint32_t shown_variables = layout_variables | variable_bit(variable::master_port) |
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

// "host:port" -> host and port; a host alone when there is no ':'.
std::pair<std::string, std::string> split_endpoint(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return {endpoint, {}};
  return {endpoint.substr(0, colon), endpoint.substr(colon + 1)};
}

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

// A trainenv hostfile rule ("jobs|pods|head|middle|tail" lines) expanded as its init container
// does (render.hpp).
std::string expand_rule(const std::string& rule) {
  std::string out;
  std::size_t start = 0;
  while (start < rule.size()) {
    auto end = rule.find('\n', start);
    if (end == std::string::npos) end = rule.size();
    std::vector<std::string> fields;
    std::size_t from = start;
    for (int f = 0; f < 4; ++f) {
      const auto bar = rule.find('|', from);
      if (bar == std::string::npos || bar > end) break;
      fields.push_back(rule.substr(from, bar - from));
      from = bar + 1;
    }
    fields.push_back(rule.substr(from, end - from));
    start = end + 1;
    if (fields.size() != 5) continue;
    const bool numbered = fields[0] != "-";
    const auto jobs = numbered ? whole_number(fields[0]).value_or(0) : 1;
    const auto pods = whole_number(fields[1]).value_or(0);
    for (std::int64_t j = 0; j < jobs; ++j) {
      for (std::int64_t i = 0; i < pods; ++i) {
        out += fields[2] + (numbered ? std::to_string(j) : "") + fields[3] + std::to_string(i) +
               fields[4] + "\n";
      }
    }
  }
  return out;
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
        return rule != nullptr ? std::optional(expand_rule(std::string(*rule))) : std::nullopt;
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
  if (pol.hostfile && (p.created.role == launcher_role || pol.hostfile->scope.roles.all)) {
    if (auto text = hostfile_text(view, container, pol.hostfile->path, objects)) {
      p.hostfile = hosts_of(*text);
      p.has_hostfile = true;
      p.values.emplace_back("hostfile", std::to_string(p.hostfile.size()) + " hosts");
    }
  }
}

// "a (pods x, y), b (pod z)": the values pods gave and which gave each.
template <class Value>
std::string grouped(const std::map<Value, std::vector<std::string>>& by_value,
                    std::vector<std::string>& pods) {
  std::string out;
  for (const auto& [value, names] : by_value) {
    if (!out.empty()) out += "; ";
    if constexpr (std::is_same_v<Value, std::string>) {
      out += value;
    } else {
      out += std::to_string(value);
    }
    out += " (" + std::to_string(names.size()) + (names.size() == 1 ? " pod)" : " pods)");
    pods.insert(pods.end(), names.begin(), names.end());
  }
  return out;
}

// Every pod that has `get(p)` agrees on it; else a problem naming the values and pods.
template <class Get>
void check_agree(const std::vector<previewed_pod>& pods, const std::string& what, Get get,
                 std::vector<job_problem>& problems) {
  std::map<std::string, std::vector<std::string>> by_value;
  for (const auto& p : pods) {
    if (const auto& v = get(p)) by_value[*v].push_back(p.created.name);
  }
  if (by_value.size() <= 1) return;
  job_problem problem;
  problem.message = "pods disagree on " + what + ": " + grouped(by_value, problem.pods);
  problems.push_back(std::move(problem));
}

// The values of `get(p)` are 0..N-1, each once.
template <class Get>
std::size_t check_ranks(const std::vector<previewed_pod>& pods, const std::string& what, Get get,
                        std::vector<job_problem>& problems) {
  std::map<std::int64_t, std::vector<std::string>> by_rank;
  for (const auto& p : pods) {
    if (const auto& r = get(p)) by_rank[*r].push_back(p.created.name);
  }
  std::size_t count = 0;
  for (const auto& [rank, names] : by_rank) {
    count += names.size();
    if (names.size() > 1)
      problems.push_back({"pods share " + what + " " + std::to_string(rank), names});
  }
  std::vector<std::int64_t> missing;
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(count) && missing.size() < 5; ++r) {
    if (by_rank.count(r) == 0) missing.push_back(r);
  }
  if (!missing.empty() ||
      (!by_rank.empty() && by_rank.rbegin()->first >= static_cast<std::int64_t>(count))) {
    std::string list;
    for (const auto r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    job_problem problem;
    problem.message = what + "s of the " + std::to_string(count) + " pods are not 0.." +
                      std::to_string(count - 1) + (list.empty() ? "" : ": missing " + list);
    for (const auto& [rank, names] : by_rank) {
      if (rank >= static_cast<std::int64_t>(count))
        problem.pods.insert(problem.pods.end(), names.begin(), names.end());
    }
    problems.push_back(std::move(problem));
  }
  return count;
}

// The master is node rank 0 (RANK 0 where a policy tells no node rank), by its own DNS name; a
// world of one pod may call it localhost.
void check_master(const std::vector<previewed_pod>& pods, bool node_ranks, std::size_t world,
                  std::vector<job_problem>& problems) {
  const previewed_pod* first = nullptr;
  for (const auto& p : pods) {
    if ((node_ranks ? p.node_rank : p.rank) == 0) first = &p;
  }
  for (const auto& p : pods) {
    if (!p.master || (world == 1 && *p.master == "localhost")) continue;
    if (first == nullptr) {
      problems.push_back(
          {"the master address is " + *p.master + ", but no pod has rank 0", {p.created.name}});
      return;
    }
    if (*p.master != first->dns_name) {
      problems.push_back(
          {"the master address " + *p.master + " is not the DNS name of " + first->created.name +
               ", the pod with rank 0 (" +
               (first->dns_name.empty() ? std::string("it has none") : first->dns_name) + ")",
           {p.created.name, first->created.name}});
      return;
    }
  }
}

// Whether a pod is one of an MPI job's workers (docs/contract.md §2.2), from what its controllers
// made of it: for a TrainJob the node role (and the launcher run as a node), as Trainer's MPI
// plugin picks them; else every pod but the launcher (unless it runs as a node), an
// initializer, a prerequisite that completes first and a pod that opts out.
bool is_worker(const created_job& job, const created_pod& c) {
  const bool launcher = c.role == launcher_role;
  if (launcher) return job.launcher_is_node;
  if (job.kind == "TrainJob") return c.role == "node";
  if (!c.step.empty() && c.step != "trainer") return false;
  if (c.prerequisite) return false;
  const pod_view view(c.pod);
  const auto* inject = view.annotation(keys::inject);
  return inject == nullptr || *inject != "false";
}

// The hostfile lists the workers, each once.
void check_hostfiles(const created_job& job, const std::vector<previewed_pod>& pods,
                     std::vector<job_problem>& problems) {
  std::set<std::string> expected;
  std::vector<const previewed_pod*> workers;
  for (const auto& p : pods) {
    if (!is_worker(job, p.created)) continue;
    workers.push_back(&p);
    expected.insert(p.dns_name);
  }
  for (const auto& p : pods) {
    if (!p.has_hostfile) continue;
    std::map<std::string, int> listed;
    for (const auto& host : p.hostfile) ++listed[host];
    for (const auto& [host, times] : listed) {
      if (times > 1) {
        problems.push_back({"the hostfile lists " + host + " " + std::to_string(times) + " times",
                            {p.created.name}});
      }
      if (expected.count(host) == 0) {
        problems.push_back({"the hostfile of " + p.created.name + " lists " + host +
                                ", which is not a worker of the job",
                            {p.created.name}});
      }
    }
    for (const auto* w : workers) {
      if (w->dns_name.empty()) {
        problems.push_back(
            {"worker " + w->created.name + " has no DNS name for the hostfile", {w->created.name}});
      } else if (listed.count(w->dns_name) == 0) {
        problems.push_back({"worker " + w->created.name + " (" + w->dns_name +
                                ") is missing from the hostfile of " + p.created.name,
                            {w->created.name, p.created.name}});
      }
    }
  }
}

// Every pod is named what its layout calls it, and every pod its world counts is a training pod
// (an MPI job's workers need not be): a layout trainenv got wrong shows here, not at rendezvous.
void check_world(const std::vector<previewed_pod>& pods, std::vector<job_problem>& problems) {
  std::set<std::string> world;
  bool workers = false;
  for (const auto& p : pods) {
    if (p.d.allowed && !p.d.layout_name.empty() && !p.dns_name.empty() &&
        p.d.layout_name != p.dns_name) {
      problems.push_back({"pod " + p.created.name + " is named " + p.dns_name +
                              ", but its layout calls it " + p.d.layout_name,
                          {p.created.name}});
    }
    if (!p.d.policy.empty() && world.empty()) {
      world.insert(p.d.world_roles.begin(), p.d.world_roles.end());
      workers = p.d.world_of_workers;
    }
  }
  if (workers) return;
  std::vector<std::string> unmutated;
  for (const auto& p : pods) {
    if (world.count(p.created.role) != 0 && p.d.allowed && p.d.policy.empty())
      unmutated.push_back(p.created.name);
  }
  if (!unmutated.empty()) {
    problems.push_back({"the world counts " + std::to_string(unmutated.size()) +
                            " pod(s) that are not training pods (they pass unchanged)",
                        unmutated});
  }
}

// An elastic job's pods share their bounds and rendezvous, and the endpoint is the full DNS name
// of one of its pods (docs/contract.md §2.3).
void check_rendezvous(const created_job& job, const std::vector<previewed_pod>& pods,
                      std::vector<job_problem>& problems) {
  check_agree(
      pods, "the elastic bounds", [](const previewed_pod& p) { return p.bounds; }, problems);
  check_agree(
      pods, "the rendezvous endpoint", [](const previewed_pod& p) { return p.rendezvous; },
      problems);
  check_agree(
      pods, "the rendezvous id", [](const previewed_pod& p) { return p.rendezvous_id; }, problems);
  for (const auto& p : pods) {
    if (!p.rendezvous) continue;
    const auto host = split_endpoint(*p.rendezvous).first;
    // One pod with no DNS name rendezvous with itself, and can stay so only where it can never
    // grow: bounds of at most one node.
    if (host == "localhost" && p.bounds && p.bounds->substr(p.bounds->find(':') + 1) == "1") {
      continue;
    }
    const bool a_pod = std::any_of(pods.begin(), pods.end(), [&](const previewed_pod& q) {
      return !q.dns_name.empty() &&
             host.rfind(q.dns_name + "." + job.namespace_name + ".svc.", 0) == 0;
    });
    if (!a_pod) {
      problems.push_back(
          {"the rendezvous endpoint " + host + " is no pod of the job", {p.created.name}});
    }
    return;  // they agree (checked above): one is enough
  }
}

}  // namespace

std::vector<job_problem> check_job(const created_job& job, std::vector<previewed_pod>& pods,
                                   const policy_set& policies) {
  std::vector<job_problem> problems;
  for (auto& p : pods) {
    if (!p.d.allowed) problems.push_back({"denied: " + p.d.message, {p.created.name}});
    if (const auto* pol = policies.by_name(p.d.policy); pol != nullptr && p.d.allowed)
      read_values(p, *pol, policies.sidecars(), job.objects);
  }
  // The ranks: 0..N-1, each once; the node rank over the nodes, RANK over the training pods.
  const auto nodes = check_ranks(
      pods, "node rank", [](const previewed_pod& p) { return p.node_rank; }, problems);
  const auto ranked = check_ranks(
      pods, "RANK", [](const previewed_pod& p) { return p.rank; }, problems);
  check_agree(
      pods, "the world size", [](const previewed_pod& p) { return p.world_size; }, problems);
  check_agree(
      pods, "the number of nodes", [](const previewed_pod& p) { return p.num_nodes; }, problems);
  check_agree(
      pods, "the master address", [](const previewed_pod& p) { return p.master; }, problems);
  check_agree(
      pods, "the master port", [](const previewed_pod& p) { return p.master_port; }, problems);
  for (const auto& p : pods) {
    if (p.world_size && ranked > 0 && *p.world_size != std::to_string(ranked)) {
      problems.push_back({"the world size is " + *p.world_size + ", but " + std::to_string(ranked) +
                              " pods have a RANK",
                          {p.created.name}});
      break;
    }
  }
  for (const auto& p : pods) {
    if (p.num_nodes && nodes > 0 && *p.num_nodes != std::to_string(nodes)) {
      problems.push_back({"the number of nodes is " + *p.num_nodes + ", but " +
                              std::to_string(nodes) + " pods have a node rank",
                          {p.created.name}});
      break;
    }
  }
  // An elastic job has no master: its rendezvous is checked instead (check_rendezvous).
  const bool elastic =
      std::any_of(pods.begin(), pods.end(), [](const previewed_pod& p) { return p.bounds; });
  if (!elastic) check_master(pods, nodes > 0, nodes > 0 ? nodes : ranked, problems);
  check_hostfiles(job, pods, problems);
  check_world(pods, problems);
  check_rendezvous(job, pods, problems);
  return problems;
}

result<job_preview> preview_job(const json& job, const std::vector<json>& given,
                                const policy_set& policies, std::size_t max_pods,
                                const mutate_options& options) {
  try {
    auto created = create_job(job, given, max_pods);
    if (!created) return std::move(created).take_error();
    job_preview out;
    out.job = std::move(*created);
    std::vector<json> objects = out.job.objects;
    objects.insert(objects.end(), given.begin(), given.end());
    // One owner_object per object, shared by every pod as the server's cache shares them: no
    // copy per pod, and what one pod's walk derives from an object the next ones reuse.
    std::vector<std::shared_ptr<const owner_object>> shared;
    shared.reserve(objects.size());
    for (const auto& object : objects)
      shared.push_back(std::make_shared<const owner_object>(object));
    for (auto& c : out.job.pods) {
      previewed_pod p;
      const pod_view created(c.pod);
      p.d = decide(
          subject{created}, policies, options, [&](const owner_ref& ref, owner_values& owners) {
            if (const auto* object = find_object(objects, ref)) {
              owners.add(ref, shared[static_cast<std::size_t>(object - objects.data())]);
            } else {
              owners.add_failure(ref, lookup_failure::not_found, "not part of the previewed job");
            }
          });
      p.admitted = p.d.allowed && p.d.mutated() ? c.pod.patch(p.d.patch()) : c.pod;
      const pod_view view(p.admitted);
      if (view.hostname() != nullptr && view.subdomain() != nullptr)
        p.dns_name = std::string(*view.hostname()) + "." + std::string(*view.subdomain());
      p.created = std::move(c);
      out.pods.push_back(std::move(p));
    }
    out.job.pods.clear();  // moved into out.pods
    out.problems = check_job(out.job, out.pods, policies);
    for (const auto& p : out.pods) {
      if (!p.bounds) continue;
      if (!out.elastic) out.elastic = elastic_summary{*p.bounds, 0, p.rendezvous.value_or("")};
      ++out.elastic->size;
    }
    const auto count = [&](auto pred) {
      return std::count_if(out.pods.begin(), out.pods.end(), pred);
    };
    if (count([](const previewed_pod& p) { return p.d.passed == pass_reason::unknown_framework; }) >
        0) {
      out.job.notes.emplace_back(
          "its runtime names a framework no policy lists: its own plugins "
          "wire the pods, and trainenv lets them pass unchanged");
    } else if (count([](const previewed_pod& p) { return !p.d.policy.empty(); }) == 0) {
      // Training pods a policy's condition leaves alone (Volcano's plugin without a master) say
      // why; else none is a training pod at all.
      const auto passed = std::find_if(out.pods.begin(), out.pods.end(), [](const auto& p) {
        return p.d.message.rfind("policy ", 0) == 0;
      });
      out.job.notes.push_back(passed != out.pods.end()
                                  ? passed->d.message
                                  : "no pod of the job is a training pod: none carries label " +
                                        std::string(keys::ancestor_step) +
                                        ": trainer, itself or on its Job");
    }
    return out;
  } catch (const json::exception& e) {
    // The job as given is not shaped as its kind is (a list where an object goes, say).
    return error{std::string("trainenv: the job is malformed: ") + e.what()};
  }
}

}  // namespace trainenv::core
