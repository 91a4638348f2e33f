#include "trainenv/core/diagnose/doctor.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>

#include "trainenv/core/diagnose/pod_status.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

// The diagnosis: the live job laid out as `preview --job` lays it out, each live pod matched to
// its place, then what differs and what keeps it from starting (docs/doctor.md).
namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::string_view wait_container = "trainenv-wait";

// The layout's name of a live pod: its generateName without the trailing '-' (a Job's pods), else
// its name (Volcano's, a bare pod's), as controllers.hpp names the pods it lays out.
std::string place_name(const json& pod) {
  const auto* metadata = member(pod, "metadata");
  if (metadata == nullptr) return {};
  if (const auto* generate = string_member(*metadata, "generateName");
      generate != nullptr && !generate->empty()) {
    return generate->back() == '-' ? generate->substr(0, generate->size() - 1) : *generate;
  }
  return string_or_empty(*metadata, "name");
}

const std::string& name_of(const json& object) {
  static const std::string none;
  const auto* metadata = member(object, "metadata");
  return metadata != nullptr ? string_or_empty(*metadata, "name") : none;
}

bool terminating(const json& pod) {
  const auto* metadata = member(pod, "metadata");
  return metadata != nullptr && member(*metadata, "deletionTimestamp") != nullptr;
}

std::string joined(const std::vector<std::string>& items, std::string_view between = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(between)) + item;
  return out;
}

// A live pod against its place.
struct placed {
  const json* live = nullptr;               // null: not created
  const previewed_pod* expected = nullptr;  // null: no place in the layout
};

// What doctor reads of a live pod, straight from its JSON: a pod_view re-reads the whole pod
// from its text, and six of them per pod were half of doctor's time on a 1,000-pod job.
struct live_fields {
  const json* metadata;
  const json* spec;

  explicit live_fields(const json& pod)
      : metadata(member(pod, "metadata")), spec(member(pod, "spec")) {}

  [[nodiscard]] const std::string* annotation(std::string_view key) const {
    return in(metadata, "annotations", key);
  }
  [[nodiscard]] const std::string* label(std::string_view key) const {
    return in(metadata, "labels", key);
  }
  [[nodiscard]] const std::string* hostname() const {
    return spec != nullptr ? string_member(*spec, "hostname") : nullptr;
  }
  [[nodiscard]] const std::string* subdomain() const {
    return spec != nullptr ? string_member(*spec, "subdomain") : nullptr;
  }

 private:
  static const std::string* in(const json* object, std::string_view map, std::string_view key) {
    const auto* entries = object != nullptr ? member(*object, map) : nullptr;
    return entries != nullptr ? string_member(*entries, key) : nullptr;
  }
};

class doctor {
 public:
  doctor(const live_job& job, const policy_set& policies, diagnosis& out)
      : job_(job), policies_(policies), out_(out) {}

  void run() {
    match();
    for (const auto& p : places_) check_pod(p);
    check_missing();
    check_services();
    check_whole_job();
    check_job_gates();
    check_hosts();
    check_logs();
    sort_findings();
  }

 private:
  void add(std::string kind, severity level, std::string what, std::string fix,
           std::vector<std::string> pods) {
    for (const auto& pod : pods) {
      for (auto& row : out_.rows) {
        if (row.name == pod &&
            std::find(row.findings.begin(), row.findings.end(), kind) == row.findings.end())
          row.findings.push_back(kind);
      }
    }
    out_.findings.push_back(
        {std::move(kind), level, std::move(what), std::move(fix), std::move(pods)});
  }

