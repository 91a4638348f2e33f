#include "trainenv/server/live_job_reader.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "trainenv/core/model/owner_ref.hpp"
#include "trainenv/core/preview/controllers.hpp"
#include "trainenv/core/text/json_access.hpp"

namespace trainenv::server {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

// Items of one LIST, at the most: 20,000 pods, the largest job `preview --job` lays out.
constexpr std::size_t max_items = 20'000;
// doctor --logs: the pods whose logs are read, the logs at most, and of each its last lines
// and bytes (kubectl logs --tail --limit-bytes): a launcher's failure is in its last lines.
constexpr std::size_t max_log_pods = 32;
constexpr std::size_t max_logs = 64;
constexpr std::string_view log_lines = "200";
constexpr std::string_view log_bytes = "65536";
// How far up a pod's controller references doctor walks (Pod, Job, JobSet, TrainJob is three).
constexpr int max_owner_depth = 8;

const std::string& metadata_text(const json& object, std::string_view key) {
  static const std::string none;
  const auto* metadata = core::member(object, "metadata");
  return metadata != nullptr ? core::string_or_empty(*metadata, key) : none;
}

using query_list = std::vector<std::pair<std::string, std::string>>;

class reader {
 public:
  reader(const kube_client& client, std::string ns, live_job_read_options options)
      : client_(client),
        ns_(std::move(ns)),
        budget_(options.budget),
        page_size_(std::max<std::size_t>(1, options.page_size)),
        logs_(options.logs) {}

  // GET one object: it (kind and apiVersion set as the API gives them), none when not found, or
  // the error naming it. (Views and named arguments only: GCC 12 destroys a temporary argument of
  // class type in a co_await'ed call twice.)
  asio::awaitable<core::result<std::optional<json>>> get(std::string_view api_version,
                                                         std::string_view kind, std::string_view ns,
                                                         std::string_view name) {
    auto path = api_path(api_version, resource_of_kind(kind), ns, name);
    const query_list none;
    auto a = co_await client_.read(std::move(path), none, budget_);
    if (a.ok()) co_return std::optional<json>(std::move(a.value));
    if (a.failure == core::lookup_failure::not_found) co_return std::optional<json>();
    co_return core::error{std::string(kind) + " " + (ns.empty() ? "" : std::string(ns) + "/") +
                          std::string(name) + ": " + a.message};
  }

  // LIST `kind` in the namespace with `query`, every page, into out_.objects; a failure is the
  // error.
  asio::awaitable<core::result<bool>> list(std::string_view api_version, std::string_view kind,
                                           const query_list& query) {
    auto failure = co_await list_pages(api_version, kind, query);
    if (failure) co_return core::error{"listing " + std::move(*failure)};
    co_return true;
  }

  // The same, for what doctor can do without: none when the cluster does not serve the resource
  // (404: no Kueue, no Volcano), a refusal or failure listed as not checked.
  asio::awaitable<void> list_optional(std::string_view api_version, std::string_view kind,
                                      const query_list& query) {
    if (auto failure = co_await list_pages(api_version, kind, query))
      out_.not_checked.push_back(std::move(*failure));
  }

  // The object once, by kind, namespace and name (a pod both walked from and listed).
  void add(json object) {
    auto key = std::make_tuple(core::string_or_empty(object, "kind"),
                               metadata_text(object, "namespace"), metadata_text(object, "name"));
    if (seen_.insert(std::move(key)).second) out_.objects.push_back(std::move(object));
  }

  asio::awaitable<core::result<live_job_read>> run(const inputs::doctor_target& target) {
    auto top = co_await top_of(target);
    if (!top) co_return std::move(top).take_error();
    if (core::string_or_empty(*top, "kind") == "Pod") {
      add(std::move(*top));  // no owner: live_job_from says doctor explains jobs
      co_return std::move(out_);
    }
    if (auto read = co_await read_job(std::move(*top)); !read)
      co_return std::move(read).take_error();
    co_await read_around();
    if (logs_) co_await read_logs();
    co_return std::move(out_);
  }

 private:
  // The object `target` names; a pod's top owner, up its controller references, each read
  // checked against the uid that names it (the objects on the way are kept).
  asio::awaitable<core::result<json>> top_of(const inputs::doctor_target& target) {
    auto named = co_await get(target.api_version, target.kind, ns_, target.name);
    if (!named) co_return std::move(named).take_error();
    if (!*named) {
      co_return core::error{target.kind + (target.group.empty() ? "" : "." + target.group) + " " +
                            target.name + " not found in namespace " + ns_};
    }
    json top = std::move(**named);
    for (int depth = 0; target.kind == "Pod" && depth < max_owner_depth; ++depth) {
      const auto ref = core::controller_of(top, ns_);
      if (!ref) break;
      auto up = co_await get(ref->api_version, ref->kind, ns_, ref->name);
      if (!up) co_return std::move(up).take_error();
      if (!*up || metadata_text(**up, "uid") != ref->uid) break;  // gone, or replaced
      add(std::move(top));
      top = std::move(**up);
    }
    co_return top;
  }

