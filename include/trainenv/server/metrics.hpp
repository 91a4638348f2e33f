// The one owner of every counter and gauge: the rest of the server reports named events
// (a request answered, a connection opened, a reload) and reads back only what it acts on.
// Kept in a prometheus-cpp registry (Debian prometheus-cpp-dev, the core library only), rendered
// by its text serializer for GET /metrics. The request path takes no lock but the histograms';
// docs/performance.md has what this costs against the hand-written counters it replaced.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "trainenv/core/owners.hpp"
#include "trainenv/server/lookup_result.hpp"

namespace trainenv::server {

enum class route_label : std::uint8_t {
  mutate,
  preview,
  preview_job,
  healthz,
  readyz,
  metrics,
  other
};
enum class decision_label : std::uint8_t { allowed, patched, denied, error };
enum class reload_kind : std::uint8_t { policies, certificate };
inline constexpr std::size_t route_count = 7;
inline constexpr std::size_t decision_count = 4;
inline constexpr std::size_t reload_kind_count = 2;

// The `result` label of trainenv_owner_lookups_total, an operator-facing contract
// (docs/operations.md): a failure by its snake_case name ("not_found", "timeout", ...,
// "no_access"; a shared lookup that failed counts under its failure), else where the object came
// from: "hit" (the cache), "shared" (joined another lookup's GET) or "ok" (fetched).
[[nodiscard]] std::string_view owner_lookup_result(lookup_source source,
                                                   std::optional<core::lookup_failure> failure);

class metrics {
 public:
  metrics();
  ~metrics();
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  // Buckets from 25 µs to 10 s, in seconds.
  static constexpr std::array<double, 18> latency_buckets = {
      0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,    0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};

  // A request is being handled; each is followed by one on_request.
  void on_request_started();
  // A request answered (or refused): its route, decision, policy ("" for none), patch size and
  // the time from its start.
  void on_request(route_label route, decision_label decision, std::string_view policy,
                  std::size_t patch_ops, std::chrono::nanoseconds duration);
  void on_connection_opened();
  void on_connection_closed();
  // A connection closed at once because --max-connections was reached.
  void on_connection_refused();
  // A reload of the policies or the certificate: published (ok) or refused.
  void on_reload(reload_kind kind, bool ok);
  // The serving certificate now published expires at `not_after` (Unix seconds).
  void on_certificate(std::int64_t not_after);
  void on_readiness(bool ready);
  // One owner object looked up for a pod: its kind (the OwnerKind's name, "job", "jobset"; a
  // bounded set, as the owner kinds are data), how it ended (where from, or how it failed:
  // owner_lookup_result names it) and how long it took (zero when no lookup was made: no_access,
  // or a budget already spent).
  void on_owner_lookup(std::string_view kind, lookup_source source,
                       std::optional<core::lookup_failure> failure,
                       std::chrono::nanoseconds duration);
  // A pod allowed unchanged because its Job could not be read to recognise it (fails open).
  void on_pod_unrecognised();
  // A pod allowed unchanged because its runtime names a framework no policy lists.
  void on_pod_unknown_framework();
  // The API client: a TLS connection opened, a GET sent, the service-account token re-read
  // with a new value. The owner cache: an object evicted at its size bound.
  void on_api_connection();
  void on_api_request();
  void on_token_reload();
  void on_owner_cache_eviction();

  [[nodiscard]] std::int64_t open_connections() const;
  [[nodiscard]] std::uint64_t refused_connections() const;
  [[nodiscard]] std::uint64_t reloads(reload_kind kind, bool ok) const;
  [[nodiscard]] std::uint64_t owner_lookups(
      std::string_view kind, lookup_source source,
      std::optional<core::lookup_failure> failure = std::nullopt) const;
  [[nodiscard]] std::uint64_t pods_unrecognised() const;
  [[nodiscard]] std::uint64_t pods_unknown_framework() const;
  [[nodiscard]] std::uint64_t api_connections() const;
  [[nodiscard]] std::uint64_t api_requests() const;
  [[nodiscard]] std::uint64_t token_reloads() const;
  [[nodiscard]] std::uint64_t owner_cache_evictions() const;

  [[nodiscard]] std::string render() const;

 private:
  struct impl;  // the registry, its families, and the series cached per policy and owner kind
  std::unique_ptr<impl> impl_;
};

}  // namespace trainenv::server