  // Each live pod to the first free place of its name, in the layout's order; the places left
  // are the pods not created. Rows in the layout's order, whatever order the pods were read in;
  // pods with no place after them, by name.
  void match() {
    std::vector<bool> taken(out_.expected.pods.size(), false);
    for (const auto& pod : job_.pods) {
      if (terminating(pod)) continue;
      const auto name = place_name(pod);
      placed p{&pod, nullptr};
      for (std::size_t i = 0; i < out_.expected.pods.size(); ++i) {
        if (!taken[i] && out_.expected.pods[i].created.name == name) {
          taken[i] = true;
          p.expected = &out_.expected.pods[i];
          break;
        }
      }
      places_.push_back(p);
    }
    for (std::size_t i = 0; i < out_.expected.pods.size(); ++i) {
      if (!taken[i]) places_.push_back({nullptr, &out_.expected.pods[i]});
    }
    const auto order = [this](const placed& p) {
      const auto at = p.expected != nullptr
                          ? static_cast<std::size_t>(p.expected - out_.expected.pods.data())
                          : out_.expected.pods.size();
      return std::make_pair(at, p.live != nullptr ? name_of(*p.live) : std::string());
    };
    std::stable_sort(places_.begin(), places_.end(),
                     [&](const placed& a, const placed& b) { return order(a) < order(b); });
    out_.live_pods = static_cast<std::size_t>(std::count_if(
        places_.begin(), places_.end(), [](const placed& p) { return p.live != nullptr; }));
    for (const auto& p : places_) out_.rows.push_back(row_of(p));
  }

  doctor_row row_of(const placed& p) const {
    doctor_row row;
    if (p.expected != nullptr) {
      row.role = p.expected->created.role;
      row.expected_rank = p.expected->node_rank;
    }
    if (p.live == nullptr) {  // a place no pod fills (match() gives it a layout's place)
      row.name = p.expected != nullptr ? p.expected->created.name : std::string();
      row.phase = "not created";
      row.admitted = row.ready = row.published = row.wait = "-";
      return row;
    }
    const pod_status status(*p.live);
    row.name = name_of(*p.live);
    if (row.role.empty()) row.role = "?";
    row.phase = status.phase();
    row.ready = status.ready() ? "yes" : "no";
    row.wait = status.wait_state(wait_container);
    if (p.expected != nullptr && !p.expected->d.policy.empty()) {
      row.admitted = live_fields(*p.live).annotation(keys::injected) != nullptr ? "yes" : "no";
      row.actual_rank = told_of(p).node_rank;
    } else {
      row.admitted = "-";
    }
    row.published = "-";
    return row;
  }

  // The live pod as a previewed one: its expected decision (policy, layout name, wait), its own
  // object and env read back.
  previewed_pod live_copy(const placed& p) const {
    previewed_pod told = *p.expected;
    told.created.name = name_of(*p.live);
    told.admitted = *p.live;
    told.node_rank.reset();
    told.rank.reset();
    told.world_size.reset();
    told.num_nodes.reset();
    told.master.reset();
    told.master_port.reset();
    told.hostfile.clear();
    told.has_hostfile = false;
    told.bounds.reset();
    told.rendezvous.reset();
    told.rendezvous_id.reset();
    told.values.clear();
    const live_fields view(*p.live);
    told.dns_name = view.hostname() != nullptr && view.subdomain() != nullptr
                        ? std::string(*view.hostname()) + "." + std::string(*view.subdomain())
                        : std::string();
    if (const auto* pol = policies_.by_name(told.d.policy); pol != nullptr && told.d.allowed)
      read_values(told, *pol, policies_.sidecars(), job_.objects);
    return told;
  }

  // live_copy of the pod, made once (the row, the staleness check and the whole-job checks read
  // it: three copies of every pod's preview were a quarter of doctor's time on 1,000 pods).
  const previewed_pod& told_of(const placed& p) const {
    auto found = told_.find(p.live);
    if (found == told_.end()) found = told_.emplace(p.live, live_copy(p)).first;
    return found->second;
  }

  // Whether the read of `resource` ("services", "configmaps") was refused: not_checked names it.
  [[nodiscard]] bool not_read(std::string_view resource) const {
    return std::any_of(job_.not_checked.begin(), job_.not_checked.end(),
                       [&](const std::string& s) { return s.rfind(resource, 0) == 0; });
  }