  // The job, what laying it out needs (a TrainJob's runtime, as preview --job reads it), its
  // JobSet and Jobs, and its pods: all required.
  asio::awaitable<core::result<bool>> read_job(json top) {
    const auto kind = core::string_or_empty(top, "kind");
    const auto group = std::string(core::api_group(core::string_or_empty(top, "apiVersion")));
    const auto name = metadata_text(top, "name");
    for (const auto& ref : core::job_needs(top)) {
      auto needed = co_await get(ref.api_version, ref.kind, ref.namespace_name, ref.name);
      if (!needed) co_return std::move(needed).take_error();
      if (*needed) add(std::move(**needed));
    }
    std::string pod_label;
    if (group == "trainer.kubeflow.org" || group == "jobset.x-k8s.io") {
      if (kind == "TrainJob") {  // Trainer names a TrainJob's JobSet after it
        auto jobset = co_await get("jobset.x-k8s.io/v1alpha2", "JobSet", ns_, name);
        if (!jobset) co_return std::move(jobset).take_error();
        if (*jobset) add(std::move(**jobset));
      }
      pod_label = "jobset.sigs.k8s.io/jobset-name=" + name;
      const query_list of_jobset = {{"labelSelector", pod_label}};
      if (auto jobs = co_await list("batch/v1", "Job", of_jobset); !jobs)
        co_return std::move(jobs).take_error();
    } else if (group == "batch" && kind == "Job") {
      pod_label = "job-name=" + name;
    } else if (group == "batch.volcano.sh") {
      pod_label = "volcano.sh/job-name=" + name;
    }
    add(std::move(top));
    query_list pod_query;
    if (!pod_label.empty()) pod_query.emplace_back("labelSelector", pod_label);
    co_return co_await list("v1", "Pod", pod_query);
  }

  // What doctor can do without: the ConfigMaps the pods mount (an MPI launcher's hostfile, whose
  // hosts are what it was told), the Services, the EndpointSlices of the pods' subdomains, the
  // Warning events (denials, scheduling, mounts, pulls and back-offs are all Warnings), Kueue
  // Workloads and Volcano PodGroups.
  asio::awaitable<void> read_around() {
    std::set<std::string> subdomains;
    std::set<std::string> config_maps;
    for (const auto& object : out_.objects) {
      if (core::string_or_empty(object, "kind") == "Pod")
        named_by_pod(object, subdomains, config_maps);
    }
    for (const auto& name : config_maps) {
      auto a = co_await get("v1", "ConfigMap", ns_, name);
      if (!a) {
        out_.not_checked.push_back("configmaps: " + a.message());
        break;
      }
      if (*a) add(std::move(**a));
    }
    const query_list all;
    co_await list_optional("v1", "Service", all);
    for (const auto& subdomain : subdomains) {
      const query_list of_service = {{"labelSelector", "kubernetes.io/service-name=" + subdomain}};
      co_await list_optional("discovery.k8s.io/v1", "EndpointSlice", of_service);
    }
    const query_list warnings = {{"fieldSelector", "type=Warning"}};
    co_await list_optional("v1", "Event", warnings);
    co_await list_optional("kueue.x-k8s.io/v1beta1", "Workload", all);
    co_await list_optional("scheduling.volcano.sh/v1beta1", "PodGroup", all);
  }

