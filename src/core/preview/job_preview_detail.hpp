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

}  // namespace trainenv::core