  // The row of the live pod `name`; null for a name no row has (none: every pod has a row).
  doctor_row* row_named(const std::string& name) {
    for (auto& row : out_.rows) {
      if (row.name == name) return &row;
    }
    return nullptr;
  }

  void check_pod(const placed& p) {
    if (p.live == nullptr) return;
    const auto& name = name_of(*p.live);
    const pod_status status(*p.live);
    if (p.expected == nullptr) {
      if (!status.finished()) {
        add("no-place", severity::error,
            "pod " + name + " has no place in the layout of " + out_.kind + " " + out_.name + " (" +
                std::to_string(out_.layout_pods) +
                " pods): left from before a resize, or another job's pod carrying its labels",
            "delete it; if its controller recreates it, the job's spec and its Jobs disagree",
            {name});
      }
      return;
    }
    check_admission(p, name);
    check_wait(status, name);
    for (auto& f : status.pending_causes(job_.events)) {
      add(std::move(f.kind), f.level, std::move(f.what), std::move(f.fix), {name});
    }
    const live_fields view(*p.live);
    if (true_member(view.spec, "hostNetwork")) {
      const auto* policy = string_member(*view.spec, "dnsPolicy");
      if (!policy || *policy != "ClusterFirstWithHostNet") {
        add("host-network-dns", severity::error,
            "pod " + name + " runs in the node's network with dnsPolicy " +
                std::string(policy ? *policy : "ClusterFirst") +
                ": it resolves with the node's DNS and cannot find its peers",
            "set dnsPolicy: ClusterFirstWithHostNet in the pod template", {name});
      }
    }
  }

  void check_admission(const placed& p, const std::string& name) {
    const auto& expected = *p.expected;
    if (expected.d.policy.empty() || !expected.d.allowed) return;
    if (live_fields(*p.live).annotation(keys::injected) == nullptr) {
      if (!expected.d.mutated()) return;
      add("not-admitted", severity::error,
          "pod " + name + " has no " + std::string(keys::injected) + " annotation: trainenv " +
              "would wire it (policy " + expected.d.policy + ") but never saw it: created " +
              "before the webhook, during an outage, or in a namespace it does not watch",
          "check the MutatingWebhookConfiguration's namespaceSelector and objectSelector, then "
          "delete the pod so that its controller recreates it through the webhook",
          {name});
      unwired_.insert(name);
      return;
    }
    const auto& told = told_of(p);
    std::vector<std::string> differ;
    const auto compare = [&](const std::string& what, const auto& found, const auto& want) {
      if (found == want) return;
      const auto text = [](const auto& v) -> std::string {
        if (!v) return "none";
        if constexpr (std::is_same_v<std::decay_t<decltype(*v)>, std::string>) {
          return *v;
        } else {
          return std::to_string(*v);
        }
      };
      auto line = what + " " + text(found) + ", expected " + text(want);
      // Two items of a policy may read the same env var (PET_NNODES, static and elastic).
      if (std::find(differ.begin(), differ.end(), line) == differ.end())
        differ.push_back(std::move(line));
    };
    compare("node rank", told.node_rank, expected.node_rank);
    compare("RANK", told.rank, expected.rank);
    std::map<std::string, std::string> found(told.values.begin(), told.values.end());
    for (const auto& [key, value] : expected.values) {
      // A hostfile is read from the ConfigMap the pod mounts: unread, it is not compared.
      if (key == "hostfile" && not_read("configmaps")) continue;
      const auto at = found.find(key);
      compare(key, at == found.end() ? std::optional<std::string>() : std::optional(at->second),
              std::optional(value));
    }
    if (!differ.empty()) {
      std::vector<std::string> counted;
      for (const auto& s : expected.d.sources)
        counted.push_back(s.name + " " + s.value + " from " + s.source);
      add("stale", severity::error,
          "pod " + name + " was told " + joined(differ, "; ") +
              (counted.empty() ? std::string()
                               : " (the live layout: " + joined(counted, "; ") + ")"),
          "delete the pod: its controller recreates it and trainenv admits it with the live "
          "counts (a resized job's pods created before the resize keep their old values)",
          {name});
      unwired_.insert(name);
      return;
    }
    const bool wait_expected = expected.d.wait.has_value();
    const bool has_wait = pod_status(*p.live).has_init_container(wait_container);
    if (wait_expected && !has_wait) {
      add("older-trainenv", severity::note,
          "pod " + name + " was admitted by an older trainenv: it has no " +
              std::string(wait_container) + " (its values are current)",
          "nothing to do; pods created from now on get it", {name});
      if (auto* row = row_named(name)) row->admitted = "older";
    }
  }

