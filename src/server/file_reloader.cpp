// The one reload loop behind the policy and certificate reloaders.
#include "trainenv/server/file_reloader.hpp"

#include <spdlog/spdlog.h>

namespace trainenv::server {

file_reloader::file_reloader(boost::asio::io_context& ioc, reload_source source,
                             std::chrono::milliseconds poll_interval,
                             std::size_t published_fingerprint,
                             std::function<void(bool ok)> on_reload,
                             std::chrono::milliseconds debounce)
    : source_(std::move(source)),
      on_reload_(std::move(on_reload)),
      fingerprint_(published_fingerprint),
      watcher_(
          ioc, source_.dir, poll_interval, [this] { reload(); }, debounce) {}

void file_reloader::reload() {
  const auto fingerprint = source_.fingerprint();
  if (fingerprint == fingerprint_) return;
  auto loaded = source_.load();
  if (!loaded) {
    // Not remembering the fingerprint lets the next poll try again; remembering it reports a
    // broken state once rather than at every poll.
    if (!source_.retry_refused) fingerprint_ = fingerprint;
    spdlog::error("{}: {}", source_.refused, loaded.message());
    if (on_reload_) on_reload_(false);
    return;
  }
  fingerprint_ = fingerprint;
  spdlog::info("{}: {}", source_.reloaded, *loaded);
  if (on_reload_) on_reload_(true);
}

}  // namespace trainenv::server
