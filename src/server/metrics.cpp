#include "trainenv/server/metrics.hpp"

#include <functional>

#include <fmt/format.h>

namespace trainenv::server {
namespace {

constexpr std::array<std::string_view, route_count> route_names = {
    "/mutate", "/preview", "/healthz", "/readyz", "/metrics", "other"};
constexpr std::array<std::string_view, decision_count> decision_names = {"allowed", "patched",
                                                                         "denied", "error"};

constexpr std::array<std::string_view, owner_lookup_label_count> owner_lookup_names = {
    "hit",       "shared",    "ok",      "not_found",   "unauthorized", "forbidden", "server_error",
    "malformed", "too_large", "timeout", "unreachable", "uid_mismatch", "no_access"};

// The empty name stands for requests no policy applied to.
const std::string no_policy;

// Label values are policy names (DNS labels) or fixed strings; escaping keeps it safe anyway.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

metrics::~metrics() {
  for (auto& s : series_) {
    const std::string* name = s.name.load(std::memory_order_acquire);
    if (name != &no_policy) delete name;
  }
  for (auto& s : owner_series_) delete s.kind.load(std::memory_order_acquire);
}

metrics::owner_series& metrics::owner_series_for(std::string_view kind) {
  const std::size_t start = std::hash<std::string_view>{}(kind) % owner_kind_slots;
  for (std::size_t probe = 0; probe < owner_kind_slots; ++probe) {
    auto& slot = owner_series_[(start + probe) % owner_kind_slots];
    const std::string* name = slot.kind.load(std::memory_order_acquire);
    if (name == nullptr) {
      const auto* fresh = new std::string(kind);  // lives as long as the metrics
      if (slot.kind.compare_exchange_strong(name, fresh, std::memory_order_acq_rel)) return slot;
      delete fresh;
    }
    if (*name == kind) return slot;
  }
  return owner_overflow_;
}

const metrics::owner_series* metrics::find_owner_series(std::string_view kind) const {
  for (const auto& slot : owner_series_) {
    const std::string* name = slot.kind.load(std::memory_order_acquire);
    if (name != nullptr && *name == kind) return &slot;
  }
  return nullptr;
}

void metrics::on_owner_lookup(std::string_view kind, owner_lookup_label result,
                              std::chrono::nanoseconds duration) {
  owner_series_for(kind).lookups[static_cast<std::size_t>(result)].fetch_add(
      1, std::memory_order_relaxed);
  if (result == owner_lookup_label::no_access) return;
  const double seconds = std::chrono::duration<double>(duration).count();
  for (std::size_t i = 0; i < latency_buckets.size(); ++i) {
    if (seconds <= latency_buckets[i]) {
      owner_bucket_counts_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  owner_latency_count_.fetch_add(1, std::memory_order_relaxed);
  owner_latency_sum_ns_.fetch_add(static_cast<std::uint64_t>(duration.count()),
                                  std::memory_order_relaxed);
}

void metrics::on_pod_unrecognised() {
  pods_unrecognised_.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t metrics::owner_lookups(std::string_view kind, owner_lookup_label result) const {
  const auto* s = find_owner_series(kind);
  return s == nullptr
             ? 0
             : s->lookups[static_cast<std::size_t>(result)].load(std::memory_order_relaxed);
}

std::uint64_t metrics::pods_unrecognised() const {
  return pods_unrecognised_.load(std::memory_order_relaxed);
}

metrics::policy_series& metrics::series_for(std::string_view policy) {
  const std::size_t start = std::hash<std::string_view>{}(policy) % policy_slots;
  for (std::size_t probe = 0; probe < policy_slots; ++probe) {
    auto& slot = series_[(start + probe) % policy_slots];
    const std::string* name = slot.name.load(std::memory_order_acquire);
    if (name == nullptr) {
      const auto* fresh =
          policy.empty() ? &no_policy : new std::string(policy);  // lives as long as the process
      if (slot.name.compare_exchange_strong(name, fresh, std::memory_order_acq_rel)) return slot;
      if (fresh != &no_policy) delete fresh;
      // Another thread took the slot; `name` now holds its value.
    }
    if (*name == policy) return slot;
  }
  return overflow_;
}

void metrics::on_request_started() {
  in_flight_.fetch_add(1, std::memory_order_relaxed);
}

void metrics::on_request(route_label route, decision_label decision, std::string_view policy,
                         std::size_t patch_ops, std::chrono::nanoseconds duration) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  auto& series = series_for(policy);
  series.requests[static_cast<std::size_t>(route)][static_cast<std::size_t>(decision)].fetch_add(
      1, std::memory_order_relaxed);
  if (patch_ops != 0) series.patch_ops.fetch_add(patch_ops, std::memory_order_relaxed);
  const double seconds = std::chrono::duration<double>(duration).count();
  for (std::size_t i = 0; i < latency_buckets.size(); ++i) {
    if (seconds <= latency_buckets[i]) {
      bucket_counts_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  latency_count_.fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns_.fetch_add(static_cast<std::uint64_t>(duration.count()),
                            std::memory_order_relaxed);
}

void metrics::on_connection_opened() {
  open_connections_.fetch_add(1, std::memory_order_relaxed);
}
void metrics::on_connection_closed() {
  open_connections_.fetch_sub(1, std::memory_order_relaxed);
}
void metrics::on_connection_refused() {
  refused_connections_.fetch_add(1, std::memory_order_relaxed);
}
void metrics::on_reload(reload_kind kind, bool ok) {
  reloads_[static_cast<std::size_t>(kind)][ok ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
}
void metrics::on_certificate(std::int64_t not_after) {
  cert_not_after_.store(not_after, std::memory_order_relaxed);
}
void metrics::on_readiness(bool ready) {
  ready_.store(ready, std::memory_order_relaxed);
}

std::int64_t metrics::open_connections() const {
  return open_connections_.load(std::memory_order_relaxed);
}
std::uint64_t metrics::refused_connections() const {
  return refused_connections_.load(std::memory_order_relaxed);
}
std::uint64_t metrics::reloads(reload_kind kind, bool ok) const {
  return reloads_[static_cast<std::size_t>(kind)][ok ? 1 : 0].load(std::memory_order_relaxed);
}

std::string metrics::render() const {
  std::string out;
  const auto header = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };

  header("trainenv_requests_total", "counter",
         "HTTP requests answered, by path, decision and policy.");
  const auto each_series = [&](auto&& body) {
    for (const auto& s : series_) {
      if (const auto* name = s.name.load(std::memory_order_acquire)) body(*name, s);
    }
    body(std::string("(overflow)"), overflow_);
  };
  each_series([&](const std::string& policy, const policy_series& s) {
    for (std::size_t r = 0; r < route_count; ++r) {
      for (std::size_t d = 0; d < decision_count; ++d) {
        const auto n = s.requests[r][d].load(std::memory_order_relaxed);
        if (n == 0) continue;
        out +=
            fmt::format("trainenv_requests_total{{path=\"{}\",decision=\"{}\",policy=\"{}\"}} {}\n",
                        route_names[r], decision_names[d], label_value(policy), n);
      }
    }
  });
  header("trainenv_patch_operations_total", "counter",
         "JSON Patch operations returned, by policy.");
  each_series([&](const std::string& policy, const policy_series& s) {
    if (const auto n = s.patch_ops.load(std::memory_order_relaxed); n != 0) {
      out += fmt::format("trainenv_patch_operations_total{{policy=\"{}\"}} {}\n",
                         label_value(policy), n);
    }
  });

  header("trainenv_request_duration_seconds", "histogram",
         "Time from a complete request to its answer.");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_buckets.size(); ++i) {
    cumulative += bucket_counts_[i].load(std::memory_order_relaxed);
    out += fmt::format("trainenv_request_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                       latency_buckets[i], cumulative);
  }
  const auto count = latency_count_.load(std::memory_order_relaxed);
  out += fmt::format("trainenv_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", count);
  out += fmt::format("trainenv_request_duration_seconds_sum {}\n",
                     static_cast<double>(latency_sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  out += fmt::format("trainenv_request_duration_seconds_count {}\n", count);

  header("trainenv_owner_lookups_total", "counter",
         "Owner objects looked up for pods, by owner kind and result (hit: from the cache; "
         "shared: joined another lookup's GET; ok: fetched; else the failure).");
  const auto each_owner = [&](const std::string& kind, const owner_series& s) {
    for (std::size_t r = 0; r < owner_lookup_label_count; ++r) {
      const auto n = s.lookups[r].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out += fmt::format("trainenv_owner_lookups_total{{kind=\"{}\",result=\"{}\"}} {}\n",
                         label_value(kind), owner_lookup_names[r], n);
    }
  };
  for (const auto& s : owner_series_) {
    if (const auto* kind = s.kind.load(std::memory_order_acquire)) each_owner(*kind, s);
  }
  each_owner("(overflow)", owner_overflow_);

  header("trainenv_owner_lookup_duration_seconds", "histogram",
         "Time to look up one owner object, cache hits included.");
  std::uint64_t owner_cumulative = 0;
  for (std::size_t i = 0; i < latency_buckets.size(); ++i) {
    owner_cumulative += owner_bucket_counts_[i].load(std::memory_order_relaxed);
    out += fmt::format("trainenv_owner_lookup_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                       latency_buckets[i], owner_cumulative);
  }
  const auto owner_count = owner_latency_count_.load(std::memory_order_relaxed);
  out +=
      fmt::format("trainenv_owner_lookup_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", owner_count);
  out +=
      fmt::format("trainenv_owner_lookup_duration_seconds_sum {}\n",
                  static_cast<double>(owner_latency_sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  out += fmt::format("trainenv_owner_lookup_duration_seconds_count {}\n", owner_count);

  const auto gauge = [&](std::string_view name, std::string_view help, auto value) {
    header(name, "gauge", help);
    out += fmt::format("{} {}\n", name, value);
  };
  const auto counter = [&](std::string_view name, std::string_view help, auto value) {
    header(name, "counter", help);
    out += fmt::format("{} {}\n", name, value);
  };
  gauge("trainenv_requests_in_flight", "Requests being handled now.",
        in_flight_.load(std::memory_order_relaxed));
  gauge("trainenv_open_connections", "Open client connections, both listeners.",
        open_connections_.load(std::memory_order_relaxed));
  counter("trainenv_refused_connections_total",
          "Connections closed at once: --max-connections was reached.",
          refused_connections_.load(std::memory_order_relaxed));
  counter("trainenv_policy_reloads_total", "Policy sets loaded after a change on disk.",
          reloads(reload_kind::policies, true));
  counter("trainenv_policy_reload_errors_total",
          "Policy changes refused as invalid (the last good set stays).",
          reloads(reload_kind::policies, false));
  counter("trainenv_certificate_reloads_total",
          "Serving certificates loaded after a change on disk.",
          reloads(reload_kind::certificate, true));
  counter("trainenv_certificate_reload_errors_total", "Certificate changes refused as invalid.",
          reloads(reload_kind::certificate, false));
  gauge("trainenv_certificate_expiry_timestamp_seconds",
        "When the serving certificate expires, Unix time.",
        cert_not_after_.load(std::memory_order_relaxed));
  counter("trainenv_pods_unrecognised_total",
          "Pods allowed unchanged because their Job could not be read to recognise them.",
          pods_unrecognised_.load(std::memory_order_relaxed));
  gauge("trainenv_ready", "1 when /readyz answers 200.",
        ready_.load(std::memory_order_relaxed) ? 1 : 0);
  header("trainenv_build_info", "gauge", "The running build.");
  out += fmt::format("trainenv_build_info{{version=\"{}\"}} 1\n", TRAINENV_VERSION);
  return out;
}

}  // namespace trainenv::server
