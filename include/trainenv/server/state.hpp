// What the listeners, the reloaders and the metrics share: the published policies and
// certificate, readiness, and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/metrics.hpp"
#include "trainenv/server/policies.hpp"
#include "trainenv/server/tls.hpp"

namespace trainenv::server {

struct server_state {
  policy_snapshot policies;
  tls_snapshot certificate;
  server::metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<std::uint64_t> policy_reloads{0};
  std::atomic<std::uint64_t> policy_reload_errors{0};
  std::atomic<std::uint64_t> tls_reloads{0};
  std::atomic<std::uint64_t> tls_reload_errors{0};
  std::atomic<std::int64_t> cert_not_after{0};  // Unix seconds
};

// The reloaders of the policy directory and of the certificate, publishing into `state` and
// counting into its metrics. `loaded_fingerprint`: that of the set published at start-up.
[[nodiscard]] std::unique_ptr<file_reloader> policy_reloader(boost::asio::io_context& ioc,
                                                             server_state& state, std::string dir,
                                                             std::chrono::milliseconds poll_interval,
                                                             std::size_t loaded_fingerprint);
[[nodiscard]] std::unique_ptr<file_reloader> certificate_reloader(
    boost::asio::io_context& ioc, server_state& state, tls_files files,
    std::chrono::milliseconds poll_interval);

}  // namespace trainenv::server
