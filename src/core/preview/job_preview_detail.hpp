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

// What the pod was told, by meaning: the policy's env items whose templates are one of the
// layout's values, read back from the pod's final env, into p.values (and p.hostfile).
void read_values(previewed_pod& p, const policy& pol, const std::vector<std::string>& sidecars,
                 const std::vector<nlohmann::json>& objects);

}  // namespace trainenv::core
