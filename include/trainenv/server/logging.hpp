// Log set-up: spdlog to standard error, as readable text or as one JSON object per line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace trainenv::server {

// `format` is "text" or "json"; `level` one of spdlog's level names. The logger is
// asynchronous: a request thread only enqueues its line (dropping the oldest if the queue is
// ever full) and never waits on standard error.
void setup_logging(const std::string& format, const std::string& level);

// Flushes and stops the logger thread (at exit).
void stop_logging();

// Whether an info line would be written: callers skip gathering fields when not.
[[nodiscard]] bool info_enabled();

// A field whose value is std::monostate is left out of the line.
struct log_field {
  std::string_view key;
  std::variant<std::monostate, std::string_view, std::int64_t, bool> value;
};

// One structured line at info level: {"ts","level","msg":event, fields...} with --log-format
// json, "event k=v ..." text otherwise. Formatted once, straight into the line: this runs for
// every admission.
void log_event(std::string_view event, std::initializer_list<log_field> fields);

}  // namespace trainenv::server
