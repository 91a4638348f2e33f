// The objects that own a pod, as values (docs/contract.md §2.1): which kinds are known and where
// their roles and pod counts sit (data, shipped as policies/owners.yaml), the references read
// from ownerReferences, and the role counts read from a fetched object. No I/O here: the shell
// fetches the objects (the API client, or `preview --owners`) and hands them in.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/owner_ref.hpp"
#include "trainenv/core/policy/template.hpp"
#include "trainenv/core/policy/trainer_settings.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// The object `ref` names among `objects`: the same API group, kind, namespace and name (the
// version may differ, as the API server converts between versions). The uid is not compared
// here: the walk checks it, so that a recreated object is refused as from the API.
[[nodiscard]] const nlohmann::json* find_object(const std::vector<nlohmann::json>& objects,
                                                const owner_ref& ref);

// How an owner kind lays out its roles.
struct role_layout {
  enum class shape : std::uint8_t {
    own,   // the object is one role: the pod's own (a batch/v1 Job)
    list,  // a list of entries, each naming a role (JobSet replicatedJobs, Volcano tasks)
    map,   // a mapping whose keys, lower-cased, name the roles (PyTorchJob, MPIJob replica specs)
  };
  shape kind = shape::own;
  member_path entries;      // list, map: where the entries sit
  std::string name_member;  // list: the entry's member that names the role
  // list: the name of an entry without one, over ${index}, its position in the list (Volcano's
  // admission names a task without a name "default<i>", and its pods with it). None: refused.
  std::optional<template_string> name_default;
  std::string replicas_member;  // the entry's multiplier; empty: none (1)
  // An entry without `replicas_member`: JobSet's CRD defaults it to 1, Volcano omits a zero.
  std::int64_t replicas_default = 1;
  member_path job_spec;      // pods per replica = a batch/v1 JobSpec's pods, at this path; empty: 1
  member_path pod_template;  // where the role's pod template sits (a PodTemplateSpec)
  // list: the entry's list of {name, status} prerequisites (JobSet's dependsOn); a role another
  // depends on with status Complete has finished before that one starts. Empty: none.
  std::string depends_on_member;
};

// Where an owner names the pod it wants as the job's master (JobSet's spec.coordinator): the
// role, and the Job and pod within it.
struct coordinator_rule {
  member_path at;  // the coordinator object in the owner
  std::string role_member = "replicatedJob";
  std::string job_index_member = "jobIndex";
  std::string pod_index_member = "podIndex";
};

// How a controller names the pods of a job of its kind (docs/contract.md §2.2): each pod's
// hostname and the subdomain of the headless Service they share.
struct pod_naming {
  // Over ${job} (the owner's name), ${role}, ${jobIndex} and ${index} (the completion index within
  // its Job); ${index} appears once, last, so that a run of a Job's pods is a prefix and a number.
  template_string hostname;
  member_path subdomain;  // where the owner object sets it; empty: only the default
  std::optional<template_string> subdomain_default;  // over ${job}; none: no DNS names unless set
  // What the role's pod template's own spec.subdomain counts for: `first`, it wins over the
  // owner's and the default (the Job controller, Volcano's svc plugin, which set only what the
  // template leaves empty); `overridden`, the controller writes its own over it (JobSet with DNS
  // hostnames), so it counts only when `dns_switch` is off.
  enum class template_rule : std::uint8_t { first, overridden };
  template_rule template_subdomain = template_rule::first;
  // A boolean in the owner (JobSet's spec.network.enableDNSHostnames, absent: true): when false
  // the controller sets no subdomain and makes no Service; only a template's own subdomain (and
  // the user's Service of that name) then names the pods. Empty: no such switch.
  member_path dns_switch;
  // The controller names the pods only when the owner has one of these members (Volcano's svc
  // plugin, which its webhook turns on for pytorch, mpi, tensorflow and ray). Empty: always.
  std::vector<member_path> requires_any;
  // Whether the Service that names the pods publishes them before they are Ready (their DNS names
  // exist from when they have an address; docs/contract.md §3.1): a boolean in the owner (`at`,
  // JobSet's spec.network.publishNotReadyAddresses), or a boolean flag of a job plugin (`plugin`
  // and `flag`, Volcano's svc plugin's --publish-not-ready-addresses), else `by_default`. None:
  // unknown, which counts as "not before Ready".
  struct not_ready_rule {
    member_path at;
    member_path plugin;
    std::string flag;
    bool by_default = false;
  };
  std::optional<not_ready_rule> not_ready;
};

