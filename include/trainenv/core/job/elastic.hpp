// Elastic and resized jobs (docs/contract.md §2.3): whether a job is elastic and within which
// bounds, read from the pod, the owners its walk read, or its runtime's elasticPolicy; whether a
// static job asks for torch's c10d rendezvous; and what Kueue says of the job that the user
// should hear. Pure: reads what the walk already fetched, never names an object to fetch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainenv/core/job/layout.hpp"
#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// The first of: the pod's trainenv.io/elastic (and trainenv.io/max-restarts), an owner's, the
// runtime's mlPolicy.torch.elasticPolicy. Bad bounds are a violation naming the annotation.
[[nodiscard]] result<elastic_reading> read_elastic(const pod_view& pod, const owner_values& owners,
                                                   const trainer_settings* trainer);

// "MIN:MAX", 1 <= MIN <= MAX (torchrun's --nnodes form); nullopt for anything else.
[[nodiscard]] std::optional<std::pair<std::int64_t, std::int64_t>> parse_bounds(
    std::string_view text);

// The uid of the job's top owner (a TrainJob, else the JobSet, Volcano Job or Job the walk
// read or the pod's labels name): the same on every pod of the job, a rendezvous id.
[[nodiscard]] std::string job_uid(const pod_view& pod, const owner_values& owners,
                                  const trainer_settings* trainer);

}  // namespace trainenv::core
