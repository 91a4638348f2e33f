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
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {

// trainenv's own image, which the readiness wait runs unless serve --wait-image names another.
inline constexpr std::string_view default_wait_image = "trainenv:" TRAINENV_VERSION;

struct mutate_options {
  // Use this policy regardless of the pod's annotation or framework label (preview ?policy=).
  std::string forced_policy;
  // The cluster's DNS domain (serve --cluster-domain): ${clusterDomain}, for the pods' full names.
  std::string cluster_domain{default_cluster_domain};
  // The readiness wait (docs/contract.md §3.1): serve --wait auto (true) or off, and the image
  // its init container runs (serve --wait-image).
  bool wait = true;
  std::string wait_image{default_wait_image};
};

// What one evaluation decides: a pod, and the admission request it came in, if it came in one
// (a bare pod, as `preview` reads one, is decided as a pod CREATE). Both must outlive it.
struct subject {
  const pod_view& pod;
  const admission_request* request = nullptr;
};

// The front door: one round of the decision, given the owner objects fetched so far
// (docs/contract.md §2.1): the decision, or the next owner object it needs. A request that is
// not a pod CREATE is allowed unchanged here, its pod unread. The shell fetches the object it
// names (the API through its cache, a --owners file, or nothing), adds it or its failure to
// `owners`, and asks again. It calls nothing back and keeps nothing: the decision carries its
// outcome and why it passed, and `owners` what was read and how, for the shell to count.
[[nodiscard]] owner_step<decision> evaluate(const subject& what, const policy_set& policies,
                                            const owner_values& owners,
                                            const mutate_options& options = {});

// A pod needs at most four reads (Job, JobSet, TrainJob, runtime); past this many the chain is
// not one trainenv knows, and the pod is denied.
inline constexpr int max_owner_fetches = 8;
[[nodiscard]] decision owner_chain_too_long(const owner_ref& last);

// evaluate until it decides, calling `fetch(ref, owners)` for each object it needs; `fetch`
// adds the object or its failure to `owners`. The synchronous driver (job previews, tests,
// fuzzers); the server's is server::decide_with_owners.
template <class Fetch>
[[nodiscard]] decision decide(const subject& what, const policy_set& policies,
                              const mutate_options& options, Fetch fetch) {
  owner_values owners;
  for (int fetches = 0;; ++fetches) {
    auto step = evaluate(what, policies, owners, options);
    if (auto* d = std::get_if<decision>(&step)) return std::move(*d);
    const auto& ref = std::get<owner_ref>(step);
    if (fetches == max_owner_fetches) return owner_chain_too_long(ref);
    fetch(ref, owners);
  }
}

// The same for a bare pod, as a view or held whole as nlohmann values (tests, job previews).
template <class Fetch>
[[nodiscard]] decision decide(const pod_view& pod, const policy_set& policies,
                              const mutate_options& options, Fetch fetch) {
  return decide(subject{pod}, policies, options, std::move(fetch));
}
template <class Fetch>
[[nodiscard]] decision decide(const nlohmann::json& pod, const policy_set& policies,
                              const mutate_options& options, Fetch fetch) {
  const pod_view view(pod);
  return decide(subject{view}, policies, options, std::move(fetch));
}

// decide with no API access: a pod that needs an owner is treated as its lookup failing.
[[nodiscard]] decision mutate_pod(const subject& what, const policy_set& policies,
                                  const mutate_options& options = {});
[[nodiscard]] decision mutate_pod(const pod_view& pod, const policy_set& policies,
                                  const mutate_options& options = {});
// The same for a pod held whole as nlohmann values.
[[nodiscard]] decision mutate_pod(const nlohmann::json& pod, const policy_set& policies,
                                  const mutate_options& options = {});
// The same for an admission request: a pod CREATE is decided, anything else allowed unchanged.
[[nodiscard]] decision mutate(const admission_request& request, const policy_set& policies,
                              const mutate_options& options = {});

}  // namespace trainenv::core
