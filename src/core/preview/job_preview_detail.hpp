// What job_preview.cpp's checks share with job_told.cpp, which reads back what each pod was
// told. Private to the preview wing's sources.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/preview/job_preview.hpp"

namespace trainenv::core {

// "host:port" -> host and port; a host alone when there is no ':'.
[[nodiscard]] std::pair<std::string, std::string> split_endpoint(const std::string& endpoint);

// The mistakes only the whole job shows (job_roles.cpp): marks the pods that are hosts of a
// launcher's hostfile and need nothing, and adds a problem for a role that launches training
// without the ancestor label, or for a job with no training pod.
void check_roles(const created_job& job, std::vector<previewed_pod>& pods,
                 const policy_set& policies, std::vector<job_problem>& problems);

// A typo in a trainenv.io/ key on the job object itself, as a note of the job (a pod's own keys
// are warnings of its decision).
void note_unknown_keys(created_job& job);

}  // namespace trainenv::core
