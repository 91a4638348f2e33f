#include "trainenv/server/metrics.hpp"

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "trainenv/server/logging.hpp"

namespace trainenv::server {
namespace {

namespace prom = prometheus;

constexpr std::array<std::string_view, route_count> route_names = {
    "/mutate", "/preview", "/preview/job", "/healthz", "/readyz", "/metrics", "other"};
constexpr std::array<std::string_view, decision_count> decision_names = {"allowed", "patched",
                                                                         "denied", "error"};

// Where the counter of one (source, failure) pair sits in an owner kind's series: the three
// sources of an object, then one per failure. A storage index only; the label is
// owner_lookup_result's.
constexpr std::size_t owner_source_count = 3;
constexpr std::size_t owner_result_slots = owner_source_count + core::lookup_failure_count;
std::size_t owner_result_slot(lookup_source source, std::optional<core::lookup_failure> failure) {
  return failure ? owner_source_count + static_cast<std::size_t>(*failure)
                 : static_cast<std::size_t>(source);
}

// The name the series past a table's slots share.
constexpr std::string_view overflow_name = "(overflow)";

// Series found by name without a lock: policies (they come and go with reloads) and owner kinds
// (data too) fill a fixed table by compare-and-swap; a name lives as long as the table. Past
// `slots` distinct names, they share the overflow series.
template <class Series, std::size_t slots>
class named_series {
 public:
  named_series() = default;
  ~named_series() {
    for (auto& s : table_) delete s.name.load(std::memory_order_acquire);
  }
  named_series(const named_series&) = delete;
  named_series& operator=(const named_series&) = delete;

  // The series of `name`, with the label value it carries.
  std::pair<Series&, std::string_view> find_or_add(std::string_view name) {
    const std::size_t start = std::hash<std::string_view>{}(name) % slots;
    for (std::size_t probe = 0; probe < slots; ++probe) {
      auto& slot = table_[(start + probe) % slots];
      const std::string* taken = slot.name.load(std::memory_order_acquire);
      if (taken == nullptr) {
        const auto* fresh = new std::string(name);
        if (slot.name.compare_exchange_strong(taken, fresh, std::memory_order_acq_rel)) {
          return {slot.series, *fresh};
        }
        delete fresh;
        // Another thread took the slot; `taken` now holds its value.
      }
      if (*taken == name) return {slot.series, *taken};
    }
    return {overflow_, overflow_name};
  }

  [[nodiscard]] const Series* find(std::string_view name) const {
    for (const auto& slot : table_) {
      const std::string* taken = slot.name.load(std::memory_order_acquire);
      if (taken != nullptr && *taken == name) return &slot.series;
    }
    return nullptr;
  }

 private:
  struct slot {
    std::atomic<const std::string*> name{nullptr};
    Series series;
  };
  std::array<slot, slots> table_{};
  Series overflow_;
};

// The counter in `cell`, added to its family by `add` on first use. Two threads may both add
// it: Add returns the same counter for the same labels.
template <class Add>
prom::Counter& cached(std::atomic<prom::Counter*>& cell, Add add) {
  prom::Counter* c = cell.load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &add();
    cell.store(c, std::memory_order_release);
  }
  return *c;
}

}  // namespace

std::string_view owner_lookup_result(lookup_source source,
                                     std::optional<core::lookup_failure> failure) {
  using core::lookup_failure;
  if (failure) {
    switch (*failure) {
      case lookup_failure::not_found:
        return "not_found";
      case lookup_failure::uid_mismatch:
        return "uid_mismatch";
      case lookup_failure::unauthorized:
        return "unauthorized";
      case lookup_failure::forbidden:
        return "forbidden";
      case lookup_failure::server_error:
        return "server_error";
      case lookup_failure::malformed:
        return "malformed";
      case lookup_failure::too_large:
        return "too_large";
      case lookup_failure::timeout:
        return "timeout";
      case lookup_failure::unreachable:
        return "unreachable";
      case lookup_failure::no_access:
        return "no_access";
    }
    return "server_error";  // not reached: every failure is named above
  }
  switch (source) {
    case lookup_source::cached:
      return "hit";
    case lookup_source::shared:
      return "shared";
    case lookup_source::fetched:
      break;
  }
  return "ok";
}

// The `result` label of trainenv_waits_total, in the order wait_slot gives them.
constexpr std::array<std::string_view, 7> wait_results = {
    "added",        "present",         "none",         "no-policy-wait",
    "switched-off", "nothing-to-dial", "waits-already"};