  void check_wait(const pod_status& status, const std::string& name) {
    const auto gave_up = status.wait_gave_up(wait_container);
    if (gave_up) {
      add("wait-timed-out", severity::error,
          "pod " + name + "'s " + std::string(wait_container) + " gave up: " + *gave_up,
          "make what it names answer (the Service, the pods' readiness, sshd), or give it longer "
          "with trainenv.io/wait-timeout",
          {name});
      return;
    }
    if (const auto since = status.waiting_in(wait_container)) {
      add("waiting", severity::warning,
          "pod " + name + " sits in its " + std::string(wait_container) + " (started " + *since +
              ") on " + joined(status.wait_targets(wait_container)),
          "its log says what is missing and why: kubectl logs " + name + " -c " +
              std::string(wait_container),
          {name});
    }
  }

  // The pods the layout has and no live pod fills: denied by trainenv, or not created yet.
  void check_missing() {
    if (suspended()) return;  // no pod until it is resumed: check_job_gates says so
    std::vector<std::string> missing;
    for (const auto& p : places_) {
      if (p.live == nullptr) missing.push_back(p.expected->created.name);
    }
    if (missing.empty()) return;
    // The Job controller's FailedCreate events carry the webhook's denial.
    for (const auto& event : job_.events) {
      if (string_or_empty(event, "reason") != "FailedCreate") continue;
      const auto& message = string_or_empty(event, "message");
      if (message.find("trainenv") == std::string::npos) continue;
      const auto* involved = member(event, "involvedObject");
      if (involved == nullptr) continue;
      const auto& object = string_or_empty(*involved, "name");
      std::vector<std::string> pods;
      for (const auto& m : missing) {
        if (m.rfind(object, 0) == 0) pods.push_back(m);
      }
      add("denied", severity::error,
          string_or_empty(*involved, "kind") + " " + object +
              " could not create its pods: " + message,
          "fix what the message names; the controller retries on its own", pods);
      return;
    }
    add("not-created", severity::warning,
        std::to_string(missing.size()) + " of the layout's " + std::to_string(out_.layout_pods) +
            " pods do not exist yet: " + joined(missing),
        "a role that dependsOn another is created after it; else look at the events of the "
        "job's Jobs (kubectl describe)",
        missing);
  }

  // The Service each subdomain names, whether it selects the pods, and whether their names are
  // published.
  void check_services() {
    if (not_read("services")) return;
    std::map<std::string, std::vector<const json*>> by_subdomain;
    for (const auto& p : places_) {
      if (p.live == nullptr || p.expected == nullptr) continue;
      const live_fields view(*p.live);
      if (view.hostname() == nullptr || view.subdomain() == nullptr) continue;
      by_subdomain[std::string(*view.subdomain())].push_back(p.live);
    }
    for (const auto& [subdomain, pods] : by_subdomain) {
      if (out_.service.empty()) out_.service = subdomain;
      check_service(subdomain, pods);
    }
  }

