// The label and annotation keys trainenv reads and writes (docs/contract.md §1, §2), in one place
// so that messages, docs and code name them identically. A bottom header: includes nothing of
// the core.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trainenv::core {

// The keys trainenv reads, in one place so messages and docs name them identically.
namespace keys {
inline constexpr std::string_view ancestor_step = "trainer.kubeflow.org/trainjob-ancestor-step";
inline constexpr std::string_view framework = "trainer.kubeflow.org/framework";
inline constexpr std::string_view jobset_name = "jobset.sigs.k8s.io/jobset-name";
inline constexpr std::string_view jobset_uid = "jobset.sigs.k8s.io/jobset-uid";
inline constexpr std::string_view job_index = "jobset.sigs.k8s.io/job-index";
inline constexpr std::string_view replicated_job = "jobset.sigs.k8s.io/replicatedjob-name";
inline constexpr std::string_view replicated_job_replicas =
    "jobset.sigs.k8s.io/replicatedjob-replicas";
inline constexpr std::string_view coordinator = "jobset.sigs.k8s.io/coordinator";
inline constexpr std::string_view job_name = "batch.kubernetes.io/job-name";
inline constexpr std::string_view completion_index = "batch.kubernetes.io/job-completion-index";
inline constexpr std::string_view volcano_job = "volcano.sh/job-name";
inline constexpr std::string_view volcano_task = "volcano.sh/task-spec";
inline constexpr std::string_view volcano_index = "volcano.sh/task-index";
inline constexpr std::string_view inject = "trainenv.io/inject";
inline constexpr std::string_view policy = "trainenv.io/policy";
inline constexpr std::string_view role = "trainenv.io/role";
inline constexpr std::string_view num_nodes = "trainenv.io/num-nodes";
inline constexpr std::string_view nproc_per_node = "trainenv.io/nproc-per-node";
inline constexpr std::string_view replicas = "trainenv.io/replicas";
inline constexpr std::string_view master_port = "trainenv.io/master-port";
inline constexpr std::string_view injected = "trainenv.io/injected";
inline constexpr std::string_view container = "trainenv.io/container";
inline constexpr std::string_view ssh_auth_mount_path = "trainenv.io/ssh-auth-mount-path";
// The MPI SSH keys (docs/contract.md §2.2): another Secret than <job>-mpi-ssh-auth, or "image"
// (the image brings its keys: no Secret is mounted).
inline constexpr std::string_view ssh_secret = "trainenv.io/ssh-secret";
inline constexpr std::string_view ssh_keys = "trainenv.io/ssh-keys";
inline constexpr std::string_view run_launcher_as_node = "trainenv.io/run-launcher-as-node";
inline constexpr std::string_view elastic = "trainenv.io/elastic";
inline constexpr std::string_view max_restarts = "trainenv.io/max-restarts";
inline constexpr std::string_view rendezvous = "trainenv.io/rendezvous";
// The readiness wait (docs/contract.md §3.1): off, dns or connect; its bound.
inline constexpr std::string_view wait = "trainenv.io/wait";
inline constexpr std::string_view wait_timeout = "trainenv.io/wait-timeout";
// The port the MPI workers' sshd listens on, for the launcher's wait.
inline constexpr std::string_view ssh_port = "trainenv.io/ssh-port";
// Kueue's: a job it scales (ElasticJobsViaWorkloadSlices), and its partial admission.
inline constexpr std::string_view kueue_elastic = "kueue.x-k8s.io/elastic-job";
inline constexpr std::string_view kueue_min_parallelism = "kueue.x-k8s.io/job-min-parallelism";
inline constexpr std::string_view kueue_completions_equal =
    "kueue.x-k8s.io/job-completions-equal-parallelism";
// Kubernetes' own: the container kubectl picks, which a service mesh points at the app.
inline constexpr std::string_view default_container = "kubectl.kubernetes.io/default-container";
// Every trainenv.io/ key trainenv reads or writes on a pod, its template or an owner, and the
// namespace labels its manifests select on: any other trainenv.io/ key is a typo worth a warning
// (unknown_key_warnings), as `istioctl analyze` flags unknown *.istio.io annotations.
inline constexpr std::string_view prefix = "trainenv.io/";
inline constexpr std::string_view status = "trainenv.io/status";
inline constexpr std::string_view known[] = {inject,
                                             policy,
                                             role,
                                             num_nodes,
                                             nproc_per_node,
                                             replicas,
                                             master_port,
                                             injected,
                                             status,
                                             container,
                                             ssh_auth_mount_path,
                                             ssh_secret,
                                             ssh_keys,
                                             run_launcher_as_node,
                                             elastic,
                                             max_restarts,
                                             rendezvous,
                                             wait,
                                             wait_timeout,
                                             ssh_port,
                                             "trainenv.io/hostfile",
                                             "trainenv.io/hostfile-rule",
                                             "trainenv.io/injection",
                                             "trainenv.io/metrics-scraper"};
}  // namespace keys

// One warning per trainenv.io/ key among `keys` that trainenv does not know, each with the
// nearest known key when one is close ("did you mean trainenv.io/num-nodes?"); `what` says what
// they are ("annotation"), `on` whose when not the pod's (" on JobSet team-a/gpt"). At most five,
// so that a pod of many cannot flood.
[[nodiscard]] std::vector<std::string> unknown_key_warnings(std::span<const std::string_view> keys,
                                                            std::string_view what,
                                                            std::string_view on = {});

// unknown_key_warnings for the annotations and then the labels of an object's metadata (a job,
// an owner of a pod), `on` naming it (" on JobSet team-a/gpt").
[[nodiscard]] std::vector<std::string> object_unknown_key_warnings(const nlohmann::json& object,
                                                                   std::string_view on);

// The role an MPI job launches from: never a training role; a node, last, only when the runtime
// says runLauncherAsNode (docs/contract.md §2.2); where a policy's hostfile goes by default.
inline constexpr std::string_view launcher_role = "launcher";
// The port ssh dials when nothing names another (${sshPort}).
inline constexpr std::int64_t default_ssh_port = 22;

}  // namespace trainenv::core
