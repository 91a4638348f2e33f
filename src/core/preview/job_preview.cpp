#include "trainenv/core/preview/job_preview.hpp"

#include "job_preview_detail.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "trainenv/core/decide/diff.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

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
// initializer, a prerequisite that completes first, a pod its controller leaves out (a task
// Volcano's mpi plugin does not name) and a pod that opts out.
bool is_worker(const created_job& job, const created_pod& c) {
  const bool launcher = c.role == launcher_role;
  if (launcher) return job.launcher_is_node;
  if (job.kind == "TrainJob") return c.role == "node";
  if (!c.step.empty() && c.step != "trainer") return false;
  if (c.prerequisite || c.left_out) return false;
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

// The pod a wait target names: its hostname.subdomain, or that followed by the namespace's
// domain (an elastic endpoint's full name). Null when none.
const previewed_pod* named_pod(const created_job& job, const std::vector<previewed_pod>& pods,
                               const std::string& host) {
  for (const auto& q : pods) {
    if (q.dns_name.empty()) continue;
    if (host == q.dns_name || host.rfind(q.dns_name + "." + job.namespace_name + ".svc.", 0) == 0)
      return &q;
  }
  return nullptr;
}

// Whether the headless Service that names `pod` publishes it before it is Ready; a Service the
// job's objects do not hold (a user's own) counts as not.
bool named_before_ready(const created_job& job, const previewed_pod& pod) {
  const auto dot = pod.dns_name.find('.');
  if (dot == std::string::npos) return false;
  const auto subdomain = pod.dns_name.substr(dot + 1);
  for (const auto& object : job.objects) {
    if (string_or_empty(object, "kind") != "Service") continue;
    const auto* metadata = member(object, "metadata");
    if (metadata == nullptr || string_or_empty(*metadata, "name") != subdomain) continue;
    const auto* spec = member(object, "spec");
    const auto* publish = spec != nullptr ? member(*spec, "publishNotReadyAddresses") : nullptr;
    return publish != nullptr && publish->is_boolean() && publish->get<bool>();
  }
  return false;
}

// The waits (docs/contract.md §3.1): every target is a pod of the job, and none can deadlock. A
// wait needs its target started (past its own init containers) when it connects, or when the
// target's name is published only once it is Ready; a cycle of such waits (a pod waiting on its
// own name among them) never ends.
void check_waits(const created_job& job, const std::vector<previewed_pod>& pods,
                 std::vector<job_problem>& problems) {
  std::map<std::size_t, std::set<std::size_t>> needs_started;
  const auto index_of = [&](const previewed_pod* q) {
    return static_cast<std::size_t>(q - pods.data());
  };
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const auto& p = pods[i];
    if (!p.d.allowed || !p.d.wait) continue;
    const auto& plan = *p.d.wait;
    std::vector<wait_target> targets = plan.targets;
    if (!plan.hostfile.empty()) {
      const auto first = [](std::string_view name) { return name.substr(0, name.find('.')); };
      for (const auto& host : p.hostfile) {
        if (first(host) != first(plan.skip)) targets.push_back({host, plan.hostfile_port});
      }
    }
    for (const auto& target : targets) {
      const auto* q = named_pod(job, pods, target.host);
      if (q == nullptr) {
        problems.push_back(
            {"pod " + p.created.name + " waits on " + target.host + ", which is no pod of the job",
             {p.created.name}});
        continue;
      }
      if (target.port != 0 || !named_before_ready(job, *q)) needs_started[i].insert(index_of(q));
    }
  }
  // A cycle through the edges, found by a depth-first walk (white, grey, black).
  std::vector<int> colour(pods.size(), 0);
  std::vector<std::size_t> path;
  const std::function<bool(std::size_t)> walk = [&](std::size_t at) {
    colour[at] = 1;
    path.push_back(at);
    for (const auto next : needs_started[at]) {
      if (colour[next] == 1) {
        std::vector<std::string> names;
        std::string chain;
        const auto from = std::find(path.begin(), path.end(), next);
        for (auto it = from; it != path.end(); ++it) {
          names.push_back(pods[*it].created.name);
          chain += pods[*it].created.name + " -> ";
        }
        problems.push_back(
            {"pods wait on each other and never start: " + chain + pods[next].created.name +
                 (next == at ? " (its own name, published only once it is Ready)" : ""),
             names});
        return true;
      }
      if (colour[next] == 0 && walk(next)) return true;
    }
    path.pop_back();
    colour[at] = 2;
    return false;
  };
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (colour[i] == 0 && walk(i)) return;
  }
}

}  // namespace