  // One subdomain's Service: there, headless, selecting the pods, publishing their names.
  void check_service(const std::string& subdomain, const std::vector<const json*>& pods) {
    const json* service = nullptr;
    for (const auto& s : job_.services) {
      if (name_of(s) == subdomain) service = &s;
    }
    std::vector<std::string> names;
    names.reserve(pods.size());
    for (const auto* pod : pods) names.push_back(name_of(*pod));
    if (service == nullptr) {
      const auto* other = selecting_service(*pods.front());
      add(other != nullptr ? "subdomain-mismatch" : "no-service", severity::error,
          "no Service " + subdomain + " in " + out_.namespace_name + ": the pods' names (" +
              names.front() + "'s is " + hostname_of(*pods.front()) + "." + subdomain +
              ") never resolve" +
              (other != nullptr ? "; the headless Service that selects them is " + name_of(*other) +
                                      ", not their subdomain"
                                : std::string()),
          other != nullptr
              ? "set the pods' subdomain to " + name_of(*other) +
                    " (JobSet: spec.network.subdomain), or rename the Service"
              : "create a headless Service (clusterIP: None) named " + subdomain +
                    " selecting the pods; JobSet makes it unless spec.network.enableDNSHostnames "
                    "is false",
          names);
      for (const auto& n : names) {
        if (auto* row = row_named(n)) row->published = "no";
      }
      return;
    }
    const auto* spec = member(*service, "spec");
    const bool headless = spec != nullptr && string_or_empty(*spec, "clusterIP") == "None";
    if (!headless) {
      add("service-not-headless", severity::error,
          "Service " + subdomain +
              " has a cluster IP: only a headless Service (clusterIP: "
              "None) gives each pod a DNS name",
          "recreate it with clusterIP: None", names);
    }
    std::vector<std::string> unselected;
    for (const auto* pod : pods) {
      if (!selects(*service, *pod)) unselected.push_back(name_of(*pod));
    }
    if (!unselected.empty()) {
      add("service-selects-other", severity::error,
          "Service " + subdomain + " does not select " + joined(unselected) + " (selector " +
              selector_text(*service) + "): their names never resolve",
          "make the Service's selector match the job's pods (JobSet's selects "
          "jobset.sigs.k8s.io/jobset-name)",
          unselected);
    }
    const bool not_ready_too = spec != nullptr && true_member(spec, "publishNotReadyAddresses");
    for (const auto* pod : pods) {
      const auto& name = name_of(*pod);
      const bool listed = std::find(unselected.begin(), unselected.end(), name) == unselected.end();
      const auto published = is_published(subdomain, *pod, not_ready_too);
      if (auto* row = row_named(name)) row->published = listed && published ? "yes" : "no";
      // A pod whose containers do not run yet has its own finding, if any: its name comes
      // once it runs.
      if (listed && !published && pod_status(*pod).phase() == "Running") {
        add("not-published", severity::error,
            "pod " + name + "'s name " + hostname_of(*pod) + "." + subdomain +
                " is not published: it is not Ready and Service " + subdomain +
                " publishes only ready addresses",
            "set publishNotReadyAddresses: true on the Service (JobSet's default), or drop the "
            "readiness probe that waits for the rendezvous",
            {name});
      }
    }
  }

  static std::string hostname_of(const json& pod) {
    const auto* hostname = live_fields(pod).hostname();
    return hostname != nullptr ? *hostname : name_of(pod);
  }

  static bool selects(const json& service, const json& pod) {
    const auto* spec = member(service, "spec");
    const auto* selector = spec != nullptr ? member(*spec, "selector") : nullptr;
    if (selector == nullptr || !selector->is_object() || selector->empty()) return false;
    const live_fields view(pod);
    const auto items = selector->items();
    return std::all_of(items.begin(), items.end(), [&](const auto& item) {
      const auto* label = view.label(item.key());
      return label != nullptr && item.value().is_string() &&
             *label == item.value().template get_ref<const std::string&>();
    });
  }