// The labels a controller writes on each pod it makes (docs/policies.md, "Owner kinds"), read as
// a label, else an annotation of that name: what a pod says of its place without its owner being
// read. Empty: the controller writes none of that meaning.
struct pod_labels {
  std::string job;        // the job's name (jobset.sigs.k8s.io/jobset-name)
  std::string uid;        // the job's uid: with `job`, names the owner to read directly
  std::string role;       // the pod's entry: its replicatedJob's or task's name
  std::string index;      // its index within its Job (a completion index) or role
  std::string job_index;  // its Job's index within its role (a JobSet replicatedJob's Jobs)
  std::string jobs;       // the Jobs its role runs, when its Job was made
};

// The env a controller writes into the pods it makes (docs/contract.md §4): its, not the user's,
// so a value the live layout contradicts is replaced, and one the policy does not want for the
// pod is removed. A name the user's own template sets stays the user's.
struct controller_writes {
  std::string writer;             // "Kubeflow Trainer", for messages
  std::vector<std::string> env;   // the names it writes
  std::string container;          // the container it writes into; empty: every container
  member_path when;               // it writes only when the owner has this member; empty: always
  std::vector<std::string> keep;  // of `env`, left where the policy wants none
  // It appends: where the template set a name too, the pod has it twice, the last the
  // controller's (the kubelet uses the last), which is removed and the template's kept.
  bool appends = false;
};

// A job plugin whose arguments name the entries that play roles (Volcano's pytorch plugin:
// --master and --worker name the master and worker tasks, --port the master port; its mpi plugin:
// --master the launcher, --worker the workers, --port sshd's port). It counts when the owner has
// the member `at` (its list of arguments, which may be empty: then each flag's default).
struct job_plugin {
  struct role_flag {
    std::string flag;           // "--master"
    std::string entry_default;  // the entry it names when the flag is not given: "master"
    std::string plays;          // the role that entry's pods play: "master", "launcher"
  };
  std::string name;  // for messages: "Volcano's mpi plugin"
  member_path at;
  std::vector<role_flag> roles;
  std::string master_port_flag;         // "--port": the master port (${masterPort})
  std::string ssh_port_flag;            // "--port": the port sshd listens on (${sshPort})
  bool only_named_roles_train = false;  // the entries its flags do not name are out of the world
  std::string policy;                   // its pods' policy when nothing else names one
};

struct owner_kind {
  std::string name;    // the OwnerKind document's name
  std::string source;  // where it was read from, for messages
  std::string group;   // "" for the core group
  std::vector<std::string> versions;
  std::string kind;
  std::string resource;  // plural, for the API path: "jobsets"
  bool cluster_scoped = false;
  std::optional<role_layout> roles;  // none: this kind gives no counts (a TrainJob)
  std::optional<pod_naming> naming;  // none: this kind's pods have no DNS names trainenv knows
  pod_labels labels;                 // what its controller writes on its pods
  std::optional<coordinator_rule> coordinator;
  std::optional<controller_writes> writes;
  std::vector<job_plugin> plugins;
  std::string default_policy;  // for its pods when nothing else names one (Volcano)
  // Its controller mounts the job's SSH keys itself when the owner has one of these members
  // (Volcano's ssh plugin, its Secret <job>-ssh, which its admission adds to a job with the mpi
  // plugin): an MPI policy then mounts none. Empty: never.
  std::vector<member_path> ssh_keys;
  // Set: pods this kind controls are wired by its own operator (Kubeflow's v1 PyTorchJob,
  // MPIJob, ...) and pass unchanged with this said as a warning; the object is never read.
  std::string wired_by;
  member_path runtime_ref;       // a TrainJob: where its runtimeRef sits
  bool gives_framework = false;  // a (Cluster)TrainingRuntime: its labels name the framework
  // What the kind's document says, hashed (parse_owner_kind): an owner_reading names the kind it
  // was read as by this, so that a kind reloaded with other fields never takes a reading made
  // under an earlier one. 0 for a kind built by hand (whose readings are never taken).
  std::uint64_t id = 0;

