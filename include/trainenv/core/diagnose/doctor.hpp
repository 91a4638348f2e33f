// Why a live job does not start or train (docs/contract.md §5, `trainenv doctor`): the job as
// the API holds it, laid out and decided by the same engine as /mutate and `preview --job`, held
// against its live pods, their Service, EndpointSlices and events. Pure: what the shell read
// (from the API with the user's own credentials, or a `kubectl get -o json` dump) in, findings
// out, each with the pods it concerns, the evidence and the fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// One container's log as `kubectl logs` gives it (doctor --logs): its last lines.
struct pod_log {
  std::string pod;
  std::string container;
  bool previous = false;  // the run before its last restart
  std::string text;
};

// What was read of the job. Every list may be empty; `not_checked` names the optional reads the
// API refused (events, EndpointSlices, Kueue Workloads, Volcano PodGroups), whose findings are
// then not looked for.
// (clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.)
struct live_job {                        // NOLINT(bugprone-exception-escape)
  nlohmann::json target;                 // the job the user applied, as the API holds it
  std::vector<nlohmann::json> objects;   // its other owners: runtime, JobSets, Jobs, ConfigMaps
  std::vector<nlohmann::json> pods;      // the job's pods, with their status
  std::vector<nlohmann::json> services;  // the namespace's Services
  std::vector<nlohmann::json> endpoint_slices;
  std::vector<nlohmann::json> events;     // of the job, its Jobs and its pods
  std::vector<nlohmann::json> workloads;  // Kueue Workloads and Volcano PodGroups of the job
  std::vector<pod_log> logs;              // with --logs: held against the known start-up failures
  std::vector<std::string> not_checked;   // "events: forbidden (403)", ...
};

enum class severity : std::uint8_t { error, warning, note };
[[nodiscard]] std::string_view severity_name(severity s);  // "error", "warning", "note"

// One thing wrong (or worth knowing) about the job.
struct finding {
  std::string kind;  // "stale", "not-admitted", ... (docs/doctor.md lists them)
  severity level = severity::error;
  std::string what;  // the evidence, in words
  std::string fix;   // what to do
  std::vector<std::string> pods;
};

// One row per pod, live or expected.
struct doctor_row {
  std::string name;  // the live pod's name; the layout's for a pod not created
  std::string role;
  std::optional<std::int64_t> expected_rank;  // the node rank its place gives
  std::optional<std::int64_t> actual_rank;    // the node rank its env says
  std::string admitted;                       // "yes", "no", "older", "-" (not trainenv's)
  std::string phase;                          // Pending, Running, ..., "not created"
  std::string ready;                          // "yes", "no", "-"
  std::string published;                      // its DNS name: "yes", "no", "-" (none needed)
  std::string wait;                           // its trainenv-wait: "done", "waiting", ...
  std::vector<std::string> findings;          // the kinds of the findings naming it
};

// clang-tidy 14 reads the implicit special members through nlohmann::json's; none throws.
struct diagnosis {   // NOLINT(bugprone-exception-escape)
  std::string kind;  // "JobSet", "TrainJob", ...
  std::string name;
  std::string namespace_name;
  std::string policy;                 // the policy of its training pods
  std::size_t layout_pods = 0;        // the pods its layout has
  std::size_t live_pods = 0;          // the pods that exist
  std::optional<std::string> world;   // the world size its layout gives
  std::optional<std::string> master;  // the master, or an elastic job's endpoint
  std::string service;                // the Service that names the pods
  std::vector<doctor_row> rows;
  std::vector<finding> findings;
  std::vector<std::string> not_checked;
  job_preview expected;                // the layout, as `preview --job` gives it for the live job
  [[nodiscard]] bool healthy() const;  // no error among the findings
};

// The diagnosis of `job`; an error when the job itself cannot be laid out (its runtime missing,
// a kind trainenv does not know).
[[nodiscard]] result<diagnosis> diagnose(const live_job& job, const policy_set& policies,
                                         const mutate_options& options = {});

}  // namespace trainenv::core
