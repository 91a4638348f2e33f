// Wires the two reload sources to the state's snapshots and metrics.
#include "trainenv/server/state.hpp"

namespace trainenv::server {

std::unique_ptr<file_reloader> policy_reloader(boost::asio::io_context& ioc, server_state& state,
                                               std::string dir,
                                               std::chrono::milliseconds poll_interval,
                                               std::size_t loaded_fingerprint) {
  return std::make_unique<file_reloader>(
      ioc, policy_source(std::move(dir), state.policies), poll_interval, loaded_fingerprint,
      [&state](bool ok) {
        state.metrics.count(ok ? counter::policy_reloads : counter::policy_reload_errors);
      });
}

std::unique_ptr<file_reloader> certificate_reloader(boost::asio::io_context& ioc,
                                                    server_state& state, tls_files files,
                                                    std::chrono::milliseconds poll_interval) {
  auto source = certificate_source(std::move(files), state.certificate);
  const auto published = source.fingerprint();
  return std::make_unique<file_reloader>(
      ioc, std::move(source), poll_interval, published, [&state](bool ok) {
        if (ok)
          state.metrics.set(gauge::certificate_expiry,
                            static_cast<double>(state.certificate.read()->not_after));
        state.metrics.count(ok ? counter::certificate_reloads : counter::certificate_reload_errors);
      });
}

}  // namespace trainenv::server
