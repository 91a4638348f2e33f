// Bytes are decoded elsewhere; here the data flow of one pod: recognise -> its runtime (Trainer)
// -> select a policy -> check the pod's shape -> its place in the job's layout (its owners, when
// the pod alone cannot tell) -> render -> diff. Each step
// that needs an owner object the shell has not fetched yet names it instead of answering.
#include "trainenv/core/decide/engine.hpp"

#include <set>

#include "trainenv/core/decide/diff.hpp"
#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/decide/selection.hpp"
#include "trainenv/core/decide/wait_plan.hpp"
#include "trainenv/core/job/controller_env.hpp"
#include "trainenv/core/job/elastic.hpp"
#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

decision deny(std::string message, std::string policy = {}, int code = 400) {
  decision d;
  d.allowed = false;
  d.message = std::move(message);
  d.policy = std::move(policy);
  d.code = code;
  return d;
}

decision deny(const error& e, std::string policy = {}) {
  return deny(e.message, std::move(policy), e.code);
}

decision pass(pass_reason reason, std::string why) {
  decision d;
  d.passed = reason;
  d.message = std::move(why);
  return d;
}

// Allowed unchanged, and said so to the user: `why` is the warning too.
decision pass_with_warning(pass_reason reason, const std::string& why) {
  auto d = pass(reason, why);
  d.warnings.push_back(make_warning(why));
  return d;
}

// An explicit count annotation wins (docs/contract.md §2.1); when the owners were read anyway and
// say otherwise, the user hears about it.
void add_disagreements(const pod_view& pod, const owner_counts& owners, const topology& t,
                       decision& d) {
  if (pod.annotation(keys::num_nodes) != nullptr) {
    // The owner's own count of the layout's nodes, before the annotation.
    std::int64_t nodes = 0;
    for (const auto r : t.layout.nodes) {
      if (const auto* counted = owners.find(t.layout.roles[r].name)) nodes += counted->pods;
    }
    if (nodes != t.num_nodes) {
      d.warnings.push_back(make_warning(
          "trainenv: kept annotation " + std::string(keys::num_nodes) + "=" +
          std::to_string(t.num_nodes) + "; " + owners.owner + " runs " + std::to_string(nodes)));
    }
  }
  if (const auto* given = pod.annotation(keys::replicas)) {
    auto parsed = parse_replicas(*given);
    if (!parsed) return;
    for (const auto& [role, count] : *parsed) {
      const auto* r = owners.find(role);
      if (r != nullptr && r->pods != count) {
        d.warnings.push_back(make_warning(
            "trainenv: kept annotation " + std::string(keys::replicas) + " " + role + "=" +
            std::to_string(count) + "; " + owners.owner + " runs " + std::to_string(r->pods)));
      }
    }
  }
}

// What would make an owner lookup that failed unnecessary (docs/contract.md §6): the count
// annotations, unless what the pod needs is its MPI workers' names or the layout's names, which
// no annotation gives.
std::string what_avoids_lookup(const pod_view& view, const policy& p, const topology& alone,
                               variable_mask used) {
  const auto open = alone.owner_open & used;
  if (p.hostfile && alone.role == launcher_role && (open & variable_bit(variable::host)) != 0) {
    return "no annotation avoids this lookup: the launcher's hostfile names its workers, which "
           "only the owner can tell";
  }
  const bool counts_given = view.annotation(keys::replicas) != nullptr;
  if ((open & naming_variables) != 0 && (counts_given || !alone.layout.unnamed.empty())) {
    return "no annotation avoids this lookup: the pods' DNS names come from the owner";
  }
  return "set annotation " + std::string(keys::num_nodes) + " (or " + std::string(keys::replicas) +
         ") on the pod template to skip the lookup";
}

// The pod's index in its role, when the layout it was placed in is the job's (not a placeholder for
// owners that were not read) and counts it.
std::optional<std::int64_t> placed_index(const topology& t) {
  if (!t.counts_known || !t.index || *t.index >= t.layout.roles[t.role_at].pods)
    return std::nullopt;
  return t.index;
}