static_assert(static_cast<std::size_t>(core::no_wait::waits_already) + 2 == wait_results.size() - 1,
              "wait_results names every core::no_wait after added and present");

std::size_t wait_slot(const core::decision& d) {
  if (d.wait) return d.wait->present ? 1 : 0;
  return 2 + static_cast<std::size_t>(d.no_wait_reason);
}

struct metrics::impl {
  // Family::Add takes the family's lock and hashes the labels. The request path instead finds its
  // counters by name in a lock-free table (named_series), each counter added to its family once,
  // on its first use, and cached. Only the histograms' Observe takes a mutex (prometheus-cpp).
  struct policy_series {
    std::array<std::array<std::atomic<prom::Counter*>, decision_count>, route_count> requests{};
    std::atomic<prom::Counter*> patch_ops{nullptr};
    std::array<std::atomic<prom::Counter*>, wait_results.size()> waits{};
  };
  struct owner_series {
    std::array<std::atomic<prom::Counter*>, owner_result_slots> lookups{};
  };

  impl()
      : requests(prom::BuildCounter()
                     .Name("trainenv_requests_total")
                     .Help("HTTP requests answered, by path, decision and policy.")
                     .Register(registry)),
        patch_ops(prom::BuildCounter()
                      .Name("trainenv_patch_operations_total")
                      .Help("JSON Patch operations returned, by policy.")
                      .Register(registry)),
        latency(prom::BuildHistogram()
                    .Name("trainenv_request_duration_seconds")
                    .Help("Time from a complete request to its answer.")
                    .Register(registry)
                    .Add({}, prom::Histogram::BucketBoundaries(latency_buckets.begin(),
                                                               latency_buckets.end()))),
        owner_lookups(prom::BuildCounter()
                          .Name("trainenv_owner_lookups_total")
                          .Help("Owner objects looked up for pods, by owner kind and result (hit: "
                                "from the cache; shared: joined another lookup's GET; ok: "
                                "fetched; else the failure).")
                          .Register(registry)),
        waits(prom::BuildCounter()
                  .Name("trainenv_waits_total")
                  .Help("Pods admitted with a policy, by policy and readiness wait: added, "
                        "present (reinvocation), or why none (no-policy-wait, switched-off, "
                        "nothing-to-dial, waits-already).")
                  .Register(registry)),
        owner_latency(prom::BuildHistogram()
                          .Name("trainenv_owner_lookup_duration_seconds")
                          .Help("Time to look up one owner object, cache hits included.")
                          .Register(registry)
                          .Add({}, prom::Histogram::BucketBoundaries(latency_buckets.begin(),
                                                                     latency_buckets.end()))) {
    for (std::size_t i = 0; i < counter_series.size(); ++i) {
      counters[i] = &prom::BuildCounter()
                         .Name(std::string(counter_series[i].name))
                         .Help(std::string(counter_series[i].help))
                         .Register(registry)
                         .Add({});
    }
    for (std::size_t i = 0; i < gauge_series.size(); ++i) {
      gauges[i] = &prom::BuildGauge()
                       .Name(std::string(gauge_series[i].name))
                       .Help(std::string(gauge_series[i].help))
                       .Register(registry)
                       .Add({});
    }
    prom::BuildGauge()
        .Name("trainenv_build_info")
        .Help("The running build.")
        .Register(registry)
        .Add({{"version", TRAINENV_VERSION}})
        .Set(1);
  }
  ~impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  prom::Registry registry;
  prom::Family<prom::Counter>& requests;
  prom::Family<prom::Counter>& patch_ops;
  prom::Histogram& latency;
  prom::Family<prom::Counter>& owner_lookups;
  prom::Family<prom::Counter>& waits;
  prom::Histogram& owner_latency;
  std::array<prom::Counter*, counter_series.size()> counters{};
  std::array<prom::Gauge*, gauge_series.size()> gauges{};
  // The log writer counts its drops itself (it is process-wide and runs before any metrics
  // exist); render() brings counter::log_lines_dropped up to its total.
  std::mutex log_lines_seen_mutex;
  std::uint64_t log_lines_seen = 0;  // guarded by the mutex above
  named_series<policy_series, 512> policies;
  named_series<owner_series, 32> owner_kinds;
};

metrics::metrics() : impl_(std::make_unique<impl>()) {}
metrics::~metrics() = default;

