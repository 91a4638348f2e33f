// The one owner of every counter and gauge: the rest of the server reports named events
// (a request answered, a connection opened, a reload) and reads back only what it acts on.
// Updated with relaxed atomics on the request path (no lock), rendered in the Prometheus text
// exposition format for GET /metrics.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainenv::server {

enum class route_label : std::uint8_t { mutate, preview, healthz, readyz, metrics, other };
enum class decision_label : std::uint8_t { allowed, patched, denied, error };
enum class reload_kind : std::uint8_t { policies, certificate };
inline constexpr std::size_t route_count = 6;
inline constexpr std::size_t decision_count = 4;
inline constexpr std::size_t reload_kind_count = 2;

// How one owner lookup of a pod's walk ended: from the cache (hit), joined to another lookup's
// GET (shared), fetched (ok), or a failure, named as lookup_status names it; no_access when no
// API access is configured. A shared lookup that failed counts under its failure.
enum class owner_lookup_label : std::uint8_t {
  hit,
  shared,
  ok,
  not_found,
  unauthorized,
  forbidden,
  server_error,
  malformed,
  too_large,
  timeout,
  unreachable,
  uid_mismatch,
  no_access,
};
inline constexpr std::size_t owner_lookup_label_count = 13;

class metrics {
 public:
  metrics() = default;
  ~metrics();  // frees the policy names the table took
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
  // bounded set, as the owner kinds are data), how it ended and how long it took (zero when no
  // lookup was made: no_access, or a budget already spent).
  void on_owner_lookup(std::string_view kind, owner_lookup_label result,
                       std::chrono::nanoseconds duration);
  // A pod allowed unchanged because its Job could not be read to recognise it (fails open).
  void on_pod_unrecognised();

  [[nodiscard]] std::int64_t open_connections() const;
  [[nodiscard]] std::uint64_t refused_connections() const;
  [[nodiscard]] std::uint64_t reloads(reload_kind kind, bool ok) const;
  [[nodiscard]] std::uint64_t owner_lookups(std::string_view kind, owner_lookup_label result) const;
  [[nodiscard]] std::uint64_t pods_unrecognised() const;

  [[nodiscard]] std::string render() const;

 private:
  // Series per (route, decision, policy). Policies come and go with reloads, so their names
  // live in a fixed table filled by compare-and-swap: lock-free, freed only with the table.
  static constexpr std::size_t policy_slots = 512;
  struct policy_series {
    std::atomic<const std::string*> name{nullptr};
    std::array<std::array<std::atomic<std::uint64_t>, decision_count>, route_count> requests{};
    std::atomic<std::uint64_t> patch_ops{0};
  };
  policy_series& series_for(std::string_view policy);

  std::array<policy_series, policy_slots> series_{};
  policy_series overflow_;  // past policy_slots distinct names
  std::array<std::atomic<std::uint64_t>, latency_buckets.size()> bucket_counts_{};
  std::atomic<std::uint64_t> latency_count_{0};
  std::atomic<std::uint64_t> latency_sum_ns_{0};
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::int64_t> open_connections_{0};
  std::atomic<std::uint64_t> refused_connections_{0};
  // [kind][ok]
  std::array<std::array<std::atomic<std::uint64_t>, 2>, reload_kind_count> reloads_{};
  std::atomic<std::int64_t> cert_not_after_{0};
  // Owner lookups per (kind, result); kinds in a small fixed table filled by compare-and-swap,
  // as the policies above.
  static constexpr std::size_t owner_kind_slots = 32;
  struct owner_series {
    std::atomic<const std::string*> kind{nullptr};
    std::array<std::atomic<std::uint64_t>, owner_lookup_label_count> lookups{};
  };
  owner_series& owner_series_for(std::string_view kind);
  [[nodiscard]] const owner_series* find_owner_series(std::string_view kind) const;
  std::array<owner_series, owner_kind_slots> owner_series_{};
  owner_series owner_overflow_;
  std::array<std::atomic<std::uint64_t>, latency_buckets.size()> owner_bucket_counts_{};
  std::atomic<std::uint64_t> owner_latency_count_{0};
  std::atomic<std::uint64_t> owner_latency_sum_ns_{0};
  std::atomic<std::uint64_t> pods_unrecognised_{0};
  std::atomic<bool> ready_{false};
};

}  // namespace trainenv::server