  // "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets/bert" (core group: "/api/v1/...").
  [[nodiscard]] std::string api_path(const owner_ref& ref) const;
};

inline constexpr std::string_view owner_kind_kind = "OwnerKind";

// Parses one OwnerKind document (apiVersion trainenv.io/v1alpha1, as policies). Errors read
// "<source>: <field>: <problem>; <what to write>".
[[nodiscard]] result<owner_kind> parse_owner_kind(const nlohmann::json& document,
                                                  std::string_view source);

// The known owner kinds, found by an ownerReference's apiVersion (its group and version) and kind.
class owner_kind_set {
 public:
  // Rejects two kinds claiming the same group, version and kind.
  [[nodiscard]] static result<owner_kind_set> build(std::vector<owner_kind> kinds);

  [[nodiscard]] const owner_kind* find(std::string_view api_version, std::string_view kind) const;
  [[nodiscard]] const std::vector<owner_kind>& all() const { return kinds_; }

 private:
  std::vector<owner_kind> kinds_;
};

// --lookup-timeout's default: the budget for all the owner reads of one pod's admission.
inline constexpr std::chrono::milliseconds default_lookup_budget{2'000};

// Why an owner object could not be had: the one name of a lookup's failure, which the shell's
// API client and cache report directly and its metrics label.
enum class lookup_failure : std::uint8_t {
  not_found,     // 404, or not in the --owners file
  uid_mismatch,  // an object of that name exists, but it is not the owner (recreated)
  unauthorized,  // 401, after re-reading the token once
  forbidden,     // 403
  server_error,  // 5xx or another status
  malformed,     // not a JSON object
  too_large,     // over the response bound
  timeout,       // the lookup budget ran out
  unreachable,   // no connection or no TLS session with the API server
  no_access,     // no API access configured
};
inline constexpr std::size_t lookup_failure_count = 10;         // the enumerators above
[[nodiscard]] std::string_view failure_name(lookup_failure f);  // "not found", "forbidden", ...

// The status code of a denial because an owner could not be read (docs/contract.md §6): 404 it
// is gone or was replaced, 500 trainenv's own access was refused, 503 a retry may succeed.
[[nodiscard]] int failure_code(lookup_failure f);

class owner_object;  // below: an object as read, with what the walk reads of it

// The owner objects fetched for one pod so far, or why one could not be.
struct owner_fetch {
  owner_ref ref;
  // When fetched: shared with whoever holds it (the shell's cache), so a walk copies no JSON and
  // takes what was read of it when it was fetched.
  std::shared_ptr<const owner_object> fetched;
  std::optional<lookup_failure> failure;  // when not
  std::string detail;                     // the API's own words ("jobsets ... not found"), if any
  bool cached = false;  // handed from the shell's cache, not read for this pod: may be stale

  // The object; null when it could not be fetched.
  [[nodiscard]] const nlohmann::json& object() const;
};

class owner_values {
 public:
  // An object the shell holds in memory (its cache), given without waiting; null when it must
  // be fetched. Asked by find() for a reference not yet added, so that a walk whose owners are
  // all at hand decides in one pass instead of one pass per owner.
  using at_hand_function = std::function<std::shared_ptr<const owner_object>(const owner_ref&)>;

  owner_values() = default;
  explicit owner_values(at_hand_function at_hand) : at_hand_(std::move(at_hand)) {}

  // An object whose metadata.uid is not the reference's uid is kept as a uid_mismatch failure:
  // a recreated object of the same name is not the owner. An object of a reference already
  // held replaces it (read anew, fresh).
  void add(owner_ref ref, nlohmann::json object);
  void add(owner_ref ref, std::shared_ptr<const owner_object> object);
  void add_failure(owner_ref ref, lookup_failure failure, std::string detail = {});
  // By API group, kind, namespace and name; else the object at hand, added as if fetched (what
  // the walk saw is what all() lists). Pointers stay valid as more objects are added (a deque),
  // so a walk can hold an owner it found while it fetches the next one.
  [[nodiscard]] const owner_fetch* find(const owner_ref& ref) const;
  [[nodiscard]] const std::deque<owner_fetch>& all() const { return fetched_; }

 private:
  [[nodiscard]] const owner_fetch& push(owner_ref ref, std::shared_ptr<const owner_object> object,
                                        bool cached) const;
  [[nodiscard]] const owner_fetch& keep(owner_fetch f) const;

  // mutable: find() records what it took from at_hand_, as add() would have.
  mutable std::deque<owner_fetch> fetched_;
  at_hand_function at_hand_;
};

// The pods one role of an owner runs, and where that number was read.
struct role_pods {
  // The role its pods play: their template's trainenv.io/role (label, else annotation) when it
  // has one, else `entry` (docs/contract.md §2.2, "shapes people write by hand").
  std::string role;
  // The name the owner gives the entry (a replicatedJob's, a Volcano task's): the controller names
  // the pods, and dependsOn, a coordinator and a plugin's arguments name the entry, by it.
  std::string entry;
  std::int64_t pods = 0;
  std::int64_t pods_per_job = 1;  // the pods of one Job (JobSet: a replicatedJob has replicas Jobs)
  // The Jobs it runs (a JobSet replicatedJob's replicas): a pod's completion index counts within
  // its Job, and its index in the role adds job-index x pods_per_job.
  std::int64_t jobs = 1;
  // Kubeflow Trainer's trainjob-ancestor-step label on the role's templates, if any.
  std::string step;
  bool opted_out = false;  // its pod template says trainenv.io/inject: "false"
  // The roles it waits for (dependsOn), each with the status it waits for ("Complete", "Ready").
  std::vector<std::pair<std::string, std::string>> depends_on;
  std::string source;                            // "JobSet team-a/bert spec.replicatedJobs[node]"
  const nlohmann::json* pod_template = nullptr;  // into the owner object, which must outlive this
  // Set when a job plugin of the owner leaves it out of the world (its flags do not name it and
  // only the roles they name train): says which plugin and what it names.
  std::string left_out;
};

// The pod an owner names as its master (its coordinator), by role and place.
struct coordinator_pod {
  std::string role;
  std::int64_t job_index = 0;
  std::int64_t pod_index = 0;
};

// What the owner walk reads from one object, read with the object (owner_object's reading
// constructor) rather than for each pod: the shell's cache hands the same owner_object to every
// pod of a job until it reads the object again, so a JobSet's roles or a TrainJob's runtime
// settings are read once per GET. Nothing is kept or computed later: an owner_object is a value.
struct owner_reading {
  std::uint64_t kind_id = 0;         // the kind it was read as (owner_kind::id)
  std::string controller_namespace;  // the namespace its controller was read in
  std::optional<owner_ref> controller;
  // Every role, when the kind gives counts; a kind of one role (a batch Job) reads it unnamed, as
  // it is the pod's own role.
  std::optional<result<std::vector<role_pods>>> roles;
  std::optional<coordinator_pod> coordinator;
  std::optional<trainer_settings> runtime;    // a kind that gives the framework (a runtime)
  std::optional<trainjob_settings> trainjob;  // a kind with a runtimeRef (a TrainJob)
};

// Whether the owner runs job plugin `plugin` (it has the plugin's member), and the value its
// arguments give flag `flag` ("--master=chief", or "--master" then "chief"), if any.
[[nodiscard]] bool runs_plugin(const job_plugin& plugin, const nlohmann::json& owner);
[[nodiscard]] std::optional<std::string> plugin_flag(const job_plugin& plugin,
                                                     const nlohmann::json& owner,
                                                     std::string_view flag);

// Reads `object`, of `kind`, named by `ref`: every field of owner_reading the kind has.
[[nodiscard]] owner_reading read_owner(const nlohmann::json& object, const owner_kind& kind,
                                       const owner_ref& ref);

// An owner object as the API server gave it, and what the walk reads of it. Not copyable:
// role_pods::pod_template points into it.
class owner_object {
 public:
  // Not read as any kind (an object from a test, or an --owners file): the walk reads what it
  // needs of it for each pod.
  explicit owner_object(nlohmann::json value) : value_(std::move(value)) {}
  // Read as `kind`, the object `ref` names: the walk takes what it needs from the reading.
  owner_object(nlohmann::json value, const owner_kind& kind, const owner_ref& ref)
      : value_(std::move(value)), reading_(read_owner(value_, kind, ref)) {}
  owner_object(const owner_object&) = delete;
  owner_object& operator=(const owner_object&) = delete;
  ~owner_object() = default;

  [[nodiscard]] const nlohmann::json& json() const { return value_; }
  // What was read of it as `kind`; null when it was read as no kind or as another (a kind
  // reloaded with other fields since, or one built by hand, whose id is 0).
  [[nodiscard]] const owner_reading* reading(const owner_kind& kind) const {
    return reading_ && kind.id != 0 && reading_->kind_id == kind.id ? &*reading_ : nullptr;
  }
  // Its controller, read in namespace `ns`: as read with it, or now into `scratch`.
  [[nodiscard]] const std::optional<owner_ref>& controller(std::string_view ns,
                                                           std::optional<owner_ref>& scratch) const;

 private:
  nlohmann::json value_;
  std::optional<owner_reading> reading_;
};

// The pod counts a pod's owners give, and the object that gave them (whose kind names its pods).
// `every_role` is false for a plain Job, which knows only the pod's own role.
struct owner_counts {
  std::vector<role_pods> roles;
  bool every_role = true;
  std::string owner;  // "JobSet team-a/bert": the object that gave them
  owner_ref ref;      // the same, to read it again
  const owner_kind* kind = nullptr;
  const nlohmann::json* object = nullptr;  // inside the owner_values, which must outlive this
  std::string name;                        // its metadata.name
  std::optional<coordinator_pod> coordinator;

  [[nodiscard]] const role_pods* find(std::string_view role) const;
};

// The coordinator `object` (of `kind`) names, if its kind has a rule and the object sets one.
[[nodiscard]] std::optional<coordinator_pod> read_coordinator(const owner_kind& kind,
                                                              const nlohmann::json& object);

// The pods a batch/v1 JobSpec runs at once: min(parallelism, completions); parallelism defaults
// to 1 and completions to parallelism. Errors name the member (`where` + ".parallelism") and
// the value.
[[nodiscard]] result<std::int64_t> job_spec_pods(const nlohmann::json& spec,
                                                 const std::string& where);

// Every role `object` (of `kind`, named `ref` in messages) describes. A kind of shape `own`
// gives one role, named `own_role`.
[[nodiscard]] result<std::vector<role_pods>> read_roles(const owner_kind& kind,
                                                        const nlohmann::json& object,
                                                        const owner_ref& ref,
                                                        std::string_view own_role);

}  // namespace trainenv::core