  static std::string selector_text(const json& service) {
    const auto* spec = member(service, "spec");
    const auto* selector = spec != nullptr ? member(*spec, "selector") : nullptr;
    if (selector == nullptr || !selector->is_object() || selector->empty()) return "none";
    std::vector<std::string> parts;
    for (const auto& [key, value] : selector->items())
      parts.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    return joined(parts, ",");
  }

  const json* selecting_service(const json& pod) const {
    for (const auto& s : job_.services) {
      const auto* spec = member(s, "spec");
      if (spec != nullptr && string_or_empty(*spec, "clusterIP") == "None" && selects(s, pod))
        return &s;
    }
    return nullptr;
  }

  // Whether the pod's name is in the Service's EndpointSlices (when they were read), else
  // whether the EndpointSlice controller would list it: an address, and Ready unless the
  // Service publishes not-ready addresses.
  bool is_published(const std::string& service, const json& pod, bool not_ready_too) const {
    const bool slices_read = !not_read("endpointslices");
    const pod_status status(pod);
    if (!slices_read || job_.endpoint_slices.empty())
      return status.has_address() && (not_ready_too || status.ready());
    if (endpoints_.empty()) {
      // {Service, pod} -> the endpoint's ready condition, the first listed of each, once.
      for (const auto& slice : job_.endpoint_slices) {
        const auto* metadata = member(slice, "metadata");
        const auto* labels = metadata != nullptr ? member(*metadata, "labels") : nullptr;
        if (labels == nullptr) continue;
        const auto& of = string_or_empty(*labels, "kubernetes.io/service-name");
        for (const auto& endpoint : array_member(&slice, "endpoints")) {
          const auto* ref = member(endpoint, "targetRef");
          if (ref == nullptr) continue;
          const auto* conditions = member(endpoint, "conditions");
          const bool ready = conditions == nullptr || member(*conditions, "ready") == nullptr ||
                             true_member(conditions, "ready");
          endpoints_.emplace(std::make_pair(of, string_or_empty(*ref, "name")), ready);
        }
      }
    }
    const auto found = endpoints_.find(std::make_pair(service, name_of(pod)));
    return found != endpoints_.end() && (found->second || not_ready_too);
  }

  // The whole-job checks of preview --job on the live pods (the kubelet's semantics: the last
  // duplicate env entry wins), each pod not created, stale or not admitted standing in as the
  // layout has it (its own finding says why it differs).
  void check_whole_job() {
    std::vector<previewed_pod> mixed;
    for (const auto& p : places_) {
      if (p.expected == nullptr) continue;
      if (p.live == nullptr || unwired_.count(name_of(*p.live)) != 0) {
        mixed.push_back(*p.expected);
        continue;
      }
      mixed.push_back(told_of(p));
    }
    for (auto& problem : check_job(out_.expected.job, mixed, policies_)) {
      if (problem.message.rfind("denied: ", 0) == 0) continue;  // the layout's own: found below
      const bool in_spec =
          std::any_of(out_.expected.problems.begin(), out_.expected.problems.end(),
                      [&](const job_problem& p) { return p.message == problem.message; });
      add("job-check", severity::error, problem.message,
          in_spec ? "the job's own spec gives this (trainenv preview --job -f on it says the "
                    "same): fix the spec, often a value set by hand in a pod template"
                  : "the live pods disagree where their layout does not: a value changed after "
                    "admission, or pods of two admissions; delete the pods named",
          problem.pods);
    }
    for (const auto& p : out_.expected.pods) {
      if (!p.d.allowed) {
        add("denied", severity::error,
            "the layout's pod " + p.created.name + " is denied: " + p.d.message,
            "fix what the message names in the job's spec (preview --job shows it)",
            {p.created.name});
      }
    }
  }

  // What holds the whole job back before any pod: suspended, Kueue, Volcano's PodGroup.
  bool suspended() const {
    const auto* spec = member(job_.target, "spec");
    return true_member(spec, "suspend");
  }

