// What the listeners, the reloaders and the metrics share: the published policies and
// certificate, readiness, and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/metrics.hpp"
#include "trainenv/server/owner_lookup.hpp"
#include "trainenv/server/policies.hpp"
#include "trainenv/server/tls.hpp"

namespace trainenv::server {

struct server_state {
  policy_snapshot policies;
  tls_snapshot certificate;
  server::metrics metrics;
  // How /mutate and /preview read pods' owners; set before the server starts.
  owner_lookup owners;
  // The cluster's DNS domain (--cluster-domain): the pods' full names end in it.
  std::string cluster_domain = "cluster.local";

  // Whether /readyz answers 200; the metrics report it too.
  [[nodiscard]] bool ready() const { return ready_.load(std::memory_order_relaxed); }
  void set_ready(bool ready) {
    ready_.store(ready, std::memory_order_relaxed);
    metrics.set(gauge::ready, ready ? 1 : 0);
  }
  // Publishes a certificate loaded at start-up; the reloader publishes the later ones.
  void publish_certificate(tls_bundle bundle) {
    metrics.set(gauge::certificate_expiry, static_cast<double>(bundle.not_after));
    certificate.publish(std::make_shared<const tls_bundle>(std::move(bundle)));
  }

 private:
  std::atomic<bool> ready_{false};
};

// The reloaders of the policy directory and of the certificate, publishing into `state` and
// reporting to its metrics. `loaded_fingerprint`: that of the set published at start-up.
[[nodiscard]] std::unique_ptr<file_reloader> policy_reloader(
    boost::asio::io_context& ioc, server_state& state, std::string dir,
    std::chrono::milliseconds poll_interval, std::size_t loaded_fingerprint);
[[nodiscard]] std::unique_ptr<file_reloader> certificate_reloader(
    boost::asio::io_context& ioc, server_state& state, tls_files files,
    std::chrono::milliseconds poll_interval);

}  // namespace trainenv::server
