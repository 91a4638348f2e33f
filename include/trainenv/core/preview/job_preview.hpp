// The whole job before it is submitted (docs/contract.md §5, `trainenv preview --job`): every
// pod its controllers would create (controllers.hpp), each decided by the same engine as
// /mutate with the job's own objects as its owners, then the job checked as a whole — the
// checks that every pod agrees on the master, the world and the ranks, which the property tests
// use as their oracle too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/preview/controllers.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// One pod of the job, after admission.
// (clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.)
struct previewed_pod {  // NOLINT(bugprone-exception-escape)
  created_pod created;
  decision d;
  nlohmann::json admitted;  // the pod with the patch applied (as created, when denied)
  std::string dns_name;     // hostname.subdomain, when it has both
  // What it was told, by meaning, read from its final env (fieldRefs resolved): the node rank,
  // RANK, the world size, the number of nodes, the master's host and port.
  std::optional<std::int64_t> node_rank;
  std::optional<std::int64_t> rank;
  std::optional<std::string> world_size;
  std::optional<std::string> num_nodes;
  std::optional<std::string> master;
  std::optional<std::string> master_port;
  std::vector<std::string> hostfile;  // an MPI launcher's hosts, one per line
  bool has_hostfile = false;
  // Not a training pod, but a host of a launcher's hostfile: it runs sshd and needs nothing.
  bool host_only = false;
  // An elastic job's (docs/contract.md §2.3): its bounds ("2:4"), the c10d endpoint
  // ("host:port") and the rendezvous id, which every pod must share.
  std::optional<std::string> bounds;
  std::optional<std::string> rendezvous;
  std::optional<std::string> rendezvous_id;
  // The policy's values as the pod got them (env name -> value), for the table.
  std::vector<std::pair<std::string, std::string>> values;
};

// A way the pods disagree (docs/contract.md §5), and the pods it concerns.
struct job_problem {
  std::string message;
  std::vector<std::string> pods;
};

// An elastic job as a whole: its bounds, the pods it runs now, where it rendezvous.
struct elastic_summary {
  std::string bounds;
  std::size_t size = 0;
  std::string rendezvous;
};

struct job_preview {
  created_job job;
  std::vector<previewed_pod> pods;
  std::vector<job_problem> problems;
  std::vector<std::string> checks;  // the checks that had something to check, as said
  std::optional<elastic_summary> elastic;

  [[nodiscard]] bool ok() const { return problems.empty(); }
};

// Lays out `job` (with `given`: its runtime, from --owners or the cluster), decides every pod
// with `policies`, and checks the whole. An error means the job itself could not be laid out.
[[nodiscard]] result<job_preview> preview_job(const nlohmann::json& job,
                                              const std::vector<nlohmann::json>& given,
                                              const policy_set& policies,
                                              const preview_bounds& bounds = cli_preview_bounds,
                                              const mutate_options& options = {});

// What the pod was told, by meaning: the policy's env items whose templates are one of the
// layout's values, read back from `p.admitted`'s final env (the last of duplicate entries, as the
// kubelet takes it), into p's told values (and p.hostfile, from `objects`' ConfigMaps).
void read_values(previewed_pod& p, const policy& pol, const std::vector<std::string>& sidecars,
                 const std::vector<nlohmann::json>& objects);

// The checks alone, over pods already decided (what preview_job runs last).
// `ran`, when given, gets a phrase for each check that had something to check.
[[nodiscard]] std::vector<job_problem> check_job(const created_job& job,
                                                 std::vector<previewed_pod>& pods,
                                                 const policy_set& policies,
                                                 std::vector<std::string>* ran = nullptr);

}  // namespace trainenv::core
