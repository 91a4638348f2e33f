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

#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/policy/owners.hpp"
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
// A decision's outcome as counted, and `error` for a request answered 4xx or 5xx.
enum class decision_label : std::uint8_t { allowed, patched, denied, error };
[[nodiscard]] constexpr decision_label label_of(core::outcome o) {
  static_assert(static_cast<int>(core::outcome::allowed) == 0 &&
                static_cast<int>(core::outcome::patched) == 1 &&
                static_cast<int>(core::outcome::denied) == 2);
  return static_cast<decision_label>(o);
}
inline constexpr std::size_t route_count = 7;
inline constexpr std::size_t decision_count = 4;

// The server's series without labels, each declared once: its name in the enum and, at the same
// place in the table below, its metric name and help (a static_assert keeps the two in step).
// Adding one is a line in each and a call of metrics::count or metrics::set where it happens;
// the registry, /metrics and metrics::value need nothing more.
enum class counter : std::uint8_t {
  refused_connections,
  policy_reloads,
  policy_reload_errors,
  certificate_reloads,
  certificate_reload_errors,
  pods_unrecognised,
  pods_unknown_framework,
  api_connections,
  api_requests,
  api_token_reloads,
  owner_cache_evictions,
  log_lines_dropped,
  preview_auth_failures,
  budget_refusals,
};
enum class gauge : std::uint8_t {
  requests_in_flight,
  open_connections,
  certificate_expiry,
  ready,
};

template <class Id>
struct series_info {
  Id id;
  std::string_view name;
  std::string_view help;
};

inline constexpr std::array counter_series = {
    series_info<counter>{counter::refused_connections, "trainenv_refused_connections_total",
                         "Connections closed at once: their listener's connection cap "
                         "(--max-connections, --max-preview-connections, "
                         "--max-metrics-connections) was reached."},
    series_info<counter>{counter::policy_reloads, "trainenv_policy_reloads_total",
                         "Policy sets loaded after a change on disk."},
    series_info<counter>{counter::policy_reload_errors, "trainenv_policy_reload_errors_total",
                         "Policy changes refused as invalid (the last good set stays)."},
    series_info<counter>{counter::certificate_reloads, "trainenv_certificate_reloads_total",
                         "Serving certificates loaded after a change on disk."},
    series_info<counter>{counter::certificate_reload_errors,
                         "trainenv_certificate_reload_errors_total",
                         "Certificate changes refused as invalid."},
    series_info<counter>{
        counter::pods_unrecognised, "trainenv_pods_unrecognised_total",
        "Pods allowed unchanged because their Job could not be read to recognise them."},
    series_info<counter>{counter::pods_unknown_framework, "trainenv_pods_unknown_framework_total",
                         "Pods allowed unchanged because their TrainJob's runtime names a "
                         "framework no policy lists."},
    series_info<counter>{counter::api_connections, "trainenv_api_connections_total",
                         "TLS connections the API client opened to the API server."},
    series_info<counter>{counter::api_requests, "trainenv_api_requests_total",
                         "GETs the API client sent to the API server, retries included."},
    series_info<counter>{
        counter::api_token_reloads, "trainenv_api_token_reloads_total",
        "Times the service-account token file was re-read with a new token (rotation)."},
    series_info<counter>{counter::owner_cache_evictions, "trainenv_owner_cache_evictions_total",
                         "Owner objects evicted from the cache at its size bound (before their "
                         "time to live)."},
    series_info<counter>{counter::log_lines_dropped, "trainenv_log_lines_dropped_total",
                         "Log lines dropped: standard error stalled, or its reader went away."},
    series_info<counter>{counter::preview_auth_failures, "trainenv_preview_auth_failures_total",
                         "Previews refused on --preview-listen: no bearer token, one the API "
                         "server rejected, or a TokenReview that could not be had."},
    series_info<counter>{counter::budget_refusals, "trainenv_budget_refusals_total",
                         "Requests refused for a budget: no room in --max-request-memory within "
                         "the read timeout, or a preview's answer over its bound."},
};
inline constexpr std::array gauge_series = {
    series_info<gauge>{gauge::requests_in_flight, "trainenv_requests_in_flight",
                       "Requests being handled now."},
    series_info<gauge>{gauge::open_connections, "trainenv_open_connections",
                       "Open client connections, both listeners."},
    series_info<gauge>{gauge::certificate_expiry, "trainenv_certificate_expiry_timestamp_seconds",
                       "When the serving certificate expires, Unix time."},
    series_info<gauge>{gauge::ready, "trainenv_ready", "1 when /readyz answers 200."},
};

template <class Id, std::size_t n>
constexpr bool in_enum_order(const std::array<series_info<Id>, n>& table) {
  for (std::size_t i = 0; i < n; ++i) {
    if (static_cast<std::size_t>(table[i].id) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(counter_series) &&
                  counter_series.size() == static_cast<std::size_t>(counter::budget_refusals) + 1,
              "counter_series lists every counter, in the enum's order");
static_assert(in_enum_order(gauge_series) &&
                  gauge_series.size() == static_cast<std::size_t>(gauge::ready) + 1,
              "gauge_series lists every gauge, in the enum's order");

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

  // A counter from the table above goes up by `n`; a gauge is set, or moved by `delta`.
  void count(counter c, double n = 1);
  void set(gauge g, double value);
  void add(gauge g, double delta);
  [[nodiscard]] std::uint64_t value(counter c) const;
  [[nodiscard]] double value(gauge g) const;

  // The labelled series. A request is being handled (requests_in_flight up); each is followed
  // by one on_request.
  void on_request_started();
  // A request answered (or refused): its route, decision, policy ("" for none), patch size and
  // the time from its start.
  void on_request(route_label route, decision_label decision, std::string_view policy,
                  std::size_t patch_ops, std::chrono::nanoseconds duration);
  // One owner object looked up for a pod: its kind (the OwnerKind's name, "job", "jobset"; a
  // bounded set, as the owner kinds are data), how it ended (where from, or how it failed:
  // owner_lookup_result names it) and how long it took (zero when no lookup was made: no_access,
  // or a budget already spent).
  void on_owner_lookup(std::string_view kind, lookup_source source,
                       std::optional<core::lookup_failure> failure,
                       std::chrono::nanoseconds duration);
  [[nodiscard]] std::uint64_t owner_lookups(
      std::string_view kind, lookup_source source,
      std::optional<core::lookup_failure> failure = std::nullopt) const;
  // A pod a policy applied to was admitted: its readiness wait (docs/contract.md §3.1), counted
  // by policy and result: "added", "present" (reinvocation), or why it got none
  // (core::no_wait_name: "switched-off", "nothing-to-dial", ...).
  void on_wait(std::string_view policy, const core::decision& d);
  [[nodiscard]] std::uint64_t waits(std::string_view policy, std::string_view result) const;

  [[nodiscard]] std::string render() const;

 private:
  struct impl;  // the registry, its families, and the series cached per policy and owner kind
  std::unique_ptr<impl> impl_;
};

}  // namespace trainenv::server
