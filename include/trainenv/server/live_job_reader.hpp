// What `trainenv doctor` reads of a live job from the API, with the user's own credentials
// (docs/doctor.md, "What doctor reads and the rights it needs"): the objects a `kubectl get -o
// json` dump for --from would hold, so that inputs::live_job_from makes one live job of either.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "trainenv/core/diagnose/doctor.hpp"
#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/doctor.hpp"
#include "trainenv/server/kube_client.hpp"

namespace trainenv::server {

// (clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.)
struct live_job_read {                   // NOLINT(bugprone-exception-escape)
  std::vector<nlohmann::json> objects;   // each with its apiVersion and kind, as a List's items
  std::vector<std::string> not_checked;  // "events: forbidden: ...", an optional read refused
  std::vector<core::pod_log> logs;       // with live_job_read_options::logs
};

struct live_job_read_options {
  std::chrono::milliseconds budget{std::chrono::seconds(10)};  // of each request
  // Items per LIST page: kubectl asks for 500; a pod with a large template is tens of KiB, and a
  // page must stay under the client's answer bound (kube_client_options::max_response_bytes).
  std::size_t page_size = 100;
  // doctor --logs: the last lines of each started container of the pods (the run before a
  // restart too), the pods that are not Running and Ready first, within the bounds below.
  bool logs = false;
};

// Reads `target` in namespace `ns`. A pod is walked up its controller references (each uid
// checked) to its top owner. Then, by GET: the objects the top owner names (a TrainJob's
// runtime, its JobSet); by LIST: a JobSet's Jobs (label jobset.sigs.k8s.io/jobset-name), the
// job's pods (its controller's pod label), the namespace's Services, the EndpointSlices of the
// Services the pods name as subdomain (kubernetes.io/service-name), the Warning events, the Kueue
// Workloads and Volcano PodGroups; LISTs in pages (`limit`, `continue`).
// Required reads (the target, its owners, Jobs and pods): a failure is the error (doctor's exit
// 2), naming the read. Optional ones (Services, EndpointSlices, events, Workloads, PodGroups): a
// refusal or failure is listed in not_checked by resource name; a resource the cluster does not
// serve (404: no Kueue, no Volcano) reads as none. With `logs`, the containers' logs (GET
// pods/NAME/log, `tailLines`, `limitBytes`); refused, listed as not checked.
[[nodiscard]] boost::asio::awaitable<core::result<live_job_read>> read_live_job(
    const kube_client& client, inputs::doctor_target target, std::string ns,
    live_job_read_options options = {});

}  // namespace trainenv::server
