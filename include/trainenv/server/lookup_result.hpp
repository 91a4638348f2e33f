// What one owner lookup gave: the object, or which way it failed (core::lookup_failure, the one
// name a denial message, a log line and a metric label all use), and where the answer came from.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"

namespace trainenv::server {

// Where an owner cache's answer came from.
enum class lookup_source {
  fetched,  // this lookup made the GET
  cached,   // a stored object, no GET
  shared,   // joined a GET another lookup of the same key had in flight
};

// Makes the owner_object of a fetched object's JSON: read as the kind the lookup is of
// (core::owner_object's reading constructor), once per GET, not once per pod.
using object_reader =
    std::function<std::shared_ptr<const core::owner_object>(nlohmann::json value)>;

struct lookup_result {
  // None: the object was had. The API client gives not_found, unauthorized, forbidden,
  // server_error, malformed, too_large, timeout and unreachable; the cache adds uid_mismatch, and
  // timeout for a lookup whose budget passed while it waited on another lookup's GET.
  std::optional<core::lookup_failure> failure;
  // ok: the object as the API server gave it, and what was read of it; shared, so a cache hit
  // copies no JSON and reads nothing again.
  std::shared_ptr<const core::owner_object> object;
  std::string message;  // a failure: what failed, one line (the Status message when there is one)
  int http_status = 0;  // 0 when no answer came
  lookup_source source = lookup_source::fetched;
  std::chrono::microseconds latency{0};  // from the call to its result, waiting included

  [[nodiscard]] bool ok() const { return !failure; }
};

}  // namespace trainenv::server