void metrics::count(counter c, double n) {
  impl_->counters[static_cast<std::size_t>(c)]->Increment(n);
}
void metrics::set(gauge g, double value) {
  impl_->gauges[static_cast<std::size_t>(g)]->Set(value);
}
void metrics::add(gauge g, double delta) {
  impl_->gauges[static_cast<std::size_t>(g)]->Increment(delta);
}
std::uint64_t metrics::value(counter c) const {
  return static_cast<std::uint64_t>(impl_->counters[static_cast<std::size_t>(c)]->Value());
}
double metrics::value(gauge g) const {
  return impl_->gauges[static_cast<std::size_t>(g)]->Value();
}

void metrics::on_request_started() {
  add(gauge::requests_in_flight, 1);
}

void metrics::on_request(route_label route, decision_label decision, std::string_view policy,
                         std::size_t patch_ops, std::chrono::nanoseconds duration) {
  auto& m = *impl_;
  add(gauge::requests_in_flight, -1);
  // Not a structured binding: clang 14 cannot capture one in the lambdas below.
  const auto found = m.policies.find_or_add(policy);
  auto& series = found.first;
  const std::string_view label = found.second;
  const auto r = static_cast<std::size_t>(route);
  const auto d = static_cast<std::size_t>(decision);
  cached(series.requests[r][d], [&]() -> prom::Counter& {
    return m.requests.Add({{"path", std::string(route_names[r])},
                           {"decision", std::string(decision_names[d])},
                           {"policy", std::string(label)}});
  }).Increment();
  if (patch_ops != 0) {
    cached(series.patch_ops, [&]() -> prom::Counter& {
      return m.patch_ops.Add({{"policy", std::string(label)}});
    }).Increment(static_cast<double>(patch_ops));
  }
  m.latency.Observe(std::chrono::duration<double>(duration).count());
}

void metrics::on_wait(std::string_view policy, const core::decision& d) {
  auto& m = *impl_;
  const auto found = m.policies.find_or_add(policy);
  auto& series = found.first;
  const std::string_view label = found.second;
  const auto slot = wait_slot(d);
  cached(series.waits[slot], [&]() -> prom::Counter& {
    return m.waits.Add(
        {{"policy", std::string(label)}, {"result", std::string(wait_results[slot])}});
  }).Increment();
}

std::uint64_t metrics::waits(std::string_view policy, std::string_view result) const {
  const auto* series = impl_->policies.find(policy);
  const auto* const at = std::find(wait_results.begin(), wait_results.end(), result);
  if (series == nullptr || at == wait_results.end()) return 0;
  const auto* counter = series->waits[static_cast<std::size_t>(at - wait_results.begin())].load();
  return counter == nullptr ? 0 : static_cast<std::uint64_t>(counter->Value());
}

void metrics::on_owner_lookup(std::string_view kind, lookup_source source,
                              std::optional<core::lookup_failure> failure,
                              std::chrono::nanoseconds duration) {
  auto& m = *impl_;
  const auto found = m.owner_kinds.find_or_add(kind);
  auto& series = found.first;
  const std::string_view label = found.second;
  cached(series.lookups[owner_result_slot(source, failure)], [&]() -> prom::Counter& {
    return m.owner_lookups.Add({{"kind", std::string(label)},
                                {"result", std::string(owner_lookup_result(source, failure))}});
  }).Increment();
  // No lookup was made: nothing to time.
  if (failure != core::lookup_failure::no_access)
    m.owner_latency.Observe(std::chrono::duration<double>(duration).count());
}
std::uint64_t metrics::owner_lookups(std::string_view kind, lookup_source source,
                                     std::optional<core::lookup_failure> failure) const {
  const auto* series = impl_->owner_kinds.find(kind);
  const auto* counter =
      series != nullptr
          ? series->lookups[owner_result_slot(source, failure)].load(std::memory_order_acquire)
          : nullptr;
  return counter != nullptr ? static_cast<std::uint64_t>(counter->Value()) : 0;
}
std::string metrics::render() const {
  {
    const std::lock_guard lock(impl_->log_lines_seen_mutex);
    const auto total = server::log_lines_dropped();
    impl_->counters[static_cast<std::size_t>(counter::log_lines_dropped)]->Increment(
        static_cast<double>(total - impl_->log_lines_seen));
    impl_->log_lines_seen = total;
  }
  return prom::TextSerializer().Serialize(impl_->registry.Collect());
}

}  // namespace trainenv::server