  // The hosts the live pods were told (the master, the rendezvous endpoint, the hostfile's
  // lines) held against the live pods: one whose pod has finished cannot answer. (A host that is
  // no place of the layout is a whole-job check's; one whose pod is not created yet, not-created.)
  void check_hosts() {
    std::map<std::string, const placed*> place_of;  // hostname (a DNS name's first label)
    for (const auto& p : places_) {
      if (p.expected == nullptr || p.expected->dns_name.empty()) continue;
      place_of.emplace(first_label(p.expected->dns_name), &p);
    }
    std::map<std::string, std::vector<std::string>> told_by;  // hostname -> the pods told it
    for (const auto& p : places_) {
      if (p.live == nullptr || p.expected == nullptr || unwired_.count(name_of(*p.live)) != 0)
        continue;
      const auto& told = told_of(p);
      std::vector<std::string> hosts;
      if (told.master) hosts.push_back(*told.master);
      if (told.rendezvous) hosts.push_back(told.rendezvous->substr(0, told.rendezvous->rfind(':')));
      for (const auto& line : told.hostfile) {
        const auto host = line.substr(0, line.find(' '));  // "host slots=N"
        hosts.push_back(host.substr(0, host.find(':')));   // "host:N"
      }
      const auto self = first_label(p.expected->dns_name);
      for (const auto& host : hosts) {
        const auto label = first_label(host);
        auto& pods = told_by[label];
        if (label != self && std::find(pods.begin(), pods.end(), name_of(*p.live)) == pods.end())
          pods.push_back(name_of(*p.live));
      }
    }
    for (const auto& [host, pods] : told_by) {
      const auto place = place_of.find(host);
      if (pods.empty() || place == place_of.end() || place->second->live == nullptr) continue;
      const auto& live = *place->second->live;
      const pod_status status(live);
      if (!status.finished()) continue;
      auto named = pods;
      named.push_back(name_of(live));
      add("host-not-live", severity::error,
          std::to_string(pods.size()) + " pod(s) were told host " + host + ", whose pod " +
              name_of(live) + " has " + (status.phase() == "Succeeded" ? "exited" : "failed") +
              " (" + status.phase() + "): they cannot reach it",
          "see why it ended (kubectl logs --previous, or doctor --logs); its Job recreates it "
          "within its backoffLimit, else the JobSet's failurePolicy restarts the job",
          std::move(named));
    }
  }

  static std::string first_label(const std::string& name) { return name.substr(0, name.find('.')); }

  // The known start-up failures (policies/startup-failures.yaml) in the pods' logs: per failure,
  // the pods whose log has a line holding all its texts, the first such line quoted.
  void check_logs() {
    // A line longer than this is cut where it is quoted (a log can be one long line).
    constexpr std::size_t quoted_length = 300;
    for (const auto& failure : policies_.startup_failures()) {
      std::vector<std::string> pods;
      std::string first;
      for (const auto& log : job_.logs) {
        if (std::find(pods.begin(), pods.end(), log.pod) != pods.end()) continue;
        std::string_view rest(log.text);
        while (!rest.empty()) {
          const auto end = std::min(rest.find('\n'), rest.size());
          const auto line = rest.substr(0, end);
          rest.remove_prefix(std::min(end + 1, rest.size()));
          const bool all = std::all_of(
              failure.match.begin(), failure.match.end(),
              [&](const std::string& m) { return line.find(m) != std::string_view::npos; });
          if (!all) continue;
          pods.push_back(log.pod);
          if (first.empty()) {
            first = "pod " + log.pod + " (container " + log.container +
                    (log.previous ? ", the run before its restart" : "") + "): \"" +
                    std::string(trim(line.substr(0, quoted_length))) + "\"";
          }
          break;
        }
      }
      if (pods.empty()) continue;
      add("startup-failure", severity::error,
          failure.program + " (" + failure.name + "): " + failure.cause + "; " + first +
              (pods.size() > 1 ? " and " + std::to_string(pods.size() - 1) + " more pod(s)" : ""),
          failure.fix, pods);
    }
  }