// The pod checks itself against its layout (docs/contract.md §2.2): its own hostname.subdomain,
// as its controller set them, must be the name the layout gives its place, and the coordinator
// JobSet names on every pod must be the layout's master. A disagreement means trainenv's rule for
// this owner is wrong: denied loudly (500), never a silently wrong address. Bare pods and worlds
// of one pod are not checked. A pod whose policy injects no name is checked too: a rule that names
// it wrong names the peers it is told about wrong (a hostfile, a master), and says so first here.
std::optional<error> check_own_name(const pod_view& view, const topology& t) {
  if (!has_controller(view) || t.layout.node_count() <= 1) return std::nullopt;
  const auto report = [&](const std::string& what) {
    return error{"trainenv: " + what + ": trainenv's naming rule for " + t.layout.naming_kind +
                     " is wrong here; a retry will not help, report it",
                 500};
  };
  if (const auto index = placed_index(t); !t.own_name.empty() && index) {
    if (auto expected = t.layout.dns_name(t.role_at, *index); expected && *expected != t.own_name) {
      return report("this pod is named " + t.own_name + " (spec.hostname.spec.subdomain), but " +
                    t.layout.source + " gives role " + quote(t.role) + " index " +
                    std::to_string(*index) + " the name " + *expected);
    }
  }
  // JobSet writes the coordinator's endpoint with its own subdomain even when DNS hostnames are
  // off and no Service gives it a name: only then is its label not the name to check.
  if (const auto* declared = view.label(keys::coordinator);
      declared != nullptr && t.layout.coordinator && t.layout.templates_only.empty()) {
    if (t.master && *t.master != *declared) {
      return report("the coordinator is " + std::string(*declared) + " (label " +
                    std::string(keys::coordinator) + "), but trainenv names it " + *t.master);
    }
  }
  return std::nullopt;
}

// The env the pod's controller wrote (docs/contract.md §4): Kubeflow Trainer's plugins' on a
// TrainJob's trainer pod, else what its layout owner's kind writes (Volcano's pytorch plugin).
std::optional<written_env> controller_written(const pod_view& view, const owner_kind_set& kinds,
                                              const trainer_settings* trainer,
                                              const std::optional<owner_counts>& layout_owner,
                                              const topology& t) {
  if (trainer != nullptr) {
    const auto* kind = kinds.find(trainer->trainjob_api_version, trainer->trainjob_kind);
    if (kind != nullptr && kind->writes)
      return find_written_env(view, *kind->writes, nullptr, nullptr, trainer->user_env);
  }
  if (layout_owner && layout_owner->kind != nullptr && layout_owner->kind->writes) {
    return find_written_env(view, *layout_owner->kind->writes, layout_owner->object,
                            t.layout.roles[t.role_at].pod_template, {});
  }
  return std::nullopt;
}

// What `trainenv doctor` reads to explain this pod's job (docs/contract.md §5): its top owner,
// which the wait names in its time-out message. Empty when no kind doctor reads runs it.
std::string doctor_target(const topology& t, const trainer_settings* trainer) {
  if (t.job.empty()) return {};
  // Trainer names the JobSet it creates after its TrainJob.
  if (trainer != nullptr) return "trainjob/" + t.job;
  const auto* kind = t.layout.kind;
  if (kind == nullptr) return {};
  if (kind->group == "jobset.x-k8s.io") return "jobset/" + t.job;
  if (kind->group == "batch" && kind->kind == "Job") return "job/" + t.job;
  if (kind->group == "batch.volcano.sh" && kind->kind == "Job") return "vcjob/" + t.job;
  return {};
}

// The pod's place in its job, and the owner that gave its layout if one was read.
struct placement {
  result<topology> topo;
  std::optional<owner_counts> owners;
};

