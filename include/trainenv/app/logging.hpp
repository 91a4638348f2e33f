// Log set-up: spdlog to standard error, as readable text or as one JSON object per line.
#pragma once

#include <string>

namespace trainenv::app {

// `format` is "text" or "json"; `level` one of spdlog's level names.
void setup_logging(const std::string& format, const std::string& level);

}  // namespace trainenv::app
