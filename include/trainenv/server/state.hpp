// What the listeners, the reloaders and the metrics share: the published policies and
// certificate, readiness, and the metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "trainenv/core/text/names.hpp"
#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/memory_budget.hpp"
#include "trainenv/server/metrics.hpp"
#include "trainenv/server/owner_lookup.hpp"
#include "trainenv/server/policies.hpp"
#include "trainenv/server/preview_access.hpp"
#include "trainenv/server/tls.hpp"

namespace trainenv::server {

struct server_state {
  policy_snapshot policies;
  tls_snapshot certificate;
  server::metrics metrics;
  // What the requests in flight may hold at once; replaced (--max-request-memory) before the
  // server starts and before any API client is made, which hold it by pointer.
  std::unique_ptr<memory_budget> memory = std::make_unique<memory_budget>(memory_budget::options{});
  // How /mutate reads pods' owners (and the previews, on a server without API access: the
  // --owners file or nothing); set before the server starts.
  owner_lookup owners;
  // --preview-listen: who a preview's caller is (TokenReview), and the reads made with the
  // caller's token, through a client and a cache of their own. Both or neither.
  std::optional<preview_access> preview_callers;
  owner_lookup preview_owners;
  // What every decision is made with: the cluster's DNS domain (--cluster-domain, the pods' full
  // names end in it) and the readiness wait (--wait, --wait-image); a preview adds its ?policy=.
  core::mutate_options decide_options;

  // Whether the webhook reads the cluster with its own rights: then no preview is served on the
  // admission port (docs/security.md).
  [[nodiscard]] bool reads_cluster() const { return owners.cache.has_value(); }

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
