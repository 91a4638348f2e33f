// Log set-up: spdlog to standard error, as readable text or as one JSON object per line.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainenv::app {

// `format` is "text" or "json"; `level` one of spdlog's level names. The logger is
// asynchronous: a request thread only enqueues its line (dropping the oldest if the queue is
// ever full) and never waits on standard error.
void setup_logging(const std::string& format, const std::string& level);

// Flushes and stops the logger thread (at exit).
void stop_logging();

// One structured line at info level: JSON fields with --log-format json, "event k=v ..." text
// otherwise.
void log_event(std::string_view event, const nlohmann::ordered_json& fields);

}  // namespace trainenv::app