// From the pod alone when its annotations and labels tell all that the policy uses for it (no
// API call); else from its owners, asking for the next one to read. An owner already at hand
// (read to recognise the pod, or cached) is always used.
owner_step<placement> place(const pod_view& view, const policy& p, std::size_t target,
                            const owner_values& owners, const policy_set& policies,
                            const trainer_settings* trainer, const mutate_options& options) {
  const auto& kinds = policies.owner_kinds();
  topology_sources src;
  src.kinds = &kinds;
  src.accelerators = &policies.accelerators();
  src.trainer = trainer;
  src.has_owner = has_controller(view);
  src.cluster_domain = options.cluster_domain;
  // Elastic bounds from the pod and whatever owners are read by the time the layout is.
  const auto with_elastic = [&](auto&& resolve) -> result<topology> {
    auto elastic = read_elastic(view, owners, trainer);
    if (!elastic) return std::move(elastic).take_error();
    src.elastic = &*elastic;
    src.job_uid = job_uid(view, owners, trainer);
    return resolve();
  };
  if (!src.has_owner || !uses_counts(p))
    return placement{with_elastic([&] { return resolve_topology(view, p, target, src); }),
                     std::nullopt};

  auto found = counts_from_owners(view, pod_role(view, kinds), owners, kinds);
  auto* read = std::get_if<result<std::optional<owner_counts>>>(&found);
  if (read != nullptr && *read && **read) {
    placement out{error{}, std::move(***read)};
    src.owners = &*out.owners;
    out.topo = with_elastic([&] { return resolve_topology(view, p, target, src); });
    if (!out.topo && out.topo.code() == contradicts_owner) {
      // A pod created right after a resize contradicts the copy the shell's cache held: read
      // the owner anew; read anew and still contradicted, it is the pod's violation.
      const auto* held = owners.find(out.owners->ref);
      if (held != nullptr && held->cached) {
        auto fresh = out.owners->ref;
        fresh.fresh = true;
        return fresh;
      }
      out.topo = error{out.topo.message()};
    }
    return out;
  }
  // Not read (or not readable): the pod alone, if it tells all this pod needs. What the pod
  // itself says wrong (a bad annotation) is its own violation, owners or not.
  auto alone = with_elastic([&] { return resolve_topology(view, p, target, src); });
  if (!alone) return placement{std::move(alone), std::nullopt};
  auto used = p.variables_used_for(alone->role, alone->training_role);
  // A node of an MPI job may launch it too (node rank 0 of a job with no launcher role): only
  // its owner tells.
  if (p.hostfile && alone->role != launcher_role && alone->index.value_or(0) == 0)
    used |= p.variables_used_for(launcher_role, false);
  // A role strict training roles leave out trains after all in a job with no master: only its
  // owner tells.
  if (p.strict_training_roles && !alone->training_role)
    used |= p.variables_used_for(alone->role, true);
  if ((alone->owner_open & used) == 0) return placement{std::move(alone), std::nullopt};
  if (const auto* ref = needed(found)) return *ref;
  if (read != nullptr && !*read) {
    // Sizing fails closed: a silently wrong count is worse than a retried pod creation.
    return placement{error{"trainenv: cannot read the pod counts: " + read->message() + "; " +
                               what_avoids_lookup(view, p, *alone, used),
                           read->code()},
                     std::nullopt};
  }
  return placement{std::move(alone), std::nullopt};  // no owner after all: its own answer
}

}  // namespace

decision owner_chain_too_long(const owner_ref& last) {
  return deny("trainenv: the pod's owners took more than " + std::to_string(max_owner_fetches) +
              " reads to size it (the last: " + last.display() + "); set annotation " +
              std::string(keys::num_nodes) + " and " + std::string(keys::policy));
}