  // The logs of the pods' started containers: the pods not Running and Ready first.
  asio::awaitable<void> read_logs() {
    struct wanted {
      std::string pod;
      std::string container;
      bool previous;
    };
    std::vector<std::pair<bool, std::vector<wanted>>> by_pod;  // {healthy, its logs}
    for (const auto& object : out_.objects) {
      if (core::string_or_empty(object, "kind") != "Pod") continue;
      const auto& name = metadata_text(object, "name");
      const auto* status = core::member(object, "status");
      bool healthy = status != nullptr && core::string_or_empty(*status, "phase") == "Running";
      std::vector<wanted> logs;
      for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
        for (const auto& c : core::array_member(status, list)) {
          const auto& container = core::string_or_empty(c, "name");
          const auto* state = core::member(c, "state");
          const auto* last = core::member(c, "lastState");
          const bool started = state != nullptr && (core::member(*state, "running") != nullptr ||
                                                    core::member(*state, "terminated") != nullptr);
          const bool restarted = last != nullptr && core::member(*last, "terminated") != nullptr;
          if (started) logs.push_back({name, container, false});
          if (restarted) logs.push_back({name, container, true});
          healthy =
              healthy && !restarted &&
              (std::string_view(list) == "initContainerStatuses" || core::true_member(&c, "ready"));
        }
      }
      by_pod.emplace_back(healthy, std::move(logs));
    }
    std::stable_sort(by_pod.begin(), by_pod.end(),
                     [](const auto& a, const auto& b) { return !a.first && b.first; });
    std::size_t pods = 0;
    std::size_t reads = 0;
    for (const auto& pod : by_pod) {
      if (pods++ == max_log_pods) break;
      for (const auto& w : pod.second) {
        if (reads++ == max_logs) co_return;
        query_list query = {{"container", w.container},
                            {"tailLines", std::string(log_lines)},
                            {"limitBytes", std::string(log_bytes)}};
        if (w.previous) query.emplace_back("previous", "true");
        auto path = api_path("v1", "pods", ns_, w.pod) + "/log";
        auto a =
            co_await client_.read(std::move(path), std::move(query), budget_, answer_form::text);
        if (a.failure == core::lookup_failure::forbidden ||
            a.failure == core::lookup_failure::unauthorized) {
          out_.not_checked.push_back("pods/log: " + a.message);
          co_return;
        }
        if (a.ok()) out_.logs.push_back({w.pod, w.container, w.previous, std::move(a.text)});
      }
    }
  }

  // The subdomain a pod names, and the ConfigMaps it mounts (whole or projected).
  static void named_by_pod(const json& pod, std::set<std::string>& subdomains,
                           std::set<std::string>& config_maps) {
    const auto* spec = core::member(pod, "spec");
    if (const auto* sub = spec != nullptr ? core::string_member(*spec, "subdomain") : nullptr)
      subdomains.insert(*sub);
    for (const auto& volume : core::array_member(spec, "volumes")) {
      if (const auto* config_map = core::member(volume, "configMap"))
        config_maps.insert(core::string_or_empty(*config_map, "name"));
      for (const auto& source : core::array_member(core::member(volume, "projected"), "sources")) {
        if (const auto* part = core::member(source, "configMap"))
          config_maps.insert(core::string_or_empty(*part, "name"));
      }
    }
    config_maps.erase("");
  }

  // Every page of a LIST into out_.objects: none, or what failed ("pods: <why>").
  asio::awaitable<std::optional<std::string>> list_pages(std::string_view api_version,
                                                         std::string_view kind,
                                                         const query_list& query) {
    const auto resource = resource_of_kind(kind);
    std::string next;
    for (std::size_t listed = 0; listed < max_items; listed += page_size_) {
      auto page_query = query;
      page_query.emplace_back("limit", std::to_string(page_size_));
      if (!next.empty()) page_query.emplace_back("continue", next);
      auto path = collection_path(api_version, resource, ns_);
      auto a = co_await client_.read(std::move(path), std::move(page_query), budget_);
      if (!a.ok()) {
        if (a.failure == core::lookup_failure::not_found) co_return std::nullopt;  // not served
        co_return resource + ": " + a.message;
      }
      const auto& list_version = core::string_or_empty(a.value, "apiVersion");
      for (const auto& item : core::array_member(&a.value, "items")) {
        // A List's items carry neither: the List's kind names them.
        json object = item;
        object["apiVersion"] = list_version.empty() ? std::string(api_version) : list_version;
        object["kind"] = kind;
        add(std::move(object));
      }
      const auto* metadata = core::member(a.value, "metadata");
      next = metadata != nullptr ? core::string_or_empty(*metadata, "continue") : std::string();
      if (next.empty()) co_return std::nullopt;
    }
    co_return resource + ": more than " + std::to_string(max_items) + " listed; the rest not read";
  }

  const kube_client& client_;
  std::string ns_;
  std::chrono::milliseconds budget_;
  std::size_t page_size_;
  bool logs_;
  live_job_read out_;
  std::set<std::tuple<std::string, std::string, std::string>> seen_;
};

}  // namespace

asio::awaitable<core::result<live_job_read>> read_live_job(const kube_client& client,
                                                           inputs::doctor_target target,
                                                           std::string ns,
                                                           live_job_read_options options) {
  reader r(client, std::move(ns), options);
  co_return co_await r.run(target);
}

}  // namespace trainenv::server
