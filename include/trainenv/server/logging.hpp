// Log set-up: spdlog to standard error, as readable text or as one JSON object per line.
#pragma once

#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace trainenv::server {

// `format` is "text" or "json"; `level` one of spdlog's level names. A request thread formats
// its line into a buffer and goes on; a writer thread writes the buffer to standard error in
// batches, within 100 ms, at once after a warning or an error. A request thread never waits on
// standard error: if it stops draining, lines beyond 4 MiB pending are dropped and counted; if a
// write fails (nobody reads the pipe any more), its lines are dropped and counted too. `fd` is
// standard error but for the logging tests.
void setup_logging(const std::string& format, const std::string& level, int fd = STDERR_FILENO);

// Log lines dropped since start, for /metrics (trainenv_log_lines_dropped_total).
[[nodiscard]] std::uint64_t log_lines_dropped();

// Writes what is pending and stops the writer thread (at exit).
void stop_logging();

// Whether an info line would be written: callers skip gathering fields when not.
[[nodiscard]] bool info_enabled();

// A string field longer than this is cut there and marked with its length.
inline constexpr std::size_t max_log_field_bytes = 512;

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