namespace {

// The namespace the pod's owners are read in: the request's, which the pod's own must be (the
// API server makes them so; a review where they differ is forged), and a DNS label. A bare pod's
// own. An error names both.
result<std::string_view> read_namespace(const subject& what) {
  const auto* own = what.pod.namespace_name();
  std::string_view ns = own != nullptr ? std::string_view(*own) : std::string_view();
  if (what.request != nullptr) {
    if (own != nullptr && ns != what.request->namespace_name) {
      return error{"trainenv: the pod's metadata.namespace " + quote(ns) +
                   " is not the request's namespace " + quote(what.request->namespace_name) +
                   "; the API server never sends such a review"};
    }
    ns = what.request->namespace_name;
  }
  if (!ns.empty() && !is_dns_label(ns)) {
    return error{"trainenv: the namespace " + quote(ns) +
                 " is not a DNS label (lower-case letters, digits and '-', at most 63)"};
  }
  return ns;
}

// The pod's controlling owner, as read, when a job plugin of its kind may name the pod's policy
// (Volcano's mpi plugin) and nothing on the pod did: it is read first. Null when it is not of
// that kind or cannot be read (the kind's default policy then applies, and sizing says what
// failed).
owner_step<const json*> plugin_owner(const pod_view& view, const owner_kind* kind,
                                     const owner_values& owners, const owner_kind_set& kinds) {
  const auto& ref = view.controller();
  if (!ref || kinds.find(ref->api_version, ref->kind) != kind)
    return static_cast<const json*>(nullptr);
  const auto* fetched = owners.find(*ref);
  if (fetched == nullptr) return *ref;
  return fetched->failure ? nullptr : &fetched->object();
}

// Why the pod got its values, on the pod (docs/contract.md §4, as Istio's sidecar.istio.io/status):
// the policy, each count and where it was read, and the env entries it replaced, removed or
// kept; compact JSON of at most status_limit bytes. Added once: a pod that has it (admitted
// before, or fed back in) keeps it, so a second admission patches nothing.
constexpr std::size_t status_limit = 1024;

void add_status(const pod_view& view, decision& d) {
  if (!d.mutated() || view.annotation(keys::status) != nullptr) return;
  // Written directly (no JSON values built): it is on every wired pod's admission path. Values
  // cut at a byte count may end inside a character: append_json_string replaces, never throws.
  const auto write = [&](bool with_from, bool with_counts) {
    std::string out = R"({"policy":)";
    append_json_string(out, d.policy);
    if (with_counts) {
      out += R"(,"counts":[)";
      for (std::size_t i = 0; i < d.sources.size() && i < 12; ++i) {
        const auto& source = d.sources[i];
        out += i == 0 ? R"({"name":)" : R"(,{"name":)";
        append_json_string(out, source.name);
        out += R"(,"value":)";
        append_json_string(out, std::string_view(source.value).substr(0, 64));
        if (with_from) {
          out += R"(,"from":)";
          append_json_string(out, std::string_view(source.source).substr(0, 96));
        }
        out += '}';
      }
      out += ']';
    }
    for (const auto& [key, list] :
         {std::pair{"replaced", &d.replaced_env}, std::pair{"removed", &d.injected.removed_env},
          std::pair{"kept", &d.kept_env}}) {
      if (list->empty()) continue;
      out += std::string(",\"") + key + "\":[";
      for (std::size_t i = 0; i < list->size() && i < 16; ++i) {
        if (i != 0) out += ',';
        append_json_string(out, (*list)[i]);
      }
      out += ']';
    }
    return out + '}';
  };
  // Bounded: first without where each count was read, then without the counts.
  auto text = write(true, true);
  if (text.size() > status_limit) text = write(false, true);
  if (text.size() > status_limit) text = write(false, false);
  // The patch added or kept /metadata/annotations already (trainenv.io/injected): one more member.
  d.patch_text.pop_back();  // the array's ']'
  d.patch_text += R"(,{"op":"add","path":"/metadata/annotations/trainenv.io~1status","value":)";
  append_json_string(d.patch_text, text);
  d.patch_text += "}]";
  ++d.patch_ops;
  d.injected.annotations.emplace_back(keys::status);
}

// The decision's steps in the order the contract gives them (docs/architecture.md, "Data flows
// one way"), each a possible answer of its own: kept as one sequence, longer than 80 lines, so
// that the order is read in one place; each step is a function of its own above.
owner_step<decision> decide_steps(const subject& what, const policy_set& policies,
                                  const owner_values& owners, const mutate_options& options) {
  if (what.request != nullptr && !what.request->is_pod_create()) {
    return pass(pass_reason::not_a_pod_create,
                "not a pod CREATE: " + what.request->operation + " of " + what.request->resource);
  }
  const pod_view& view = what.pod;
  if (!view.json().is_object())
    return deny("trainenv: the object is not a Pod (expected a JSON object)");
  const auto& kinds = policies.owner_kinds();

  const auto recognised = recognise(view, owners);
  if (const auto* ref = needed(recognised)) return *ref;
  const auto& verdict = std::get<recognition>(recognised);
  switch (verdict.kind) {
    case recognition::verdict::not_training:
      return pass(pass_reason::not_training, verdict.reason);
    case recognition::verdict::unknown: {
      // Recognising fails open: a pod not known to be ours is not ours to block.
      return pass_with_warning(pass_reason::unrecognised, verdict.reason);
    }
    case recognition::verdict::training:
    case recognition::verdict::through_job:
      break;
  }
  if (const auto* inject = view.annotation(keys::inject); inject != nullptr && *inject == "false") {
    return pass(pass_reason::opted_out,
                "opted out: annotation " + std::string(keys::inject) + " is \"false\"");
  }
  if (const auto* wired = wired_owner(view, kinds)) {
    return pass_with_warning(pass_reason::wired_elsewhere,
                             "trainenv: passed unchanged: the pod's " + wired->kind + " (" +
                                 wired->group + ") is wired by " + wired->wired_by);
  }

  // Trainer's layout: the runtime names the framework and the MPI settings.
  trainer_settings_ptr trainer;
  if (verdict.kind == recognition::verdict::through_job) {
    const auto found = trainer_runtime(view, *verdict.job, owners, kinds);
    if (const auto* ref = needed(found)) return *ref;
    const auto& settings = std::get<result<trainer_settings_ptr>>(found);
    if (!settings) return deny(error{settings.message(), settings.code()});
    trainer = *settings;
  }
  const auto* owner_kind = pod_owner_kind(view, kinds);
  auto selected =
      select_policy(view, policies, options.forced_policy, trainer.get(), owner_kind, nullptr);
  if (selected.owner_may_name) {
    const auto read = plugin_owner(view, owner_kind, owners, kinds);
    if (const auto* ref = needed(read)) return *ref;
    if (const auto* object = std::get<const json*>(read)) {
      selected =
          select_policy(view, policies, options.forced_policy, trainer.get(), owner_kind, object);
    }
  }
  if (!selected.pass.empty()) {
    return pass_with_warning(pass_reason::unknown_framework, selected.pass);
  }
  if (selected.chosen == nullptr) return deny(selected.violation);
  const policy& p = *selected.chosen;

  std::size_t target = 0;
  std::string target_warning;
  if (auto problem = check_pod_shape(view, p, policies.sidecars(), target, target_warning);
      !problem.empty())
    return deny(std::move(problem), p.name);

  const auto placed = place(view, p, target, owners, policies, trainer.get(), options);
  if (const auto* ref = needed(placed)) return *ref;
  const auto& [topo, layout_owner] = std::get<placement>(placed);
  if (!topo) return deny(error{topo.message(), topo.code()}, p.name);
  if (auto wrong = check_own_name(view, *topo)) return deny(*wrong, p.name);
  const auto written = controller_written(view, kinds, trainer.get(), layout_owner, *topo);
  auto want = render(p, *topo, view, policies.sidecars(), written ? &*written : nullptr);
  if (want && !want->applies) {
    return pass(pass_reason::not_applying, "policy " + quote(p.name) +
                                               " does not apply: its condition " +
                                               quote(p.when_source) + " is false");
  }
  // A layout with nothing to train on cannot be named (no master): said, never guessed, and said
  // before whatever a policy item could not render for want of a node.
  if (topo->counts_known && !topo->layout.no_nodes.empty() && uses_counts(p))
    return deny(topo->layout.no_nodes, p.name);
  if (!want) return deny(want.message(), p.name);
  const wait_request waiting{*selected.chosen,
                             *topo,
                             view,
                             owners,
                             options.wait,
                             options.wait_image,
                             doctor_target(*topo, trainer.get())};
  auto wait = plan_wait(waiting, *want);
  if (!wait) return deny(error{wait.message(), wait.code()}, p.name);
  if (wait->container) want->init_containers.push_back(std::move(*wait->container));
  want->dns_policy = wait->dns_policy;
  for (auto& warning : wait->warnings) want->warnings.push_back(std::move(warning));
  auto d = build_patch(view, *want, p.name);
  d.wait = std::move(wait->plan);
  d.no_wait_reason = wait->reason;
  d.no_wait_why = std::move(wait->why);
  for (const auto& note : topo->notes) d.warnings.push_back(make_warning(note));
  if (!target_warning.empty()) d.warnings.push_back(make_warning(target_warning));
  d.sources = topo->sources;
  if (trainer) {
    const auto& value = trainer->framework ? trainer->framework : trainer->ml_policy;
    if (value) {
      d.sources.push_back(
          {"framework", *value,
           trainer->framework ? trainer->framework_source : trainer->ml_policy_source});
    }
  }
  if (layout_owner) add_disagreements(view, *layout_owner, *topo, d);
  const auto& layout = topo->layout;
  if (const auto index = placed_index(*topo)) {
    if (auto name = layout.dns_name(topo->role_at, *index)) d.layout_name = std::move(*name);
  }
  for (const auto r : layout.nodes) d.world_roles.push_back(layout.roles[r].name);
  d.world_of_workers = p.every_role_trains;
  add_status(view, d);
  return d;
}

// A trainenv.io/ key trainenv does not know, on the pod (and so on its template): a typo that
// would otherwise change nothing without a word (trainenv.io/num-node).
void warn_unknown_keys(const pod_view& view, decision& d) {
  for (const auto& [map, where] :
       {std::pair{&view.annotations(), "annotation"}, std::pair{&view.labels(), "label"}}) {
    std::vector<std::string_view> ours;
    for (const auto& entry : map->entries()) {
      if (entry.key.substr(0, keys::prefix.size()) == keys::prefix) ours.push_back(entry.key);
    }
    if (ours.empty()) continue;
    for (auto& warning : unknown_key_warnings(ours, where))
      d.warnings.push_back(make_warning(std::move(warning)));
  }
}

// The same on each owner read for the pod (a JobSet's trainenv.io/elastc): an owner's key reaches
// the pod only through what trainenv reads of it, so a typo there is as silent.
void warn_owners_unknown_keys(const owner_values& owners, decision& d) {
  std::set<std::string> seen;
  for (const auto& f : owners.all()) {
    if (!f.fetched) continue;
    auto on = " on " + f.ref.display();
    if (!seen.insert(on).second) continue;
    for (auto& warning : object_unknown_key_warnings(f.object(), on))
      d.warnings.push_back(make_warning(std::move(warning)));
  }
}

}  // namespace

