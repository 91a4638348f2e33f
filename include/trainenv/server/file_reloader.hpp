// Keeps a published value in step with files on disk, for the policy directory and the serving
// certificate alike: a dir_watcher says something may have changed; a fingerprint of the files
// says whether it did; a load that succeeds publishes, one that fails is logged and the last
// good value stays in force.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "trainenv/core/text/result.hpp"
#include "trainenv/server/dir_watcher.hpp"

namespace trainenv::server {

// What one reloaded input is and how to read it.
struct reload_source {
  // The log lines, which operators grep for (docs/operations.md): "<reloaded>: <what load
  // says>" and "<refused>: <why>".
  std::string reloaded;  // "policies reloaded"
  std::string refused;   // "policy reload failed, keeping the last good set"
  std::string dir;       // the directory watched
  // A cheap fingerprint of the files as they are now.
  std::function<std::size_t()> fingerprint;
  // Loads the files and publishes them; a line for the log, or why they were refused.
  std::function<core::result<std::string>()> load;
  // Whether a refused state of the files is tried again at every poll (a certificate not valid
  // yet becomes valid with time) or only once the files change again (an invalid policy set
  // stays invalid, and is reported once).
  bool retry_refused = false;
};

class file_reloader {
 public:
  // `published_fingerprint`: the fingerprint of what is published already. `on_reload` runs
  // after each attempt with whether it succeeded (the metrics count them).
  file_reloader(boost::asio::io_context& ioc, reload_source source,
                std::chrono::milliseconds poll_interval, std::size_t published_fingerprint,
                std::function<void(bool ok)> on_reload = {},
                std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  file_reloader(const file_reloader&) = delete;
  file_reloader& operator=(const file_reloader&) = delete;

  bool start() { return watcher_.start(); }
  void stop() { watcher_.stop(); }

 private:
  void reload();

  reload_source source_;
  std::function<void(bool)> on_reload_;
  std::size_t fingerprint_;  // only touched by reload(), which the watcher serialises
  dir_watcher watcher_;
};

}  // namespace trainenv::server