  void check_job_gates() {
    const bool kueue = std::any_of(job_.workloads.begin(), job_.workloads.end(), [](const json& w) {
      return string_or_empty(w, "kind") == "Workload";
    });
    // A job Kueue manages stays suspended until its Workload is admitted: `queued` says why.
    if (suspended() && !kueue) {
      add("suspended", severity::error,
          out_.kind + " " + out_.name +
              " is suspended (spec.suspend: true): no pod until it "
              "is resumed",
          "resume it, or see why its queue has not admitted it (kubectl describe workload)", {});
    }
    for (const auto& w : job_.workloads) {
      const auto& kind = string_or_empty(w, "kind");
      const auto* status = member(w, "status");
      if (kind == "Workload") {
        const auto* admitted = status != nullptr ? member(*status, "admission") : nullptr;
        if (admitted != nullptr) continue;
        std::string why;
        for (const auto& c : array_member(status, "conditions")) {
          if (string_or_empty(c, "status") == "False" ||
              string_or_empty(c, "type") == "QuotaReserved")
            why = string_or_empty(c, "message");
        }
        add("queued", severity::error,
            "Kueue has not admitted Workload " + name_of(w) + (why.empty() ? "" : ": " + why),
            "free quota in its ClusterQueue, or lower the job's requests", {});
      } else if (kind == "PodGroup") {
        const auto phase = status != nullptr ? string_or_empty(*status, "phase") : std::string();
        if (phase == "Pending" || phase == "Inqueue") {
          add("podgroup-pending", severity::error,
              "Volcano PodGroup " + name_of(w) + " is " + phase +
                  ": the scheduler has not found room for the whole gang",
              "kubectl describe podgroup " + name_of(w) + " says what is short", {});
        }
      }
    }
  }

  void sort_findings() {
    std::stable_sort(out_.findings.begin(), out_.findings.end(),
                     [](const finding& a, const finding& b) { return a.level < b.level; });
  }

  const live_job& job_;
  const policy_set& policies_;
  diagnosis& out_;
  std::vector<placed> places_;
  mutable std::map<const json*, previewed_pod> told_;                      // told_of's
  mutable std::map<std::pair<std::string, std::string>, bool> endpoints_;  // is_published's
  // The pods found stale or not admitted: the whole-job checks take them as they will be once
  // recreated, so that a finding is not told twice.
  std::set<std::string> unwired_;
};

}  // namespace

std::string_view severity_name(severity s) {
  switch (s) {
    case severity::error:
      return "error";
    case severity::warning:
      return "warning";
    case severity::note:
      break;
  }
  return "note";
}

bool diagnosis::healthy() const {
  return std::none_of(findings.begin(), findings.end(),
                      [](const finding& f) { return f.level == severity::error; });
}

result<diagnosis> diagnose(const live_job& job, const policy_set& policies,
                           const mutate_options& options) {
  std::vector<json> given;
  for (const auto& ref : job_needs(job.target)) {
    if (const auto* object = find_object(job.objects, ref)) given.push_back(*object);
  }
  auto expected = preview_job(job.target, given, policies, cli_preview_bounds, options);
  if (!expected) return std::move(expected).take_error();
  diagnosis out;
  out.expected = std::move(*expected);
  out.kind = out.expected.job.kind;
  out.name = out.expected.job.name;
  out.namespace_name = out.expected.job.namespace_name;
  out.layout_pods = out.expected.pods.size();
  out.not_checked = job.not_checked;
  for (const auto& p : out.expected.pods) {
    if (out.policy.empty() && !p.d.policy.empty()) out.policy = p.d.policy;
    if (!out.world && p.world_size) out.world = p.world_size;
    if (!out.master && (p.rendezvous || p.master))
      out.master = p.rendezvous ? p.rendezvous : p.master;
  }
  doctor(job, policies, out).run();
  return out;
}

}  // namespace trainenv::core