owner_step<decision> evaluate(const subject& what, const policy_set& policies,
                              const owner_values& owners, const mutate_options& options) {
  if (what.request != nullptr && !what.request->is_pod_create())
    return decide_steps(what, policies, owners, options);
  const auto ns = read_namespace(what);
  if (!ns) return deny(error{ns.message(), ns.code()});
  auto step = decide_steps(what, policies, owners, options);
  if (auto* d = std::get_if<decision>(&step)) {
    warn_unknown_keys(what.pod, *d);
    warn_owners_unknown_keys(owners, *d);
  }
  // Every read the walk asks for is checked here, before the shell may make it: bound to the
  // request's namespace, by a uid, under a DNS name (docs/security.md).
  if (const auto* ref = needed(step)) {
    if (auto refused = unreadable_reference(*ref, policies.owner_kinds(), *ns))
      return deny(*refused);
  }
  return step;
}

decision mutate_pod(const subject& what, const policy_set& policies,
                    const mutate_options& options) {
  return decide(what, policies, options, [](const owner_ref& ref, owner_values& owners) {
    owners.add_failure(ref, lookup_failure::no_access, "no API access (this path reads no owners)");
  });
}

decision mutate_pod(const pod_view& pod, const policy_set& policies,
                    const mutate_options& options) {
  return mutate_pod(subject{pod}, policies, options);
}

decision mutate_pod(const json& pod, const policy_set& policies, const mutate_options& options) {
  const pod_view view(pod);
  return mutate_pod(subject{view}, policies, options);
}

decision mutate(const admission_request& request, const policy_set& policies,
                const mutate_options& options) {
  return mutate_pod(subject{request.pod(), &request}, policies, options);
}

}  // namespace trainenv::core
