// The readiness wait (docs/contract.md §3.1): which pod waits on what before its trainer starts,
// from the layout the engine already computed, and the `trainenv-wait` init container that does
// it; the DNS policy a hostNetwork pod needs to find its peers at all.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// The user Istio's traffic redirection leaves alone (its proxy's): a classic Istio sidecar's
// pod waits as it, so that its connections reach the peers rather than a proxy not yet started.
inline constexpr std::int64_t istio_proxy_user = 1337;

struct wait_request {
  const policy& p;
  const topology& t;
  const pod_view& pod;
  const owner_values& owners;
  bool enabled = true;     // serve --wait auto (false: off)
  std::string_view image;  // serve --wait-image
  std::string doctor;      // "jobset/bert": what `trainenv doctor` reads for this job
};

struct wait_outcome {
  std::optional<wait_plan> plan;
  no_wait reason = no_wait::none;
  std::string why;                               // why none, in words
  std::optional<init_container_want> container;  // the init container, when the pod lacks one
  std::string dns_policy;                        // spec.dnsPolicy to set; empty: as it is
  std::vector<std::string> warnings;
};

// The pod's wait. `want` is what the policy renders for it (the hostfile's volume, when this
// patch adds it). An error is a bad trainenv.io/wait or trainenv.io/wait-timeout value.
[[nodiscard]] result<wait_outcome> plan_wait(const wait_request& request, const wants& want);

}  // namespace trainenv::core
