// What Kubeflow Trainer's objects say about their pods (trainer.kubeflow.org/v1alpha1): a
// (Cluster)TrainingRuntime's framework and spec.mlPolicy, a TrainJob's spec.trainer. Each object is
// read on its own, when it is read (owner_reading), and the two are put together for each pod.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::core {

struct trainer_settings {
  std::optional<std::string> framework;  // the runtime's framework label
  std::string framework_source;          // "label trainer.kubeflow.org/framework of ..."
  // The framework value the runtime's spec.mlPolicy names, for a runtime with no label: "torch",
  // "jax", "xgboost", "flux", or for mpi its implementation's ("mpi", "intel-mpi", "mpich").
  std::optional<std::string> ml_policy;
  std::string ml_policy_source;  // "spec.mlPolicy.mpi of ClusterTrainingRuntime x"
  // Processes per node: the TrainJob's spec.trainer.numProcPerNode, else the runtime's
  // mlPolicy (mpi or torch). A number, or for torch "auto", "cpu" or "gpu".
  std::optional<std::string> num_proc_per_node;
  std::string nproc_source;
  // Trainer's MPI rule: the runtime's numProcPerNode of 1, unset by the TrainJob, means "the
  // GPUs per node" when a node has more.
  bool nproc_one_means_gpus = false;
  bool run_launcher_as_node = false;               // mlPolicy.mpi.runLauncherAsNode
  std::optional<std::string> ssh_auth_mount_path;  // mlPolicy.mpi.sshAuthMountPath
  std::string runtime;                             // "ClusterTrainingRuntime torch-distributed"
  // mlPolicy.torch.elasticPolicy (Trainer v2.0 and v2.1 accepted it and never wired it): the
  // bounds and restarts, each when given.
  std::optional<std::int64_t> elastic_min;
  std::optional<std::int64_t> elastic_max;
  std::optional<std::int64_t> elastic_max_restarts;
  std::string trainjob_uid;  // the job's top owner: the rendezvous id of its elastic pods
  // The TrainJob's apiVersion and kind: its owner kind says what Trainer writes into the pods.
  std::string trainjob_api_version;
  std::string trainjob_kind;
  // The env names the user sets for the trainer (the TrainJob's spec.trainer.env and the
  // runtime's node container): what Trainer's plugins write there under those names is the user's.
  std::vector<std::string> user_env;
};

// What a TrainJob says for its pods: its identity, and spec.trainer's env and numProcPerNode.
struct trainjob_settings {
  std::string uid;
  std::string api_version;
  std::string kind;
  std::vector<std::string> env;                  // the names spec.trainer.env sets
  std::optional<std::string> num_proc_per_node;  // spec.trainer.numProcPerNode
  std::string nproc_source;                      // "spec.trainer.numProcPerNode of TrainJob ..."
};

// What a runtime says, named `runtime_name` in the sources ("ClusterTrainingRuntime x"): every
// field but the TrainJob's; its user_env is the node container's env names.
[[nodiscard]] trainer_settings read_runtime_settings(const nlohmann::json& runtime,
                                                     const std::string& runtime_name);
// What a TrainJob says, named `trainjob_name` in the sources.
[[nodiscard]] trainjob_settings read_trainjob_settings(const nlohmann::json& trainjob,
                                                       const std::string& trainjob_name);
// The two together: the TrainJob's numProcPerNode overrides the runtime's, and the user's env
// names are the TrainJob's, then the runtime's.
[[nodiscard]] trainer_settings join_trainer_settings(const trainer_settings& runtime,
                                                     const trainjob_settings& trainjob);

}  // namespace trainenv::core