std::vector<job_problem> check_job(const created_job& job, std::vector<previewed_pod>& pods,
                                   const policy_set& policies, std::vector<std::string>* ran) {
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
  // A world of one pod calls its master localhost; pods outside it may still be told its name (a
  // Volcano side task, by Volcano's plugin): both are right.
  check_agree(
      pods, "the master address",
      [nodes](const previewed_pod& p) {
        return nodes <= 1 && p.master == "localhost" ? std::nullopt : p.master;
      },
      problems);
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
  check_waits(job, pods, problems);
  if (ran != nullptr) {
    const auto any = [&](auto pred) { return std::any_of(pods.begin(), pods.end(), pred); };
    if (nodes > 0 || ranked > 0)
      ran->push_back(nodes > 0 && ranked > 0 ? "node ranks and RANKs 0..N-1"
                                             : (nodes > 0 ? "node ranks 0..N-1" : "RANKs 0..N-1"));
    if (any([](const previewed_pod& p) { return p.world_size || p.num_nodes; }))
      ran->push_back("one world size");
    if (!elastic && any([](const previewed_pod& p) { return p.master; }))
      ran->push_back("one master at rank 0's DNS name");
    if (elastic) ran->push_back("the same bounds and one rendezvous at a pod of the job");
    if (any([](const previewed_pod& p) { return p.has_hostfile; }))
      ran->push_back("hostfile = the workers");
    if (any([](const previewed_pod& p) { return !p.d.layout_name.empty(); }))
      ran->push_back("every pod named as its layout calls it");
    if (any([](const previewed_pod& p) { return !p.d.policy.empty(); }))
      ran->push_back("the world only training pods");
    if (any([](const previewed_pod& p) { return p.d.wait.has_value(); }))
      ran->push_back("every wait on a pod of the job and none a deadlock");
    ran->push_back("no pod denied");
  }
  return problems;
}

result<job_preview> preview_job(const json& job, const std::vector<json>& given,
                                const policy_set& policies, const preview_bounds& bounds,
                                const mutate_options& options) {
  try {
    auto created = create_job(job, given, bounds);
    if (!created) return std::move(created).take_error();
    job_preview out;
    out.job = std::move(*created);
    std::vector<json> objects = out.job.objects;
    objects.insert(objects.end(), given.begin(), given.end());
    // One owner_object per object, read as its kind when first asked for and shared by every
    // pod after, as the server's cache shares them: no copy and no reading per pod.
    std::vector<std::shared_ptr<const owner_object>> shared(objects.size());
    const auto read_once = [&](const json& object, const owner_ref& ref) {
      auto& held = shared[static_cast<std::size_t>(&object - objects.data())];
      if (held == nullptr) {
        const auto* kind = policies.owner_kinds().find(ref.api_version, ref.kind);
        held = kind != nullptr ? std::make_shared<const owner_object>(object, *kind, ref)
                               : std::make_shared<const owner_object>(object);
      }
      return held;
    };
    for (auto& c : out.job.pods) {
      previewed_pod p;
      const pod_view created(c.pod);
      p.d = decide(
          subject{created}, policies, options, [&](const owner_ref& ref, owner_values& owners) {
            if (const auto* object = find_object(objects, ref)) {
              owners.add(ref, read_once(*object, ref));
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
    out.problems = check_job(out.job, out.pods, policies, &out.checks);
    check_roles(out.job, out.pods, policies, out.problems);
    out.checks.emplace_back("a training pod and no other role launching as they do");
    // The job's own unknown keys are said once, as its notes, not again on each pod, whose
    // admission warns of them as of any owner's, naming the job as the owner walk does.
    note_unknown_keys(out.job);
    if (!out.job.objects.empty()) {
      const auto& object = out.job.objects.front();
      owner_ref self;
      self.api_version = string_or_empty(object, "apiVersion");
      self.kind = string_or_empty(object, "kind");
      self.namespace_name = out.job.namespace_name;
      self.name = out.job.name;
      std::set<std::string> said;
      for (auto& w : object_unknown_key_warnings(object, " on " + self.display()))
        said.insert(make_warning(std::move(w)));
      for (auto& p : out.pods)
        std::erase_if(p.d.warnings, [&](const std::string& w) { return said.count(w) != 0; });
    }
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
      // why; a job with no training pod at all is a problem (check_roles).
      const auto passed = std::find_if(out.pods.begin(), out.pods.end(), [](const auto& p) {
        return p.d.passed == pass_reason::not_applying;
      });
      if (passed != out.pods.end()) out.job.notes.push_back(passed->d.message);
    }
    return out;
  } catch (const json::exception& e) {
    // The job as given is not shaped as its kind is (a list where an object goes, say).
    return error{std::string("trainenv: the job is malformed: ") + e.what()};
  }
}

}  // namespace trainenv::core
