// What the listeners, the reloaders and (later) the metrics share.
#pragma once

#include <atomic>
#include <cstdint>

#include "trainenv/server/metrics.hpp"
#include "trainenv/server/policy_store.hpp"

namespace trainenv::server {

struct server_state {
  policy_store policies;
  server::metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<std::uint64_t> policy_reloads{0};
  std::atomic<std::uint64_t> policy_reload_errors{0};
  std::atomic<std::uint64_t> tls_reloads{0};
  std::atomic<std::uint64_t> tls_reload_errors{0};
  std::atomic<std::int64_t> cert_not_after{0};  // Unix seconds
};

}  // namespace trainenv::server
