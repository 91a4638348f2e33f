// The one decision: given a Pod (or an admission request) and the loaded policies, which
// JSON Patch — or which denial — comes back. Pure; never throws on bad input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy.hpp"

namespace trainenv::core {

struct mutate_options {
  // Use this policy regardless of the pod's annotation or framework label (preview ?policy=).
  std::string forced_policy;
  // The cluster's DNS domain (serve --cluster-domain): ${clusterDomain}, for the pods' full names.
  std::string cluster_domain = "cluster.local";
};

// One round of the decision, given the owner objects fetched so far (docs/contract.md §2.1): the
// decision, or the next owner object it needs. The shell fetches that object (the API through
// its cache, a --owners file, or nothing), adds it or its failure to `owners`, and asks again.
[[nodiscard]] owner_step<decision> evaluate(const pod_view& view, const policy_set& policies,
                                            const owner_values& owners,
                                            const mutate_options& options = {});

// A pod needs at most four reads (Job, JobSet, TrainJob, runtime); past this many the chain is
// not one trainenv knows, and the pod is denied.
inline constexpr int max_owner_fetches = 8;
[[nodiscard]] decision owner_chain_too_long(const owner_ref& last);

// evaluate until it decides, calling `fetch(ref, owners)` for each object it needs; `fetch`
// adds the object or its failure to `owners`.
template <class Fetch>
[[nodiscard]] decision decide(const pod_view& pod, const policy_set& policies,
                              const mutate_options& options, Fetch fetch) {
  owner_values owners;
  for (int fetches = 0;; ++fetches) {
    auto step = evaluate(pod, policies, owners, options);
    if (auto* d = std::get_if<decision>(&step)) return std::move(*d);
    const auto& ref = std::get<owner_ref>(step);
    if (fetches == max_owner_fetches) return owner_chain_too_long(ref);
    fetch(ref, owners);
  }
}

// The same for a pod held whole as nlohmann values.
template <class Fetch>
[[nodiscard]] decision decide(const nlohmann::json& pod, const policy_set& policies,
                              const mutate_options& options, Fetch fetch) {
  return decide(pod_view(pod), policies, options, std::move(fetch));
}

// decide with no API access: a pod that needs an owner is treated as its lookup failing.
[[nodiscard]] decision mutate_pod(const pod_view& pod, const policy_set& policies,
                                  const mutate_options& options = {});
// The same for a pod held whole as nlohmann values.
[[nodiscard]] decision mutate_pod(const nlohmann::json& pod, const policy_set& policies,
                                  const mutate_options& options = {});

// Pods on CREATE go to mutate_pod; every other request is allowed unchanged.
[[nodiscard]] decision mutate(const admission_request& request, const policy_set& policies,
                              const mutate_options& options = {});

}  // namespace trainenv::core
