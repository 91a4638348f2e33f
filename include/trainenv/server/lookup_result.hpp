// What one owner lookup gave: the object, or which way it failed, in words a denial message
// and a metric label can use.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainenv::server {

enum class lookup_status {
  ok,
  not_found,     // 404
  unauthorized,  // 401, also after the token was re-read and the GET retried
  forbidden,     // 403 (RBAC)
  server_error,  // 5xx and any other unexpected status
  malformed,     // the answer is not a JSON object
  too_large,     // the answer is over the size bound; not read in full
  timeout,       // the lookup's time budget passed
  unreachable,   // no connection, TLS refused, or the connection lost mid-answer
  uid_mismatch,  // the object's metadata.uid is not the owner reference's (it was recreated)
};
inline constexpr std::size_t lookup_status_count = 10;

// A stable snake_case name, for metric labels and messages.
[[nodiscard]] constexpr std::string_view to_string(lookup_status s) {
  constexpr std::array<std::string_view, lookup_status_count> names = {
      "ok",        "not_found", "unauthorized", "forbidden",   "server_error",
      "malformed", "too_large", "timeout",      "unreachable", "uid_mismatch"};
  return names[static_cast<std::size_t>(s)];
}

// Where an owner cache's answer came from.
enum class lookup_source {
  fetched,  // this lookup made the GET
  cached,   // a stored object, no GET
  shared,   // joined a GET another lookup of the same key had in flight
};

struct lookup_result {
  lookup_status status = lookup_status::ok;
  // ok: the object as the API server gave it; shared, so a cache hit copies no JSON.
  std::shared_ptr<const nlohmann::json> object;
  std::string message;  // not ok: what failed, one line (the Status message when there is one)
  int http_status = 0;  // 0 when no answer came
  lookup_source source = lookup_source::fetched;
  std::chrono::microseconds latency{0};  // from the call to its result, waiting included

  [[nodiscard]] bool ok() const { return status == lookup_status::ok; }
};

}  // namespace trainenv::server
